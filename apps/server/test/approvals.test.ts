import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { expectApproval, expectCreatedCard, expectKeys, guarded, sleep, trpc } from "./helpers.js";

/** Approvals: spec 4.8-4.10, section 3 rows approve/reject, DESIGN 3.4 expiry and 409. */
describe(`approvals (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer());
  });
  afterAll(() => s.close());

  const fresh = async () => {
    const account = await s.newAccount();
    return { account, key: await account.key() };
  };
  const ask = async (key: string, body: Record<string, unknown> = {}) => {
    const r = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 1000, policy_override: { approval_required: true }, ...body } });
    expect(r.status).toBe(202);
    return r.body.approval_id as string;
  };
  const approvals = (key: string, query = "") => s.request("GET", `/v1/approvals${query}`, { key });
  const balance = async (key: string) => (await s.request("GET", "/v1/balance", { key })).body;

  it("lists PENDING requests by default, newest first, with exactly the approval fields", async () => {
    const { key } = await fresh();
    const a = await ask(key, { amount_cents: 1111, agent_id: "agent-a", purpose: "first" });
    const b = await ask(key, { amount_cents: 2222 });
    const r = await approvals(key);
    expect(r.status).toBe(200);
    expectKeys(r.body, ["data", "has_more"]);
    expect(r.body.has_more).toBe(false);
    for (const item of r.body.data) expectApproval(item);
    expect(r.body.data.map((x: any) => x.id)).toEqual([b, a]);
    expect(r.body.data[1]).toMatchObject({
      id: a,
      amount_cents: 1111,
      agent_id: "agent-a",
      purpose: "first",
      status: "PENDING",
      reason: null,
      card_id: null,
    });
    expect(r.body.data[0]).toMatchObject({ agent_id: null, purpose: null });
    expect((await approvals(key, "?status=PENDING")).body.data.map((x: any) => x.id)).toEqual([b, a]);
    expect((await approvals(key, "?status=APPROVED")).body).toEqual({ data: [], has_more: false });
    expect(await balance(key)).toMatchObject({ pending_approvals: 2, held_cents: 0, open_cards: 0 });
  });

  it("approve → 201 with the new card; the approval becomes APPROVED with card_id; hold placed", async () => {
    const { key } = await fresh();
    const id = await ask(key, { amount_cents: 3456, agent_id: "agent-x", purpose: "hosting" });
    const r = await s.request("POST", `/v1/approvals/${id}/approve`, { key });
    expect(r.status).toBe(201);
    expectCreatedCard(r.body, { amount: 3456, agent_id: "agent-x" });
    const approved = (await approvals(key, "?status=APPROVED")).body.data;
    expect(approved).toHaveLength(1);
    expectApproval(approved[0]);
    expect(approved[0]).toMatchObject({ id, status: "APPROVED", card_id: r.body.id, reason: null });
    expect((await approvals(key)).body.data).toEqual([]);
    expect(await balance(key)).toMatchObject({ pending_approvals: 0, held_cents: 3456, open_cards: 1 });
    const card = (await s.request("GET", `/v1/cards/${r.body.id}`, { key })).body;
    expect(card).toMatchObject({ status: "OPEN", amount_cents: 3456, agent_id: "agent-x", purpose: "hosting" });
  });

  it("approve works without a Content-Type header and without a body", async () => {
    const { key } = await fresh();
    const id = await ask(key);
    const res = await fetch(`${s.url}/v1/approvals/${id}/approve`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(201);
    expect((await res.json()).status).toBe("OPEN");
  });

  it("reject with a reason → {ok, status: REJECTED}; the approval is REJECTED with the reason; no card", async () => {
    const { key } = await fresh();
    const id = await ask(key);
    const r = await s.request("POST", `/v1/approvals/${id}/reject`, { key, body: { reason: "Too expensive" } });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ ok: true, status: "REJECTED" });
    const rejected = (await approvals(key, "?status=REJECTED")).body.data;
    expect(rejected).toHaveLength(1);
    expect(rejected[0]).toMatchObject({ id, status: "REJECTED", reason: "Too expensive", card_id: null });
    expect((await s.request("GET", "/v1/cards", { key })).body.data).toEqual([]);
    expect(await balance(key)).toMatchObject({ pending_approvals: 0, held_cents: 0 });
  });

  it("reject without a body (and without Content-Type) stores a null reason", async () => {
    const { key } = await fresh();
    const id = await ask(key);
    const res = await fetch(`${s.url}/v1/approvals/${id}/reject`, { method: "POST", headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, status: "REJECTED" });
    expect((await approvals(key, "?status=REJECTED")).body.data[0]).toMatchObject({ id, reason: null });
  });

  it("reject validates the reason: not a string or over 500 characters → 400", async () => {
    const { key } = await fresh();
    const id = await ask(key);
    expectError(await s.request("POST", `/v1/approvals/${id}/reject`, { key, body: { reason: 5 } }), 400, "validation_error");
    expectError(await s.request("POST", `/v1/approvals/${id}/reject`, { key, body: { reason: "r".repeat(501) } }), 400, "validation_error");
    expect((await approvals(key)).body.data.map((a: any) => a.id)).toEqual([id]);
  });

  it("409 approval_not_pending with details.status for every act on a decided approval", async () => {
    const { key } = await fresh();
    const approved = await ask(key);
    const rejected = await ask(key);
    expect((await s.request("POST", `/v1/approvals/${approved}/approve`, { key })).status).toBe(201);
    expect((await s.request("POST", `/v1/approvals/${rejected}/reject`, { key, body: { reason: "no" } })).status).toBe(200);
    for (const [id, status] of [
      [approved, "APPROVED"],
      [rejected, "REJECTED"],
    ]) {
      for (const act of ["approve", "reject"]) {
        const err = expectError(await s.request("POST", `/v1/approvals/${id}/${act}`, { key }), 409, "approval_not_pending");
        expect(err.details).toEqual({ status });
      }
    }
    // Nothing changed: one card, and the rejection kept its reason.
    expect((await s.request("GET", "/v1/cards", { key })).body.data).toHaveLength(1);
    expect((await approvals(key, "?status=REJECTED")).body.data[0].reason).toBe("no");
  });

  it("approve racing reject: exactly one wins, the other gets 409 with the winner's status", async () => {
    const { key } = await fresh();
    for (let round = 0; round < 3; round++) {
      const id = await ask(key, { amount_cents: 100 });
      const [approve, reject] = await Promise.all([
        s.request("POST", `/v1/approvals/${id}/approve`, { key }),
        s.request("POST", `/v1/approvals/${id}/reject`, { key, body: { reason: "race" } }),
      ]);
      const statuses = [approve.status, reject.status].sort();
      expect([[201, 409], [200, 409]]).toContainEqual(statuses);
      const [decided] = (await approvals(key, approve.status === 201 ? "?status=APPROVED" : "?status=REJECTED")).body.data.filter((a: any) => a.id === id);
      expect(decided).toBeDefined();
      const loser = approve.status === 201 ? reject : approve;
      expect(expectError(loser, 409, "approval_not_pending").details).toEqual({ status: decided.status });
      if (approve.status === 201) expect(decided.card_id).toBe(approve.body.id);
      else expect(decided).toMatchObject({ card_id: null, reason: "race" });
    }
    // Every approved request made exactly one card, and nothing else is held.
    const approved = (await approvals(key, "?status=APPROVED")).body.data;
    expect((await s.request("GET", "/v1/cards", { key })).body.data.map((c: any) => c.id).sort()).toEqual(approved.map((a: any) => a.card_id).sort());
    expect((await balance(key)).held_cents).toBe(100 * approved.length);
  });

  it("GET /v1/approvals/:id reads one as the list shows it, on both transports, for agent keys too; 404 for another mode's or account's", async () => {
    const { account, key } = await fresh();
    const id = await ask(key, { amount_cents: 1234, agent_id: "one" });
    const listed = (await approvals(key)).body.data.find((a: any) => a.id === id);
    const one = await s.request("GET", `/v1/approvals/${id}`, { key });
    expect(one.status).toBe(200);
    expectApproval(one.body);
    expect(one.body).toEqual(listed);
    expect((await s.request("GET", `/v1/approvals/${id}`, { key: await account.key("test", "agent") })).body).toEqual(listed);
    expect((await s.request("GET", `/trpc/approvals.retrieve?input=${encodeURIComponent(JSON.stringify({ id }))}`, { key })).body.result.data).toEqual(listed);
    await s.request("POST", `/v1/approvals/${id}/reject`, { key, body: { reason: "no" } });
    expect((await s.request("GET", `/v1/approvals/${id}`, { key })).body).toMatchObject({ status: "REJECTED", reason: "no" });
    expectError(await s.request("GET", `/v1/approvals/${id}`, { key: (await fresh()).key }), 404, "not_found");
    expectError(await s.request("GET", `/v1/approvals/${id}`, { key: await account.key("live") }), 404, "not_found");
    expectError(await s.request("GET", "/v1/approvals/appr_doesnotexist", { key }), 404, "not_found");
    expectError(await s.request("GET", "/v1/approvals/card_nope", { key }), 404, "not_found");
  });

  it("404 not_found for unknown ids and another account's approval (which stays PENDING)", async () => {
    const { key } = await fresh();
    const other = (await fresh()).key;
    const id = await ask(key);
    for (const act of ["approve", "reject"]) {
      expectError(await s.request("POST", `/v1/approvals/appr_doesnotexist/${act}`, { key }), 404, "not_found");
      expectError(await s.request("POST", `/v1/approvals/${id}/${act}`, { key: other }), 404, "not_found");
    }
    expect((await approvals(other)).body.data).toEqual([]);
    expect((await approvals(key)).body.data.map((a: any) => [a.id, a.status])).toEqual([[id, "PENDING"]]);
  });

  it("approve re-checks the current policy maximum: 403 policy_violation, still PENDING", async () => {
    const { key } = await fresh();
    const id = await ask(key, { amount_cents: 5000 });
    await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 4000 } });
    const err = expectError(await s.request("POST", `/v1/approvals/${id}/approve`, { key }), 403, "policy_violation");
    expect(err.details).toEqual({ max_amount_cents: 4000, requested: 5000 });
    expect((await approvals(key)).body.data.map((a: any) => [a.id, a.status])).toEqual([[id, "PENDING"]]);
    await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 5000 } });
    expect((await s.request("POST", `/v1/approvals/${id}/approve`, { key })).status).toBe(201);
  });

  it("approve keeps the request's own tightened maximum", async () => {
    const { key } = await fresh();
    // A request made under an override max of 2000 for 2000 is fine; the default later drops to 1500.
    const id = await ask(key, { amount_cents: 2000, policy_override: { approval_required: true, max_amount_cents: 2000 } });
    await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 1500 } });
    expectError(await s.request("POST", `/v1/approvals/${id}/approve`, { key }), 403, "policy_violation");
  });

  it("approve re-checks setup: 403 setup_required, still PENDING", async () => {
    const { account, key } = await fresh();
    const id = await ask(key);
    await s.admin("POST", `/accounts/${account.id}/payment_method`, { payment_method: null });
    const err = expectError(await s.request("POST", `/v1/approvals/${id}/approve`, { key }), 403, "setup_required");
    expect(err.details.missing).toEqual(["payment_method"]);
    expect((await approvals(key)).body.data.map((a: any) => a.status)).toEqual(["PENDING"]);
  });

  it("list: limit bounds, has_more and starting_after; unknown status is 400", async () => {
    const { key } = await fresh();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await ask(key, { amount_cents: 100 + i }));
    const p1 = (await approvals(key, "?limit=2")).body;
    expect(p1.data.map((a: any) => a.id)).toEqual([ids[4], ids[3]]);
    expect(p1.has_more).toBe(true);
    const p2 = (await approvals(key, `?limit=2&starting_after=${ids[3]}`)).body;
    expect(p2.data.map((a: any) => a.id)).toEqual([ids[2], ids[1]]);
    const p3 = (await approvals(key, `?limit=2&starting_after=${ids[1]}`)).body;
    expect(p3).toMatchObject({ has_more: false });
    expect(p3.data.map((a: any) => a.id)).toEqual([ids[0]]);
    for (const bad of ["?limit=0", "?limit=101", "?status=pending", "?status=CLOSED"])
      expectError(await approvals(key, bad), 400, "validation_error");
  });

  it("list: the default page is 20", async () => {
    const { key } = await fresh();
    const ids: string[] = [];
    for (let i = 0; i < 21; i++) ids.push(await ask(key, { amount_cents: 100 + i }));
    const r = (await approvals(key)).body;
    expect(r.data.map((a: any) => a.id)).toEqual([...ids].reverse().slice(0, 20));
    expect(r.has_more).toBe(true);
    expect((await approvals(key, `?starting_after=${ids[1]}`)).body).toMatchObject({ has_more: false, data: [{ id: ids[0] }] });
  });

  it("is the same on the tRPC transport: approve 201, reject, 409 and 404 envelopes", async () => {
    const { key } = await fresh();
    const t = trpc(s);
    const a = await ask(key, { amount_cents: 800 });
    const b = await ask(key, { amount_cents: 900 });
    const listed = await t.query("approvals.list", {}, { key });
    expect(listed.body.result.data.data.map((x: any) => x.id)).toEqual([b, a]);
    const approved = await t.mutation("approvals.approve", { id: a }, { key });
    expect(approved.status).toBe(201);
    expectCreatedCard(approved.body.result.data, { amount: 800 });
    const rejected = await t.mutation("approvals.reject", { id: b, reason: "nope" }, { key });
    expect(rejected.status).toBe(200);
    expect(rejected.body.result.data).toEqual({ ok: true, status: "REJECTED" });
    const err = expectError(await t.mutation("approvals.approve", { id: b }, { key }), 409, "approval_not_pending");
    expect(err.details).toEqual({ status: "REJECTED" });
    expectError(await t.mutation("approvals.reject", { id: "appr_nope" }, { key }), 404, "not_found");
  });
});

describe(`approval expiry (${dbKind})`, () => {
  let s: TestServer;
  /** Three accounts, each with one approval request made just before the TTL of 1 s ran out. */
  const made: { key: string; id: string; expiresAt: string; createdAt: number; pendingBefore: number }[] = [];
  beforeAll(async () => {
    s = guarded(await startServer({ APPROVAL_TTL_SECONDS: "1" }));
    for (let i = 0; i < 3; i++) {
      const key = await (await s.newAccount()).key();
      const createdAt = Date.now();
      const r = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 500, policy_override: { approval_required: true } } });
      expect(r.status).toBe(202);
      const pendingBefore = (await s.request("GET", "/v1/balance", { key })).body.pending_approvals;
      made.push({ key, id: r.body.approval_id, expiresAt: r.body.expires_at, createdAt, pendingBefore });
    }
    await sleep(1200);
  });
  afterAll(() => s.close());

  it("after APPROVAL_TTL_SECONDS a request is EXPIRED everywhere: balance, approve, reject, list", async () => {
    const { key, id, expiresAt, createdAt, pendingBefore } = made[0]!;
    expect(pendingBefore).toBe(1);
    const ttl = Date.parse(expiresAt) - createdAt;
    expect(ttl).toBeGreaterThan(500);
    expect(ttl).toBeLessThanOrEqual(1500);
    // Balance is read first, before any list could sweep the row.
    expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ pending_approvals: 0, held_cents: 0 });
    const approve = expectError(await s.request("POST", `/v1/approvals/${id}/approve`, { key }), 409, "approval_not_pending");
    expect(approve.details).toEqual({ status: "EXPIRED" });
    const reject = expectError(await s.request("POST", `/v1/approvals/${id}/reject`, { key }), 409, "approval_not_pending");
    expect(reject.details).toEqual({ status: "EXPIRED" });
    expect((await s.request("GET", "/v1/approvals", { key })).body).toEqual({ data: [], has_more: false });
    expect((await s.request("GET", `/v1/approvals/${id}`, { key })).body).toMatchObject({ id, status: "EXPIRED" });
    const expired = (await s.request("GET", "/v1/approvals?status=EXPIRED", { key })).body.data;
    expect(expired).toHaveLength(1);
    expectApproval(expired[0]);
    expect(expired[0]).toMatchObject({ id, status: "EXPIRED", card_id: null, expires_at: expiresAt });
    expect((await s.request("GET", "/v1/cards", { key })).body.data).toEqual([]);
  });

  it("the list shows EXPIRED without any act on the approval first", async () => {
    const { key, id } = made[1]!;
    expect((await s.request("GET", "/v1/approvals?status=EXPIRED", { key })).body.data.map((a: any) => [a.id, a.status])).toEqual([
      [id, "EXPIRED"],
    ]);
  });

  it("the periodic sweep marks it EXPIRED in the database", async () => {
    const { id } = made[2]!;
    await s.app.services.maintenance.run();
    const [row] = await s.query("SELECT status FROM approvals WHERE id = ?", [id]);
    expect(row.status).toBe("EXPIRED");
  });
});
