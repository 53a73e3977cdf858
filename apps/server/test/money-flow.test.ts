import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { guarded } from "./helpers.js";

/**
 * DESIGN 3.5: intent is recorded before calling the processor; a failed mint cancels the hold;
 * no card without a hold and no hold without a card.
 */
describe(`money flow (${dbKind})`, () => {
  let s: TestServer;
  /** Set by a test to observe the state between hold and mint. */
  let onHold: ((cardId: string) => Promise<void>) | null = null;
  beforeAll(async () => {
    s = guarded(await startServer({}, { afterHold: async (cardId) => onHold?.(cardId) }));
  });
  afterAll(() => s.close());
  afterEach(() => {
    onHold = null;
    s.processor.clear();
  });

  const fresh = async () => {
    const account = await s.newAccount();
    return { account, key: await account.key() };
  };
  const rows = (accountId: string) => s.query("SELECT id, status, hold_status, hold_id, processor_card_id FROM cards WHERE account_id = ? ORDER BY seq", [accountId]);
  /** The card's holds and cards at the processor. */
  const holdsOf = async (cardId: string) => (await s.processor.holds(cardId)).map(({ status, amount_cents }) => ({ status, amount_cents }));
  const issuedOf = async (cardId: string) => (await s.processor.cards(cardId)).map((status) => ({ status }));

  it("mint fails → 502 processor_error; the hold is cancelled; no card is visible; balance holds 0", async () => {
    const { account, key } = await fresh();
    s.processor.fail("mint", "fail");
    const err = expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 2500 } }), 502, "processor_error");
    expect(err.details.step).toBe("mint");
    const [row] = await rows(account.id);
    expect(row).toMatchObject({ status: "FAILED", hold_status: "RELEASED", processor_card_id: null });
    expect(await holdsOf(row.id)).toEqual([{ status: "canceled", amount_cents: 2500 }]);
    expect(await issuedOf(row.id)).toEqual([]);
    expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 0, open_cards: 0 });
    expect((await s.request("GET", "/v1/cards", { key })).body).toEqual({ data: [], has_more: false });
    expectError(await s.request("GET", `/v1/cards/${row.id}`, { key }), 404, "not_found");
    // The processor is back: the next request works normally.
    s.processor.clear();
    expect((await s.request("POST", "/v1/cards", { key, body: { amount_cents: 2500 } })).status).toBe(201);
    expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 2500, open_cards: 1 });
  });

  it("hold fails → 502 processor_error and no card, no hold, nothing minted", async () => {
    const { account, key } = await fresh();
    s.processor.fail("hold", "fail");
    const err = expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 800 } }), 502, "processor_error");
    expect(err.details.step).toBe("hold");
    const all = await rows(account.id);
    expect(all.map((r) => r.status)).toEqual(["FAILED"]);
    expect(await issuedOf(all[0].id)).toEqual([]);
    expect(await holdsOf(all[0].id)).toEqual([]);
    expect((await s.request("GET", "/v1/cards", { key })).body.data).toEqual([]);
    expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 0, open_cards: 0 });
  });

  it("the card row is recorded (CREATING, hidden from the API) before the processor is called", async () => {
    const { account, key } = await fresh();
    let seen: any = null;
    onHold = async (cardId) => {
      const [row] = await s.query("SELECT status, hold_status, hold_id FROM cards WHERE id = ?", [cardId]);
      const listed = (await s.request("GET", "/v1/cards", { key })).body.data;
      const got = await s.request("GET", `/v1/cards/${cardId}`, { key });
      seen = { row, listed, got: got.status, holds: await holdsOf(cardId), issued: await issuedOf(cardId) };
    };
    const r = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 1200 } });
    expect(r.status).toBe(201);
    // PENDING: a hold may exist under the card's key; its id is recorded with the card's next update.
    expect(seen.row).toMatchObject({ status: "CREATING", hold_status: "PENDING" });
    expect(seen.listed).toEqual([]);
    expect(seen.got).toBe(404);
    expect(seen.holds).toEqual([{ status: "requires_capture", amount_cents: 1200 }]);
    expect(seen.issued).toEqual([]);
    const [done] = await rows(account.id);
    expect(done).toMatchObject({ status: "OPEN", hold_status: "OPEN" });
    expect(done.hold_id).toMatch(s.processor.holdIdPattern);
    expect(await s.processor.hold(done.hold_id)).toMatchObject({ status: "requires_capture", amount_cents: 1200 });
  });

  it("approve with a failing mint → 502; the approval stays PENDING, the hold is cancelled; a retry issues one card", async () => {
    const { account, key } = await fresh();
    const id = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 1500, policy_override: { approval_required: true } } })).body
      .approval_id;
    s.processor.fail("mint", "fail");
    expectError(await s.request("POST", `/v1/approvals/${id}/approve`, { key }), 502, "processor_error");
    const pending = (await s.request("GET", "/v1/approvals", { key })).body.data;
    expect(pending.map((a: any) => [a.id, a.status, a.card_id])).toEqual([[id, "PENDING", null]]);
    const [failed] = await rows(account.id);
    expect(failed.status).toBe("FAILED");
    expect(await holdsOf(failed.id)).toEqual([{ status: "canceled", amount_cents: 1500 }]);
    expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 0, pending_approvals: 1 });
    s.processor.clear();
    const ok = await s.request("POST", `/v1/approvals/${id}/approve`, { key });
    expect(ok.status).toBe(201);
    expect((await s.request("GET", "/v1/approvals?status=APPROVED", { key })).body.data[0]).toMatchObject({ id, card_id: ok.body.id });
    expect((await s.request("GET", "/v1/cards", { key })).body.data.map((c: any) => c.id)).toEqual([ok.body.id]);
    expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 1500, open_cards: 1, pending_approvals: 0 });
  });

  it("every issued card has exactly one hold and one processor card, and every hold belongs to a card", async () => {
    const { account, key } = await fresh();
    const ids: string[] = [];
    for (const amount of [100, 200, 300, 400]) ids.push((await s.request("POST", "/v1/cards", { key, body: { amount_cents: amount } })).body.id);
    await s.request("POST", `/v1/cards/${ids[0]}/close`, { key });
    await s.request("POST", `/v1/test_helpers/cards/${ids[1]}/purchase`, { key, body: { amount_cents: 50 } });
    s.processor.fail("mint", "fail");
    await s.request("POST", "/v1/cards", { key, body: { amount_cents: 999 } });
    s.processor.clear();
    const all = await rows(account.id);
    const expected: Record<string, [string, string, string]> = {
      OPEN: ["OPEN", "requires_capture", "active"],
      CLOSED: ["RELEASED", "canceled", "canceled"],
      USED: ["CAPTURED", "captured", "canceled"],
    };
    let openHeld = 0;
    for (const row of all) {
      const holds = await holdsOf(row.id);
      const issued = await issuedOf(row.id);
      if (row.status === "FAILED") {
        expect(issued).toEqual([]);
        expect(holds.map((h) => h.status)).toEqual(["canceled"]);
        continue;
      }
      expect(holds).toHaveLength(1);
      expect(issued).toHaveLength(1);
      expect([row.hold_status, holds[0]!.status, issued[0]!.status]).toEqual(expected[row.status]);
      if (row.status === "OPEN") openHeld += Number(holds[0]!.amount_cents);
    }
    expect(all.map((r) => r.status).sort()).toEqual(["CLOSED", "FAILED", "OPEN", "OPEN", "USED"]);
    expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(openHeld);
    expect(openHeld).toBe(700);
  });
});
