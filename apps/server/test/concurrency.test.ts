import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";


describe(`concurrency (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer();
  });
  afterAll(() => s.close());

  it("50 parallel approves of one approval make one card; the rest are 409", async () => {
    const account = await s.newAccount();
    const key = await account.key();
    const pending = await s.request("POST", "/v1/cards", {
      key,
      body: { amount_cents: 1200, policy_override: { approval_required: true } },
    });
    expect(pending.status).toBe(202);
    const id = pending.body.approval_id;
    const replies = await Promise.all(Array.from({ length: 50 }, () => s.request("POST", `/v1/approvals/${id}/approve`, { key })));
    const ok = replies.filter((r) => r.status === 201);
    expect(ok).toHaveLength(1);
    for (const r of replies.filter((r) => r.status !== 201)) expect(expectError(r, 409, "approval_not_pending").details).toEqual({ status: "APPROVED" });
    const cards = await s.query("SELECT id, hold_status FROM cards WHERE account_id = ?", [account.id]);
    expect(cards).toEqual([{ id: ok[0]!.body.id, hold_status: "OPEN" }]);
    expect(await s.processor.holds(ok[0]!.body.id)).toHaveLength(1);
    const approved = await s.request("GET", "/v1/approvals?status=APPROVED", { key });
    expect(approved.body.data).toEqual([expect.objectContaining({ id, status: "APPROVED", card_id: ok[0]!.body.id })]);
  });

  it("close racing a purchase ends consistently, with every hold settled", async () => {
    const account = await s.newAccount();
    const key = await account.key();
    const ids: string[] = [];
    for (let i = 0; i < 15; i++) ids.push((await s.request("POST", "/v1/cards", { key, body: { amount_cents: 1000 } })).body.id);
    await Promise.all(
      ids.map(async (id) => {
        const [close, purchase] = await Promise.all([
          s.request("POST", `/v1/cards/${id}/close`, { key }),
          s.request("POST", `/v1/test_helpers/cards/${id}/purchase`, { key, body: { amount_cents: 400 } }),
        ]);
        const card = (await s.request("GET", `/v1/cards/${id}`, { key })).body;
        if (purchase.body.approved) {
          expect(card.status).toBe("USED");
          expect(card.remaining_cents).toBe(0);
          expectError(close, 409, "card_not_open");
        } else {
          expect(purchase.status).toBe(200);
          expect(purchase.body.decline_reason).toBe("card_not_open");
          expect(close.body).toEqual({ ok: true, status: "CLOSED" });
          expect(card.status).toBe("CLOSED");
        }
      }),
    );
    const settled = await s.query("SELECT status, hold_status, spent_cents FROM cards WHERE account_id = ?", [account.id]);
    for (const c of settled) {
      expect(c.hold_status).toBe(c.status === "USED" ? "CAPTURED" : "RELEASED");
      expect(Number(c.spent_cents)).toBe(c.status === "USED" ? 400 : 0);
    }
    const held = [];
    for (const c of await s.query("SELECT id FROM cards WHERE account_id = ?", [account.id])) held.push(...(await s.processor.holds(c.id)));
    expect(held).toHaveLength(15);
    for (const h of held) expect(["captured", "canceled"]).toContain(h.status);
    const balance = await s.request("GET", "/v1/balance", { key });
    expect(balance.body).toMatchObject({ held_cents: 0, open_cards: 0 });
  });

  it("policy updates racing creates: each card respects a policy in force, later creates the new one", async () => {
    const account = await s.newAccount();
    const key = await account.key();
    const creates = Array.from({ length: 30 }, () => s.request("POST", "/v1/cards", { key, body: { amount_cents: 3000 } }));
    const update = s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 1000 } });
    const [replies, updated] = await Promise.all([Promise.all(creates), update]);
    expect(updated.body).toEqual({ approval_required: false, max_amount_cents: 1000 });
    for (const r of replies) {
      if (r.status === 201) expect(r.body.spending_limit_cents).toBe(3000);
      else expect(expectError(r, 403, "policy_violation").details).toEqual({ max_amount_cents: 1000, requested: 3000 });
    }
    expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 3000 } }), 403, "policy_violation");
    const issued = replies.filter((r) => r.status === 201).length;
    const balance = await s.request("GET", "/v1/balance", { key });
    expect(balance.body).toMatchObject({ held_cents: 3000 * issued, open_cards: issued, max_per_card_cents: 1000 });
  });
});
