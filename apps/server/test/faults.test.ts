import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";

/**
 * Injected processor faults (fail, or hang past PROCESSOR_TIMEOUT_MS) at every step: each answers
 * 502 processor_error and leaves no orphan hold and no card without a hold, at once or after the
 * recovery pass once the processor is back.
 */
describe(`processor faults (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer({ PROCESSOR_TIMEOUT_MS: "300" });
  });
  afterAll(() => s.close());
  afterEach(() => s.processor.clear());

  /** The account's holds at the processor, by status. */
  async function processorHolds(accountId: string) {
    const cards = await s.query("SELECT id FROM cards WHERE account_id = ?", [accountId]);
    const holds = [];
    for (const c of cards) holds.push(...(await s.processor.holds(c.id)));
    return holds.map((h) => h.status);
  }
  /** The account's cards at the processor, by status. */
  async function processorCards(accountId: string) {
    const cards = await s.query("SELECT id FROM cards WHERE account_id = ?", [accountId]);
    const out: string[] = [];
    for (const c of cards) out.push(...(await s.processor.cards(c.id)));
    return out;
  }
  const setup = async () => {
    const account = await s.newAccount();
    return { account, key: await account.key() };
  };

  for (const fault of ["fail", "hang"] as const) {
    it(`hold ${fault}: 502, no card, and no hold once recovery has run`, async () => {
      const { account, key } = await setup();
      s.processor.fail("hold", fault);
      const err = expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
      expect(err.details).toMatchObject({ step: "hold" });
      expect((await s.request("GET", "/v1/cards", { key })).body.data).toEqual([]);
      expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(0);
      expect(await processorCards(account.id)).toEqual([]);
      s.processor.clear();
      await s.app.services.maintenance.run();
      // Nothing found is taken as final a creation lease after the failure (a hung call may still place the hold).
      const [pending] = await s.query("SELECT status, hold_status FROM cards WHERE account_id = ?", [account.id]);
      expect(pending).toEqual({ status: "FAILED", hold_status: "PENDING" });
      await s.query("UPDATE cards SET recovery_next_at = ? WHERE account_id = ?", [Date.now() - 1, account.id]);
      await s.app.services.maintenance.run();
      // Whatever the processor may have made under the card's key is cancelled.
      for (const h of await processorHolds(account.id)) expect(h).toBe("canceled");
      const [row] = await s.query("SELECT status, hold_status FROM cards WHERE account_id = ?", [account.id]);
      expect(row).toEqual({ status: "FAILED", hold_status: "RELEASED" });
    });

    it(`mint ${fault}: 502 and the hold is cancelled`, async () => {
      const { account, key } = await setup();
      s.processor.fail("mint", fault);
      const err = expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
      expect(err.details).toMatchObject({ step: "mint" });
      expect(await processorHolds(account.id)).toEqual(["canceled"]);
      expect(await processorCards(account.id)).toEqual([]);
      expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 0, open_cards: 0 });
    });

    it(`revoke ${fault} on close: 502, and a retried close finishes it`, async () => {
      const { account, key } = await setup();
      const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
      s.processor.fail("revoke", fault);
      expectError(await s.request("POST", `/v1/cards/${card.id}/close`, { key }), 502, "processor_error");
      s.processor.clear();
      expect((await s.request("POST", `/v1/cards/${card.id}/close`, { key })).body).toEqual({ ok: true, status: "CLOSED" });
      expect(await processorCards(account.id)).toEqual(["canceled"]);
      expect(await processorHolds(account.id)).toEqual(["canceled"]);
      expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(0);
    });

    it(`revoke ${fault} on close: closing the CLOSED card again is OK while the processor still fails; the recovery pass finishes it`, async () => {
      const { account, key } = await setup();
      const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
      s.processor.fail("revoke", fault);
      expectError(await s.request("POST", `/v1/cards/${card.id}/close`, { key }), 502, "processor_error");
      const again = await s.request("POST", `/v1/cards/${card.id}/close`, { key });
      expect(again.status).toBe(200);
      expect(again.body).toEqual({ ok: true, status: "CLOSED" });
      expect(await processorCards(account.id)).toEqual(["active"]);
      s.processor.clear();
      await s.query("UPDATE cards SET recovery_next_at = 0 WHERE id = ?", [card.id]);
      await s.app.services.maintenance.run();
      expect(await processorCards(account.id)).toEqual(["canceled"]);
      expect(await processorHolds(account.id)).toEqual(["canceled"]);
    });

    it(`hold cancel ${fault} on close: 502, and the recovery pass releases the hold`, async () => {
      const { account, key } = await setup();
      const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
      s.processor.fail("cancel", fault);
      expectError(await s.request("POST", `/v1/cards/${card.id}/close`, { key }), 502, "processor_error");
      expect((await s.request("GET", `/v1/cards/${card.id}`, { key })).body.status).toBe("CLOSED");
      s.processor.clear();
      await s.app.services.maintenance.run();
      expect(await processorHolds(account.id)).toEqual(["canceled"]);
      expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(0);
    });
  }

  for (const fault of ["fail", "hang"] as const)
    it(`capture ${fault} at settlement: the purchase stands, and the queued capture is retried once`, async () => {
      const { account, key } = await setup();
      const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
      s.processor.fail("capture", fault);
      const bought = await s.request("POST", `/v1/test_helpers/cards/${card.id}/purchase`, { key, body: { amount_cents: 300 } });
      // The network approved it: it stands; the money moves when the processor answers.
      expect(bought.body).toMatchObject({ approved: true, card: { status: "USED", remaining_cents: 0, spent_cents: 300 } });
      expect(await processorHolds(account.id)).toEqual(["requires_capture"]);
      const [payment] = await s.query("SELECT kind, status, attempts, last_error FROM payments WHERE card_id = ?", [card.id]);
      expect(payment).toMatchObject({ kind: "hold_capture", status: "pending" });
      expect(payment.last_error).toBeTruthy();
      s.processor.clear();
      await s.app.services.maintenance.run(); // not yet due: backoff
      expect(await processorHolds(account.id)).toEqual(["requires_capture"]);
      await s.query("UPDATE payments SET next_attempt_at = 0 WHERE card_id = ?", [card.id]);
      await s.app.services.maintenance.run();
      expect(await processorHolds(account.id)).toEqual(["captured"]);
      expect((await s.query("SELECT status FROM payments WHERE card_id = ?", [card.id])).map((r) => r.status)).toEqual(["succeeded"]);
      await s.app.services.maintenance.run();
      expect(await processorCards(account.id)).toEqual(["canceled"]);
    });

  it("revoke fail after a purchase: the purchase stands and the recovery pass deactivates the card", async () => {
    const { account, key } = await setup();
    const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
    s.processor.fail("revoke", "fail");
    const ok = await s.request("POST", `/v1/test_helpers/cards/${card.id}/purchase`, { key, body: { amount_cents: 300 } });
    expect(ok.body).toMatchObject({ approved: true, card: { status: "USED" } });
    expect(await processorCards(account.id)).toEqual(["active"]);
    s.processor.clear();
    await s.app.services.maintenance.run();
    expect(await processorCards(account.id)).toEqual(["canceled"]);
    expect(await processorHolds(account.id)).toEqual(["captured"]);
  });

  it("a retry with the same Idempotency-Key after a 502 issues the card afresh, once", async () => {
    const { account, key } = await setup();
    const send = () => s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 }, headers: { "idempotency-key": "after-502" } });
    s.processor.fail("mint", "fail");
    expectError(await send(), 502, "processor_error");
    s.processor.clear();
    const ok = await send();
    expect(ok.status).toBe(201);
    expect((await send()).body.id).toBe(ok.body.id);
    expect((await s.request("GET", "/v1/cards", { key })).body.data.map((c: any) => c.id)).toEqual([ok.body.id]);
    expect((await processorHolds(account.id)).sort()).toEqual(["canceled", "requires_capture"]);
    expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(700);
  });

  it("a declined payment method answers 402 with the decline code and issues nothing", async () => {
    const account = await s.newAccount({ paymentMethod: s.processor.declined.paymentMethod });
    const key = await account.key();
    const err = expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 } }), 402, "payment_method_declined");
    expect(err.details).toEqual({ decline_code: s.processor.declined.declineCode });
    expect(await processorHolds(account.id)).toEqual([]);
    expect((await s.request("GET", "/v1/cards", { key })).body.data).toEqual([]);
  });
});

describe(`recovery passes at once (${dbKind})`, () => {
  it("two passes at once work each leftover card once: at the processor, what one pass alone does", async () => {
    const s = await startServer({ PROCESSOR_TIMEOUT_MS: "300" });
    try {
      const key = await (await s.newAccount()).key();
      /** Three cards closed while the processor refused their revoke: their follow-up is left to the pass. */
      const leftovers = async () => {
        const ids: string[] = [];
        s.processor.fail("revoke", "fail");
        for (let i = 0; i < 3; i++) {
          const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 500 + i } })).body;
          expectError(await s.request("POST", `/v1/cards/${card.id}/close`, { key }), 502, "processor_error");
          ids.push(card.id);
        }
        s.processor.clear();
        await s.query(`UPDATE cards SET recovery_next_at = 0 WHERE id IN (${ids.map(() => "?").join(", ")})`, ids);
        return ids;
      };
      const revokes = async (passes: number) => {
        const before = s.processor.calls("revoke");
        await Promise.all(Array.from({ length: passes }, () => s.app.services.maintenance.run()));
        return s.processor.calls("revoke") - before;
      };
      const alone = await leftovers();
      const once = await revokes(1);
      const raced = await leftovers();
      expect(await revokes(2)).toBe(once);
      for (const id of [...alone, ...raced]) expect(await s.processor.cards(id)).toEqual(["canceled"]);
    } finally {
      await s.close();
    }
  });
});
