import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { rawHttp } from "./raw-http.js";

/** Issue 12, points 4, 5 and 7: slow clients, hostile bodies and headers, secrets in URLs. */
describe(`hostile clients (${dbKind})`, () => {
  let s: TestServer;
  let logs = "";
  beforeAll(async () => {
    const stream = new PassThrough();
    stream.on("data", (d) => (logs += d.toString()));
    s = await startServer({ REQUEST_TIMEOUT_MS: "2000", LOG_LEVEL: "info" }, { logStream: stream });
  });
  afterAll(() => s.close());

  const head = (method: string, path: string, extra: Record<string, string | number> = {}) =>
    `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${s.apiKey}\r\n` +
    Object.entries(extra)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("") +
    "\r\n";

  describe("slow clients", () => {
    it("a client that sends its headers and then stalls its body gets 408 and is disconnected", async () => {
      const r = await rawHttp(s.url, [head("POST", "/v1/cards", { "Content-Type": "application/json", "Content-Length": 100 }), '{"amount'], { waitMs: 15_000 });
      expect(r.status).toBe(408);
      expect(r.body.error.code).toBe("request_timeout");
      expect(r.body.error.request_id).toBe(r.headers["request-id"]);
      expect(r.elapsedMs).toBeLessThan(10_000);
    });

    it("a trickled body that never ends within the timeout gets 408", async () => {
      const body = `{"amount_cents": 100${" ".repeat(60)}}`;
      const parts = [head("POST", "/v1/cards", { "Content-Type": "application/json", "Content-Length": body.length }), ...body.split("")];
      const r = await rawHttp(s.url, parts, { gapMs: 100, waitMs: 15_000 });
      expect(r.status).toBe(408);
      expect(r.elapsedMs).toBeLessThan(10_000);
    });

    it("a slow network that delivers the whole request within the timeout is served", async () => {
      const body = '{"amount_cents": 120}';
      const parts = [head("POST", "/v1/cards", { "Content-Type": "application/json", "Content-Length": body.length }), body.slice(0, 8), body.slice(8)];
      const r = await rawHttp(s.url, parts, { gapMs: 500 });
      expect(r.status).toBe(201);
      expect(r.body.spending_limit_cents).toBe(120);
    });
  });

  describe("hostile input gets 4xx, never 500", () => {
    const deep = "[".repeat(20_000) + "]".repeat(20_000);
    const deepObject = '{"a":'.repeat(5_000) + "1" + "}".repeat(5_000);

    it("refuses deeply nested JSON with 400 before anything recursive runs, on both transports", async () => {
      for (const [path, headers] of [
        ["/v1/cards", { "idempotency-key": "deep-1" }],
        ["/v1/cards", {}],
        ["/trpc/cards.create", { "idempotency-key": "deep-2" }],
        ["/trpc/no.such.procedure", {}],
        ["/v1/approvals/appr_x/reject", {}],
      ] as const) {
        for (const rawBody of [deep, deepObject, `{"amount_cents": 100, "policy_override": ${deep}}`]) {
          const r = await s.request("POST", path, { rawBody, headers: { "content-type": "application/json", ...headers } });
          const err = expectError(r, 400, "invalid_json");
          expect(err.message).toMatch(/nests deeper/);
        }
      }
      // Nesting inside strings is text, not depth.
      const ok = await s.request("POST", "/v1/cards", { body: { amount_cents: 130, purpose: "[".repeat(400) } });
      expect(ok.status).toBe(201);
    });

    it("answers /trpc with an odd Host header as /v1 does", async () => {
      for (const host of ["a b", "%00", "[::1", "x:y:z", ""]) {
        const trpc = await rawHttp(s.url, [`GET /trpc/balance.retrieve HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${s.apiKey}\r\nConnection: close\r\n\r\n`]);
        const rest = await rawHttp(s.url, [`GET /v1/balance HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${s.apiKey}\r\nConnection: close\r\n\r\n`]);
        expect(trpc.status, `Host '${host}'`).toBe(rest.status);
        expect(trpc.status).toBeLessThan(500);
      }
    });

    it("answers 431 for huge headers with the error envelope and a Request-Id", async () => {
      const r = await rawHttp(s.url, [head("GET", "/v1/balance", { "X-Big": "x".repeat(20_000) })]);
      expect(r.status).toBe(431);
      expect(r.body).toEqual({ error: { code: "headers_too_large", message: expect.any(String), request_id: r.headers["request-id"] } });
      expect(r.headers["request-id"]).toMatch(/^req_/);
    });

    it("answers malformed HTTP with 400 and the envelope", async () => {
      const r = await rawHttp(s.url, ["GET /v1/balance HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"]);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("bad_request");
    });
  });

  describe("secrets in URLs", () => {
    const shapes = () => [s.apiKey, s.apiKey.replace("sk_test_", "sk_live_"), ADMIN_TOKEN, "ek_test_abcdefghijklmnop1234", "whsec_abcdefghijklmnop1234"];

    it("refuses a key-shaped value in any query parameter, and credential-named parameters, with 401", async () => {
      for (const value of shapes())
        for (const name of ["token", "apikey", "api-key", "secret", "authorization", "bearer", "q", "starting_after"]) {
          const r = await s.request("GET", `/v1/cards?${name}=${encodeURIComponent(value)}`);
          const err = expectError(r, 401, "unauthorized");
          expect(err.message).toMatch(/Authorization: Bearer/);
        }
      for (const name of ["token", "apikey", "api-key", "secret", "authorization", "bearer", "api_key", "access_token", "key"])
        expectError(await s.request("GET", `/v1/balance?${name}=anything`), 401, "unauthorized");
      // Also on public paths, and percent-encoded.
      expectError(await s.request("GET", `/health?x=${s.apiKey.replace(/_/g, "%5F")}`), 401, "unauthorized");
      expect((await s.request("GET", "/v1/cards?agent_id=sk-not-a-key")).status).toBe(200);
    });

    it("never logs a key-shaped value, in a query or a path segment", async () => {
      for (const value of shapes()) {
        await s.request("GET", `/v1/cards?whatever=${value}`);
        await s.request("GET", `/v1/cards/${value}`);
        await s.request("GET", `/v1/${value}/x`);
        await s.request("GET", `/health?x=${value.replace(/_/g, "%5F")}`);
      }
      await new Promise((r) => setTimeout(r, 50));
      expect(logs).toContain("[redacted]");
      for (const value of shapes()) {
        const tail = value.slice(-16);
        expect(logs, `log contains …${tail}`).not.toContain(tail);
      }
    });
  });
});
