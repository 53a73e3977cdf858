import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";

const countRows = async (s: TestServer, sql: string, params: unknown[] = []) =>
  Number((await s.query(sql, params))[0].n);

describe(`idempotency (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer();
  });
  afterAll(() => s.close());

  const create = (key: string, body: unknown = { amount_cents: 700 }, apiKey?: string) =>
    s.request("POST", "/v1/cards", { body, headers: { "idempotency-key": key }, key: apiKey });

  it("replays the stored status and body, with Idempotent-Replayed, and makes no second card", async () => {
    const first = await create("replay-1");
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const again = await create("replay-1");
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    expect(await countRows(s, "SELECT COUNT(*) AS n FROM cards WHERE creation_key LIKE ?", ["%:replay-1:%"])).toBe(1);
  });

  it("rejects the same key with a different body (422)", async () => {
    await create("reuse-1", { amount_cents: 100 });
    expectError(await create("reuse-1", { amount_cents: 200 }), 422, "idempotency_key_reused");
  });

  it("scopes keys per API key", async () => {
    const other = await s.newAccount();
    const key = await other.key();
    const a = await create("scoped-1");
    const b = await create("scoped-1", { amount_cents: 700 }, key);
    expect(b.status).toBe(201);
    expect(b.headers.get("idempotent-replayed")).toBeNull();
    expect(b.body.id).not.toBe(a.body.id);
  });

  it("refuses keys of 200 characters or more, and accepts 199", async () => {
    expectError(await create("k".repeat(200)), 400, "validation_error");
    expect((await create("k".repeat(199))).status).toBe(201);
  });

  it("does not store validation errors: the key can be used again", async () => {
    expectError(await create("val-1", { amount_cents: 0 }), 400, "validation_error");
    expect((await create("val-1", { amount_cents: 300 })).status).toBe(201);
  });

  it("works on the tRPC transport too", async () => {
    const call = () =>
      s.request("POST", "/trpc/cards.create", { body: { amount_cents: 400 }, headers: { "idempotency-key": "trpc-1" } });
    const first = await call();
    const again = await call();
    expect(first.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.result.data.id).toBe(first.body.result.data.id);
  });

  it("50 parallel creates with one key make one card and one hold", async () => {
    const before = await s.processor.holdCount();
    const replies = await Promise.all(Array.from({ length: 50 }, () => create("parallel-1", { amount_cents: 900 })));
    const ok = replies.filter((r) => r.status === 201);
    const busy = replies.filter((r) => r.status === 409);
    expect(ok.length + busy.length).toBe(50);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    for (const r of busy) expectError(r, 409, "idempotency_key_in_use");
    expect(new Set(ok.map((r) => r.body.id)).size).toBe(1);
    expect(await countRows(s, "SELECT COUNT(*) AS n FROM cards WHERE creation_key LIKE ?", ["%:parallel-1:%"])).toBe(1);
    expect(await s.processor.holdCount()).toBe(before + 1);
    // After the first finished, a retry replays it.
    const later = await create("parallel-1", { amount_cents: 900 });
    expect(later.headers.get("idempotent-replayed")).toBe("true");
    expect(later.body.id).toBe(ok[0]!.body.id);
  });

  it("replays 202 pending approvals without a second approval", async () => {
    const body = { amount_cents: 500, policy_override: { approval_required: true } };
    const first = await create("pending-1", body);
    const again = await create("pending-1", body);
    expect(first.status).toBe(202);
    expect(again.status).toBe(202);
    expect(again.body.approval_id).toBe(first.body.approval_id);
    expect(await countRows(s, "SELECT COUNT(*) AS n FROM approvals WHERE creation_key LIKE ?", ["%:pending-1:%"])).toBe(1);
  });

  it("forgets keys after 24 hours (the maintenance pass purges them)", async () => {
    const first = await create("old-1", { amount_cents: 100 });
    await s.query("UPDATE idempotency_keys SET expires_at = ? WHERE idem_key = ?", [Date.now() - 1, "old-1"]);
    await s.app.services.maintenance.run();
    expect(await countRows(s, "SELECT COUNT(*) AS n FROM idempotency_keys WHERE idem_key = ?", ["old-1"])).toBe(0);
    const fresh = await create("old-1", { amount_cents: 100 });
    expect(fresh.headers.get("idempotent-replayed")).toBeNull();
    expect(fresh.body.id).not.toBe(first.body.id);
  });
});
