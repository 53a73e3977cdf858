import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { ownerSession } from "./helpers.js";

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

  it("scopes an owner's keys per mode: the key used in test mode is a new request in live mode", async () => {
    const account = await s.newAccount({ name: "Both modes" });
    const o = await ownerSession(s, account.id, "both-modes@idempotency.example");
    const send = (mode: "test" | "live") =>
      s.request("POST", "/trpc/cards.create", { key: null, headers: { ...o.headers(mode), "idempotency-key": "modes-1" }, body: { amount_cents: 300 } });
    const test = await send("test");
    expect(test.status).toBe(201);
    expect((await send("test")).headers.get("idempotent-replayed")).toBe("true");
    const live = await send("live");
    expect(live.headers.get("idempotent-replayed")).toBeNull();
    expect(JSON.stringify(live.body)).not.toContain(test.body.result.data.id);
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

  it("purges expired keys in batches, past the first thousand, and keeps the others", async () => {
    const now = Date.now();
    const rows = Array.from({ length: 2500 }, (_, i) => ["key_purge_test", `expired-${i}`, now - 1]);
    rows.push(["key_purge_test", "fresh", now + 3_600_000]);
    for (let i = 0; i < rows.length; i += 500) {
      const chunk = rows.slice(i, i + 500);
      await s.query(
        `INSERT INTO idempotency_keys (api_key_id, idem_key, request_hash, status, response_status, response_body, locked_until, created_at, expires_at) VALUES ${chunk.map(() => "(?, ?, 'h', 'DONE', 200, '{}', 0, 0, ?)").join(", ")}`,
        chunk.flat(),
      );
    }
    expect(await s.app.services.idempotency.purgeExpired()).toBeGreaterThanOrEqual(2500);
    expect(await s.query("SELECT idem_key FROM idempotency_keys WHERE api_key_id = 'key_purge_test'")).toEqual([{ idem_key: "fresh" }]);
  });

  it("compares meaning, not bytes: the same fields in another order replay", async () => {
    const first = await create("order-1", { amount_cents: 650, agent_id: "ordered", purpose: "p" });
    const again = await create("order-1", { purpose: "p", agent_id: "ordered", amount_cents: 650 });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.id).toBe(first.body.id);
    // Nested objects too.
    const pending = (o: object) => create("order-2", { amount_cents: 120, ...o });
    const p1 = await pending({ policy_override: { approval_required: true, max_amount_cents: 900 } });
    const p2 = await pending({ policy_override: { max_amount_cents: 900, approval_required: true } });
    expect(p2.headers.get("idempotent-replayed")).toBe("true");
    expect(p2.body.approval_id).toBe(p1.body.approval_id);
  });

  it("one request however its path is escaped, and a bodyless POST is the same as one sending {}", async () => {
    const first = await create("escaped-1");
    const escaped = await s.request("POST", "/%761/cards", { body: { amount_cents: 700 }, headers: { "idempotency-key": "escaped-1" } });
    expect(escaped.status).toBe(201);
    expect(escaped.headers.get("idempotent-replayed")).toBe("true");
    expect(escaped.body.id).toBe(first.body.id);
    // The dry run ignores the key on any spelling of its path: never a stored, stale decision.
    const headers = { "idempotency-key": "escaped-check" };
    expect((await s.request("POST", "/%761/policies/check", { body: { amount_cents: 100 }, headers })).headers.get("idempotent-replayed")).toBeNull();
    expect((await s.request("POST", "/%761/policies/check", { body: { amount_cents: 100 }, headers })).headers.get("idempotent-replayed")).toBeNull();
    expect(await s.query("SELECT idem_key FROM idempotency_keys WHERE idem_key = ?", ["escaped-check"])).toEqual([]);
    const closed = await s.request("POST", `/v1/cards/${first.body.id}/close`, { headers: { "idempotency-key": "close-empty" } });
    expect(closed.status).toBe(200);
    const withEmpty = await s.request("POST", `/v1/cards/${first.body.id}/close`, { body: {}, headers: { "idempotency-key": "close-empty" } });
    expect(withEmpty.status).toBe(200);
    expect(withEmpty.headers.get("idempotent-replayed")).toBe("true");
  });

  it("a replayed stored error names the replay's own request id, in its body as in Request-Id; Original-Request names the first", async () => {
    const acct = await s.newAccount({ kyb: false });
    const key = await acct.key();
    const first = await create("err-1", { amount_cents: 100 }, key);
    expectError(first, 403, "setup_required");
    const again = await create("err-1", { amount_cents: 100 }, key);
    expect(again.status).toBe(403);
    expect(again.body).toEqual({ error: { ...first.body.error, request_id: again.headers.get("request-id") } });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.headers.get("request-id")).not.toBe(first.headers.get("request-id"));
    expect(again.headers.get("original-request")).toBe(first.body.error.request_id);
    // On tRPC too.
    const t1 = await s.request("POST", "/trpc/cards.create", { key, body: { amount_cents: 100 }, headers: { "idempotency-key": "err-trpc-1" } });
    const t2 = await s.request("POST", "/trpc/cards.create", { key, body: { amount_cents: 100 }, headers: { "idempotency-key": "err-trpc-1" } });
    expect(t2.headers.get("idempotent-replayed")).toBe("true");
    expect(JSON.stringify(t2.body)).toContain(`"request_id":"${t2.headers.get("request-id")}"`);
    expect(t2.headers.get("original-request")).toBe(t1.headers.get("request-id"));
  });

  it("an approve retried with its key after only its answer was lost returns the card (201)", async () => {
    const pending = await create("appr-src-1", { amount_cents: 450, policy_override: { approval_required: true } });
    const approve = () => s.request("POST", `/v1/approvals/${pending.body.approval_id}/approve`, { headers: { "idempotency-key": "appr-1" } });
    const first = await approve();
    expect(first.status).toBe(201);
    // The answer never reached the client and the key was not yet marked done (the server died there).
    await s.query("UPDATE idempotency_keys SET status = 'RUNNING', response_status = NULL, response_body = NULL, locked_until = 0 WHERE idem_key = ?", ["appr-1"]);
    const retry = await approve();
    expect(retry.status).toBe(201);
    expect(retry.body.id).toBe(first.body.id);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    // Another key for the same approval is told it is no longer pending.
    const other = await s.request("POST", `/v1/approvals/${pending.body.approval_id}/approve`, { headers: { "idempotency-key": "appr-2" } });
    expectError(other, 409, "approval_not_pending");
    expect(await countRows(s, "SELECT COUNT(*) AS n FROM cards WHERE approval_id = ?", [pending.body.approval_id])).toBe(1);
  });

  it("a request that failed on the server keeps its key for the same request: the retry takes over", async () => {
    s.processor.fail("mint", "fail");
    const failed = await create("fail-1", { amount_cents: 310 });
    s.processor.clear();
    expectError(failed, 502, "processor_error");
    const retry = await create("fail-1", { amount_cents: 310 });
    expect(retry.status).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    // The key still belongs to that request: another body is refused.
    expectError(await create("fail-1", { amount_cents: 999 }), 422, "idempotency_key_reused");
  });

  it("a retry that took the key over and was refused 400 (a query its hash leaves out) keeps the key for the request it took over", async () => {
    const trpc = (amount_cents: number, query = "") =>
      s.request("POST", `/trpc/cards.create${query}`, { body: { amount_cents }, headers: { "idempotency-key": "takeover-400" } });
    s.processor.fail("mint", "fail");
    try {
      expect((await trpc(320)).status).toBe(502);
    } finally {
      s.processor.clear();
    }
    expect((await trpc(320, "?batch=1")).status).toBe(400);
    // Still that request's key: another body is refused, the same one goes on with it.
    expect(JSON.stringify((await trpc(999)).body)).toContain("idempotency_key_reused");
    expect((await trpc(320)).status).toBe(201);
  });

  it("a request whose hold on its key ran out and was taken over writes nothing to the key (its lease is the fencing token)", async () => {
    const store = s.app.services.idempotency;
    const first = await store.begin("key_fence", "k", "hash");
    expect(first).toMatchObject({ kind: "proceed", retry: false });
    await s.query("UPDATE idempotency_keys SET locked_until = 1 WHERE api_key_id = 'key_fence'");
    // A takeover comes once the first lease ran out, so its lease is later; cut short here, let a millisecond pass.
    await new Promise((r) => setTimeout(r, 5));
    const second = await store.begin("key_fence", "k", "hash");
    expect(second).toMatchObject({ kind: "proceed", retry: true });
    if (first.kind !== "proceed" || second.kind !== "proceed") throw new Error("unreachable");
    // The first request ends late: its unlock, answer or forgetting must not touch the retry's claim.
    await store.unlock("key_fence", "k", first.lease);
    await expect(store.begin("key_fence", "k", "hash")).rejects.toMatchObject({ status: 409, code: "idempotency_key_in_use" });
    await store.complete("key_fence", "k", first.lease, 500, "{}");
    await store.forget("key_fence", "k", first.lease);
    await store.complete("key_fence", "k", second.lease, 201, '{"id":"card_x"}');
    expect(await store.begin("key_fence", "k", "hash")).toEqual({ kind: "replay", status: 201, body: '{"id":"card_x"}' });
  });

  /** The answer never reached the client and the key was not yet marked done (the server died there). */
  const loseAnswer = (key: string) =>
    s.query("UPDATE idempotency_keys SET status = 'RUNNING', response_status = NULL, response_body = NULL, locked_until = 0 WHERE idem_key = ?", [key]);

  it("a reject or a purchase retried with its key after its answer was lost is answered as the first", async () => {
    const pending = await create("rej-src-1", { amount_cents: 460, policy_override: { approval_required: true } });
    const reject = (key: string) => s.request("POST", `/v1/approvals/${pending.body.approval_id}/reject`, { body: { reason: "no" }, headers: { "idempotency-key": key } });
    expect((await reject("rej-1")).status).toBe(200);
    await loseAnswer("rej-1");
    const retried = await reject("rej-1");
    expect(retried.status).toBe(200);
    expect(retried.body).toEqual({ ok: true, status: "REJECTED" });
    expectError(await reject("rej-2"), 409, "approval_not_pending");

    const card = await create("buy-src-1", { amount_cents: 800 });
    const buy = (key: string) => s.request("POST", `/v1/test_helpers/cards/${card.body.id}/purchase`, { body: { amount_cents: 300 }, headers: { "idempotency-key": key } });
    const first = await buy("buy-1");
    expect(first.body).toMatchObject({ approved: true, amount_cents: 300 });
    await loseAnswer("buy-1");
    const again = await buy("buy-1");
    expect(again.body).toMatchObject({ approved: true, decline_reason: null, amount_cents: 300 });
    expect(again.body.card.status).toBe("USED");
    expect((await buy("buy-2")).body).toMatchObject({ approved: false, decline_reason: "card_not_open" });
  });

  it("the test helpers' authorize, capture and refund retried with their keys after their answers were lost move money once", async () => {
    const card = await create("auth-src-1", { amount_cents: 1000 });
    const post = (path: string, key: string, body: object = {}) => s.request("POST", path, { body, headers: { "idempotency-key": key } });
    const auth = await post(`/v1/test_helpers/cards/${card.body.id}/authorizations`, "auth-1", { amount_cents: 800 });
    expect(auth.body).toMatchObject({ approved: true, status: "pending" });
    await loseAnswer("auth-1");
    const authAgain = await post(`/v1/test_helpers/cards/${card.body.id}/authorizations`, "auth-1", { amount_cents: 800 });
    expect(authAgain.body).toMatchObject({ id: auth.body.id, approved: true });
    expect(await countRows(s, "SELECT COUNT(*) AS n FROM authorizations WHERE card_id = ?", [card.body.id])).toBe(1);

    const capture = await post(`/v1/test_helpers/authorizations/${auth.body.id}/capture`, "cap-1");
    expect(capture.status).toBe(201);
    await loseAnswer("cap-1");
    const captureAgain = await post(`/v1/test_helpers/authorizations/${auth.body.id}/capture`, "cap-1");
    expect(captureAgain.status).toBe(201);
    expect(captureAgain.body.id).toBe(capture.body.id);

    const refund = await post(`/v1/test_helpers/transactions/${capture.body.id}/refund`, "ref-1", { amount_cents: 300 });
    expect(refund.status).toBe(201);
    await loseAnswer("ref-1");
    const refundAgain = await post(`/v1/test_helpers/transactions/${capture.body.id}/refund`, "ref-1", { amount_cents: 300 });
    expect(refundAgain.body.id).toBe(refund.body.id);

    // One capture of 800 (from the hold, no off-session charge) and one refund of 300.
    const [row] = await s.query("SELECT spent_cents FROM cards WHERE id = ?", [card.body.id]);
    expect(Number(row.spent_cents)).toBe(500);
    const txns = await s.query("SELECT type, amount_cents FROM transactions WHERE card_id = ? ORDER BY created_at", [card.body.id]);
    expect(txns.map((t) => [t.type, Number(t.amount_cents)])).toEqual([["capture", 800], ["refund", 300]]);
    const payments = await s.query("SELECT kind, amount_cents FROM payments WHERE card_id = ? ORDER BY created_at", [card.body.id]);
    expect(payments.map((p) => p.kind).filter((k) => k === "charge")).toEqual([]);
  });
});
