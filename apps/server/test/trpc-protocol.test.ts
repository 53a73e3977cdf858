import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { guarded, trpc } from "./helpers.js";

/**
 * /trpc speaks tRPC's HTTP protocol as @trpc/client's httpLink expects it, answered straight from
 * the Fastify route (transports.ts): queries by GET with `?input=<json>`, mutations by POST with a
 * JSON body, `{ result: { data } }` on success, the API's error envelope otherwise, and tRPC's own
 * refusals (wrong method, batching, streaming, HEAD) as tRPC's handler answers them.
 */
describe(`tRPC's HTTP protocol on /trpc (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer());
  });
  afterAll(() => s.close());
  const t = () => trpc(s);

  it("a query by GET answers { result: { data } }", async () => {
    const created = (await s.request("POST", "/v1/cards", { body: { amount_cents: 210, agent_id: "proto" } })).body;
    const viaTrpc = await t().query("cards.get", { id: created.id });
    expect(viaTrpc.status).toBe(200);
    expect(viaTrpc.headers.get("content-type")).toMatch(/^application\/json/);
    expect(viaTrpc.headers.get("vary")).toBe("trpc-accept, accept");
    expect(Object.keys(viaTrpc.body)).toEqual(["result"]);
    expect(viaTrpc.body.result.data).toMatchObject({ id: created.id, amount_cents: 210, agent_id: "proto", status: "OPEN" });
    // No input at all, an empty one and `{}` are the same call.
    const balances = await Promise.all([t().query("balance.retrieve", undefined), t().query("balance.retrieve", {}), s.request("GET", "/trpc/balance.retrieve?input=")]);
    for (const b of balances) expect([b.status, b.body.result.data.open_cards]).toEqual([200, balances[0]!.body.result.data.open_cards]);
    // A list without input is its first page, as GET /v1/cards is.
    const [bare, rest] = await Promise.all([t().query("cards.list", undefined), s.request("GET", "/v1/cards")]);
    expect(bare.status).toBe(200);
    expect(bare.body.result.data.data.map((c: { id: string }) => c.id)).toEqual(rest.body.data.map((c: { id: string }) => c.id));
  });

  it("a mutation by POST runs once and answers with the procedure's status; a bodyless POST is `{}`", async () => {
    const r = await t().mutation("cards.create", { amount_cents: 220 });
    expect(r.status).toBe(201);
    expect(r.body.result.data).toMatchObject({ status: "OPEN", spending_limit_cents: 220 });
    expect((await s.request("GET", `/v1/cards/${r.body.result.data.id}`)).status).toBe(200);
    const before = (await s.request("GET", "/v1/policies/default")).body;
    for (const headers of [{}, { "content-type": "application/json" }] as Record<string, string>[]) {
      const bodyless = await s.request("POST", "/trpc/policies.updateDefault", { headers });
      expect(bodyless.status).toBe(200);
      expect(bodyless.body.result.data).toEqual(before);
    }
  });

  it("the wrong method for a procedure is 405 with Allow; an unknown procedure is 404 whatever the method", async () => {
    for (const [method, path, allow] of [
      ["GET", "/trpc/cards.create", "POST"],
      ["PUT", "/trpc/cards.create", "POST"],
      ["DELETE", "/trpc/cards.close", "POST"],
      ["POST", "/trpc/cards.list", "GET"],
    ] as const) {
      const r = await s.request(method, path, method === "GET" || method === "DELETE" ? {} : { body: {} });
      expect(expectError(r, 405, "method_not_allowed").message).toMatch(new RegExp(`^Unsupported ${method}-request to \\w+ procedure`));
      expect(r.headers.get("allow")).toBe(allow);
    }
    for (const [method, path] of [
      ["GET", "/trpc/cards"],
      ["GET", "/trpc/constructor"],
      ["GET", "/trpc/__proto__"],
      ["POST", "/trpc/toString"],
      ["DELETE", "/trpc/nope"],
    ] as const)
      expectError(await s.request(method, path), 404, "not_found");
  });

  it("unparseable query input is 400 invalid_json, as a body would be, and runs nothing; invalid input is a validation_error", async () => {
    const bad = expectError(await s.request("GET", "/trpc/cards.list?input=%7Bnope"), 400, "invalid_json");
    expect(bad.message).toMatch(/JSON/);
    const invalid = expectError(await t().query("cards.list", { limit: 0 }), 400, "validation_error");
    expect(invalid.details.issues.map((i: any) => i.path)).toEqual(["limit"]);
  });

  it("refuses batches and streamed calls (only httpLink is served), and answers HEAD 204 without running anything", async () => {
    for (const path of ["/trpc/balance.retrieve?batch=1", "/trpc/balance.retrieve,cards.list?batch=1"])
      expect(expectError(await s.request("GET", path), 400, "bad_request").message).toBe("Batching is not enabled on the server");
    for (const headers of [{ "trpc-accept": "application/jsonl" }, { accept: "text/html, application/jsonl" }] as Record<string, string>[])
      expect(expectError(await s.request("GET", "/trpc/balance.retrieve", { headers }), 400, "bad_request").message).toMatch(/must be batched/);
    const head = await fetch(`${s.url}/trpc/balance.retrieve`, { method: "HEAD", headers: { authorization: `Bearer ${s.apiKey}` } });
    expect(head.status).toBe(204);
    expect(head.headers.get("request-id")).toMatch(/^req_/);
  });
});
