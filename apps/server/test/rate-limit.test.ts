import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type Reply, type TestServer } from "./harness.js";

function expectRateHeaders(r: Reply, limit: number) {
  expect(r.headers.get("ratelimit-limit")).toBe(String(limit));
  expect(Number(r.headers.get("ratelimit-remaining"))).toBeGreaterThanOrEqual(0);
  // A unix timestamp in seconds, within the hour window; not a delta.
  const reset = Number(r.headers.get("ratelimit-reset"));
  const now = Date.now() / 1000;
  expect(reset).toBeGreaterThan(now);
  expect(reset).toBeLessThanOrEqual(now + 3601);
}

describe(`rate limits (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ RATE_LIMIT_PER_HOUR: "5" });
  });
  afterAll(() => s.close());

  it("counts per key, with headers on every response, and answers 429 with Retry-After past the limit", async () => {
    const key = await (await s.newAccount()).key();
    for (let i = 0; i < 5; i++) {
      const r = await s.request("GET", "/v1/balance", { key });
      expect(r.status).toBe(200);
      expectRateHeaders(r, 5);
      expect(r.headers.get("ratelimit-remaining")).toBe(String(4 - i));
    }
    const refused = await s.request("GET", "/v1/balance", { key });
    const err = expectError(refused, 429, "rate_limited");
    expect(err.details).toMatchObject({ limit: 5 });
    expectRateHeaders(refused, 5);
    expect(refused.headers.get("ratelimit-remaining")).toBe("0");
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    // POSTs are refused too, and another key is not affected.
    expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 100 } }), 429, "rate_limited");
    const other = await (await s.newAccount()).key();
    expect((await s.request("GET", "/v1/balance", { key: other })).status).toBe(200);
  });

  it("is the same on the tRPC transport (one budget per key)", async () => {
    const key = await (await s.newAccount()).key();
    for (let i = 0; i < 3; i++) expect((await s.request("GET", "/v1/balance", { key })).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await s.request("GET", "/trpc/balance.retrieve", { key })).status).toBe(200);
    expectError(await s.request("GET", "/trpc/balance.retrieve", { key }), 429, "rate_limited");
  });

  it("limits requests without a valid key per client IP, and 401s carry the headers", async () => {
    const first = await s.request("GET", "/v1/balance", { key: "sk_test_doesnotexist0000000000000000" });
    expectError(first, 401, "unauthorized");
    expectRateHeaders(first, 5);
    for (let i = 0; i < 4; i++) await s.request("GET", "/v1/cards", { key: `sk_test_guess${i}00000000000000000000000` });
    expectError(await s.request("GET", "/v1/balance", { key: "sk_test_another0000000000000000000" }), 429, "rate_limited");
    expectError(await s.request("GET", "/v1/balance", { key: null }), 429, "rate_limited");
    // Unknown paths too: no unthrottled answer tells a right key or admin token from a wrong one.
    expectError(await s.request("GET", "/v1/nope", { key: "sk_test_guessed000000000000000000000" }), 429, "rate_limited");
    expectError(await s.request("GET", "/admin/v1/nope", { key: null, headers: { authorization: "Bearer adm_guessed_0123456789abcdef" } }), 429, "rate_limited");
  });

  it("/mcp passes on the API's refusal with its headers, RateLimit-Reset a timestamp within the hour", async () => {
    const key = await (await s.newAccount()).key();
    for (let i = 0; i < 5; i++) expect((await s.request("GET", "/v1/balance", { key })).status).toBe(200);
    const refused = await s.request("POST", "/mcp", {
      key,
      headers: { accept: "application/json, text/event-stream" },
      body: { jsonrpc: "2.0", id: 1, method: "tools/list" },
    });
    expectError(refused, 429, "rate_limited");
    expectRateHeaders(refused, 5);
  });

  it("unknown routes count against the key like any, with the headers, and store no Idempotency-Key", async () => {
    const key = await (await s.newAccount()).key();
    const missing = await s.request("POST", "/v1/nope", { key, headers: { "idempotency-key": "nope-1" } });
    expectError(missing, 404, "not_found");
    expectRateHeaders(missing, 5);
    expect(missing.headers.get("ratelimit-remaining")).toBe("4");
    expect(await s.query("SELECT 1 FROM idempotency_keys WHERE idem_key = ?", ["nope-1"])).toEqual([]);
    for (let i = 0; i < 4; i++) expect((await s.request("GET", "/v1/nope", { key })).status).toBe(404);
    const refused = await s.request("POST", "/v1/nope", { key, headers: { "idempotency-key": "nope-1" } });
    expectError(refused, 429, "rate_limited");
    expect(refused.headers.get("idempotent-replayed")).toBeNull();
  });
});

describe(`rate limits behind a proxy (${dbKind})`, () => {
  const spend = async (s: TestServer, from: string | undefined) => {
    const headers = from ? { "x-forwarded-for": from } : undefined;
    return (await s.request("GET", "/v1/balance", { key: null, headers })).status;
  };

  it.each(["127.0.0.1", "1"])("with TRUST_PROXY=%s (the proxy, or one hop), each client behind it has its own per-IP budget", async (trusted) => {
    const s = await startServer({ RATE_LIMIT_PER_HOUR: "2", TRUST_PROXY: trusted });
    try {
      expect([await spend(s, "203.0.113.7"), await spend(s, "203.0.113.7"), await spend(s, "203.0.113.7")]).toEqual([401, 401, 429]);
      // Another client through the same proxy still has its own.
      expect(await spend(s, "198.51.100.9")).toBe(401);
    } finally {
      await s.close();
    }
  });

  it("without it, X-Forwarded-For is not believed: a client cannot get a fresh budget by sending one", async () => {
    const s = await startServer({ RATE_LIMIT_PER_HOUR: "2" });
    try {
      expect([await spend(s, "203.0.113.7"), await spend(s, "203.0.113.8")]).toEqual([401, 401]);
      expect(await spend(s, "203.0.113.9")).toBe(429);
    } finally {
      await s.close();
    }
  });
});

describe(`routes that are not rate limited (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ RATE_LIMIT_PER_HOUR: "2" });
  });
  afterAll(() => s.close());

  it("health checks and the API description still answer after the IP's unauthenticated budget is spent", async () => {
    for (let i = 0; i < 2; i++) expectError(await s.request("GET", "/v1/balance", { key: null }), 401, "unauthorized");
    expectError(await s.request("GET", "/v1/balance", { key: null }), 429, "rate_limited");
    for (let round = 0; round < 3; round++) {
      for (const path of ["/health", "/healthz"]) {
        const r = await s.request("GET", path, { key: null });
        expect(r.status, path).toBe(200);
        expect(r.body).toEqual({ ok: true });
      }
      const doc = await s.request("GET", "/v1/openapi.json", { key: null });
      expect(doc.status).toBe(200);
      expect(doc.body.openapi).toMatch(/^3\./);
      expect((await s.request("GET", "/docs", { key: null })).status).toBe(200);
      expect((await s.request("GET", "/docs/swagger-ui.css", { key: null })).status).toBe(200);
    }
    // The budget is still spent for everything else.
    expectError(await s.request("GET", "/v1/cards", { key: null }), 429, "rate_limited");
  });
});

describe(`rate limits of URLs the router cannot read (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ RATE_LIMIT_PER_HOUR: "3" });
  });
  afterAll(() => s.close());

  it("count against the client's IP (the key is not read) with the headers, and are refused 429 past the limit", async () => {
    const malformed = await s.request("GET", "/v1/cards/%zz");
    expectError(malformed, 400, "bad_request");
    expectRateHeaders(malformed, 3);
    expect(malformed.headers.get("ratelimit-remaining")).toBe("2");
    const tooLong = await s.request("GET", `/docs/${"a".repeat(200)}`, { key: null });
    expectError(tooLong, 414, "uri_too_long");
    expect(tooLong.headers.get("ratelimit-remaining")).toBe("1");
    // One budget with the IP's other requests without a valid key.
    expect((await s.request("GET", "/v1/balance", { key: null })).headers.get("ratelimit-remaining")).toBe("0");
    const refused = await s.request("POST", "/v1/cards/%zz/close");
    expectError(refused, 429, "rate_limited");
    expectRateHeaders(refused, 3);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(refused.headers.get("request-id")).toMatch(/^req_/);
    // The key's own budget is untouched.
    expect((await s.request("GET", "/v1/balance")).status).toBe(200);
  });
});
