import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { dbKind, expectError, processor, startServer, type TestServer } from "./harness.js";
import { authorizationFor, signedEvent } from "./fake-stripe.js";
import { guarded, sleep } from "./helpers.js";

const WEBHOOK_SECRET = "whsec_money_lifecycle";

/**
 * The card money lifecycle (DESIGN 3.6) through the test helpers (3.10), as a table of scenarios.
 * After each one, the invariant: what the processor collected from the customer for the card
 * (its hold's capture and its charges, net of refunds) equals what settled minus what was
 * refunded, exactly; and nothing is approved while the card's hold is not in force.
 */
/** The test helpers of DESIGN 3.10 for a suite's server and key (read when called), and the invariant's check. */
function scenarioKit(ctx: () => { s: TestServer; key: string }) {
  const post = (path: string, body?: unknown, headers?: Record<string, string>) => ctx().s.request("POST", path, { key: ctx().key, body, headers });
  const card = async (amount: number) => (await post("/v1/cards", { amount_cents: amount })).body as { id: string };
  const authorize = async (cardId: string, amount: number, merchant?: object) => (await post(`/v1/test_helpers/cards/${cardId}/authorizations`, { amount_cents: amount, merchant })).body;
  const capture = async (authId: string, amount?: number) => (await post(`/v1/test_helpers/authorizations/${authId}/capture`, amount ? { amount_cents: amount } : undefined)).body;
  const refund = async (txnId: string, amount?: number) => (await post(`/v1/test_helpers/transactions/${txnId}/refund`, amount ? { amount_cents: amount } : undefined)).body;
  const read = async (cardId: string) => (await ctx().s.request("GET", `/v1/cards/${cardId}`, { key: ctx().key })).body;

  /** What the processor collected for a card: every payment it made for it, net of refunds. */
  async function collected(cardId: string): Promise<number> {
    const { s } = ctx();
    const ids = await s.query("SELECT DISTINCT processor_payment_id AS id FROM payments WHERE card_id = ? AND kind <> 'refund' AND status = 'succeeded'", [cardId]);
    let n = 0;
    for (const { id } of ids) n += (await s.processor.hold(id))!.captured_cents;
    return n;
  }

  /** collected = settled − refunded, per card, from the processor's side and from the API's. */
  async function expectInvariant(cardId: string, settledMinusRefunded: number) {
    const { s, key } = ctx();
    const txns = (await s.request("GET", `/v1/transactions?card_id=${cardId}`, { key })).body.data as { type: string; amount_cents: number }[];
    const net = txns.reduce((n, t) => n + (t.type === "capture" ? t.amount_cents : -t.amount_cents), 0);
    expect(net, "settled − refunded from /v1/transactions").toBe(settledMinusRefunded);
    expect((await read(cardId)).spent_cents, "spent_cents").toBe(settledMinusRefunded);
    expect(await collected(cardId), "collected by the processor").toBe(settledMinusRefunded);
  }
  return { post, card, authorize, capture, refund, read, collected, expectInvariant };
}

describe(`money lifecycle scenarios (${dbKind}, ${processor})`, () => {
  let s: TestServer;
  let key: string;
  beforeAll(async () => {
    s = guarded(await startServer({ STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET }));
    key = await (await s.newAccount()).key();
  });
  afterAll(() => s.close());
  const { post, card, authorize, capture, refund, read, collected, expectInvariant } = scenarioKit(() => ({ s, key }));

  /** A card of `amount` in a new account (whose balance is the card's alone), authorized whole. */
  async function authorizedInNewAccount(amount: number) {
    const acct = await s.newAccount();
    const k = await acct.key();
    const c = (await s.request("POST", "/v1/cards", { key: k, body: { amount_cents: amount } })).body;
    const auth = (await s.request("POST", `/v1/test_helpers/cards/${c.id}/authorizations`, { key: k, body: { amount_cents: amount } })).body;
    return { acct, k, c, auth };
  }

  /** `fn`, while the processor fails `step` as `fault`. */
  async function whileFailing<T>(step: "capture" | "charge", fault: "fail" | "decline", fn: () => Promise<T>): Promise<T> {
    s.processor.fail(step, fault);
    try {
      return await fn();
    } finally {
      s.processor.clear();
    }
  }

  it("a verification (0) is approved and uses nothing; the purchase after it is approved and settles", async () => {
    const c = await card(1000);
    const check = await authorize(c.id, 0, { name: "Verify Inc", category: "computer_software_stores", country: "US" });
    expect(check).toMatchObject({ approved: true, amount_cents: 0, status: "closed", merchant: { name: "Verify Inc", category: "computer_software_stores", country: "US" } });
    expect(await read(c.id)).toMatchObject({ status: "OPEN", remaining_cents: 1000 });
    const auth = await authorize(c.id, 700);
    expect(auth).toMatchObject({ approved: true, status: "pending", decline_reason: null });
    expect(await read(c.id)).toMatchObject({ status: "USED", remaining_cents: 0, spent_cents: 0 });
    expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBeGreaterThanOrEqual(1000); // held until settlement
    const txn = await capture(auth.id);
    expect(txn).toMatchObject({ type: "capture", amount_cents: 700, authorization_id: auth.id, card_id: c.id });
    await expectInvariant(c.id, 700);
    const list = (await s.request("GET", `/v1/authorizations?card_id=${c.id}`, { key })).body.data;
    expect(list.map((a: any) => [a.amount_cents, a.status])).toEqual([
      [700, "closed"],
      [0, "closed"],
    ]);
  });

  it("a second purchase on a used card is declined and recorded with its reason", async () => {
    const c = await card(1000);
    await authorize(c.id, 100);
    expect(await authorize(c.id, 100)).toMatchObject({ approved: false, decline_reason: "card_not_open", status: "closed" });
    const over = await card(500);
    expect(await authorize(over.id, 501)).toMatchObject({ approved: false, decline_reason: "amount_exceeds_remaining" });
    expect(await read(over.id)).toMatchObject({ status: "OPEN", remaining_cents: 500 });
  });

  for (const [name, amount, settle, expected] of [
    ["lower than authorized (a partial shipment)", 800, 500, { hold: 500, charge: 0 }],
    ["equal to the authorization", 800, 800, { hold: 800, charge: 0 }],
    ["higher than authorized, within the hold (a tip)", 800, 950, { hold: 950, charge: 0 }],
    ["higher than the hold: the rest is charged off-session", 800, 1300, { hold: 1000, charge: 300 }],
  ] as const)
    it(`settles ${name}`, async () => {
      const c = await card(1000);
      const auth = await authorize(c.id, amount);
      await capture(auth.id, settle);
      const payments = await s.query("SELECT kind, amount_cents, status FROM payments WHERE card_id = ? ORDER BY seq", [c.id]);
      expect(payments.map((p) => [p.kind, Number(p.amount_cents), p.status])).toEqual([
        ["hold_capture", expected.hold, "succeeded"],
        ...(expected.charge ? [["charge", expected.charge, "succeeded"]] : []),
      ]);
      const [row] = await s.query("SELECT hold_id FROM cards WHERE id = ?", [c.id]);
      expect(await s.processor.hold(row.hold_id)).toMatchObject({ status: "captured", captured_cents: expected.hold }); // the rest released
      await expectInvariant(c.id, settle);
      expect((await s.request("GET", "/v1/balance", { key })).body.uncollected_cents).toBe(0);
    });

  it("two captures: the second is charged as its own payment", async () => {
    const c = await card(1000);
    const auth = await authorize(c.id, 600);
    await capture(auth.id, 400);
    await capture(auth.id, 200);
    await expectInvariant(c.id, 600);
  });

  it("refunds go back to the customer, in full or in part, never more than was collected", async () => {
    const c = await card(1000);
    const auth = await authorize(c.id, 1000);
    const txn = await capture(auth.id, 1200); // 1000 from the hold, 200 charged
    const part = await refund(txn.id, 300);
    expect(part).toMatchObject({ type: "refund", amount_cents: 300, card_id: c.id });
    await expectInvariant(c.id, 900);
    await refund(txn.id, 900);
    await expectInvariant(c.id, 0);
  });

  it("parallel refunds and captures of one card each draw on what the others left: never a payment refunded twice", async () => {
    const c = await card(500);
    const auth = await authorize(c.id, 500);
    const first = await capture(auth.id, 1400); // 500 from the hold, 900 charged
    // 1,200 back: more than the hold's capture alone, so refunds planned from one reading would overdraw it.
    const more = await Promise.all([capture(auth.id, 300), ...Array.from({ length: 6 }, () => refund(first.id, 200))]);
    expect(more.map((t) => t.type)).toEqual(["capture", ...Array(6).fill("refund")]);
    const payments = await s.query("SELECT kind, status, refund_of, amount_cents FROM payments WHERE card_id = ? ORDER BY seq", [c.id]);
    expect(payments.every((p) => p.status === "succeeded"), JSON.stringify(payments)).toBe(true);
    for (const source of await s.query("SELECT id, amount_cents FROM payments WHERE card_id = ? AND kind <> 'refund'", [c.id])) {
      const drawn = payments.filter((p) => p.refund_of === source.id).reduce((n, p) => n + Number(p.amount_cents), 0);
      expect(drawn).toBeLessThanOrEqual(Number(source.amount_cents));
    }
    await expectInvariant(c.id, 1400 + 300 - 1200);
  });

  it("a refund waives an uncollected charge before it gives back collected money", async () => {
    const { acct, k, c, auth } = await authorizedInNewAccount(400);
    const txn = await whileFailing("charge", "decline", async () => (await s.request("POST", `/v1/test_helpers/authorizations/${auth.id}/capture`, { key: k, body: { amount_cents: 650 } })).body);
    const uncollected = async () => (await s.request("GET", "/v1/balance", { key: k })).body.uncollected_cents;
    expect(await uncollected()).toBe(250);
    // 100 back: the customer was never charged it; nothing moves, 150 stays owed.
    expect((await s.request("POST", `/v1/test_helpers/transactions/${txn.id}/refund`, { key: k, body: { amount_cents: 100 } })).status).toBe(201);
    expect(await uncollected()).toBe(150);
    expect(await collected(c.id)).toBe(400);
    const listed = async () => (await s.admin("GET", `/payments?status=uncollected&account_id=${acct.id}`)).body.data;
    expect(await listed()).toMatchObject([{ kind: "charge", amount_cents: 250, status: "uncollected", waived_cents: 100 }]);
    // 300 more: the other 150 owed is waived, and 150 of the 400 collected goes back.
    expect((await s.request("POST", `/v1/test_helpers/transactions/${txn.id}/refund`, { key: k, body: { amount_cents: 300 } })).status).toBe(201);
    expect(await uncollected()).toBe(0);
    expect(await collected(c.id)).toBe(250);
    expect(await listed()).toMatchObject([{ amount_cents: 250, waived_cents: 250 }]);
    const payments = await s.query("SELECT kind, amount_cents, status FROM payments WHERE card_id = ? ORDER BY seq", [c.id]);
    expect(payments.map((p) => [p.kind, Number(p.amount_cents), p.status])).toEqual([
      ["hold_capture", 400, "succeeded"],
      ["charge", 250, "uncollected"],
      ["refund", 100, "waived"],
      ["refund", 150, "waived"],
      ["refund", 150, "succeeded"],
    ]);
    expect((await s.request("GET", `/v1/cards/${c.id}`, { key: k })).body.spent_cents).toBe(250);
  });

  it("a refund draws on a charge still being retried before collected money: it waits for the charge (spending no attempts), and waives it if it ends uncollected", async () => {
    const { k, c, auth } = await authorizedInNewAccount(300);
    await whileFailing("charge", "fail", async () => {
      const txn = (await s.request("POST", `/v1/test_helpers/authorizations/${auth.id}/capture`, { key: k, body: { amount_cents: 500 } })).body;
      await s.request("POST", `/v1/test_helpers/transactions/${txn.id}/refund`, { key: k, body: { amount_cents: 400 } });
      // The charge fails again and again meanwhile: the refund waiting for it is no failure of its own.
      for (let i = 0; i < 3; i++) {
        await s.query("UPDATE payments SET next_attempt_at = 0 WHERE card_id = ? AND status = 'pending'", [c.id]);
        await s.app.services.maintenance.run();
      }
    });
    const payments = async () =>
      (await s.query("SELECT kind, amount_cents, status, attempts FROM payments WHERE card_id = ? ORDER BY seq", [c.id])).map((p) => [p.kind, Number(p.amount_cents), p.status, Number(p.attempts)]);
    const [, charge, waiting] = await payments();
    expect(charge!.slice(0, 3)).toEqual(["charge", 200, "pending"]);
    expect(Number(charge![3])).toBeGreaterThanOrEqual(4);
    expect(waiting).toEqual(["refund", 200, "pending", 0]);
    expect((await payments())[3]!.slice(0, 3)).toEqual(["refund", 200, "succeeded"]);
    await whileFailing("charge", "decline", async () => {
      for (let i = 0; i < 2; i++) {
        await s.query("UPDATE payments SET next_attempt_at = 0 WHERE card_id = ? AND status = 'pending'", [c.id]);
        await s.app.services.maintenance.run();
      }
    });
    expect((await payments()).map((p) => p.slice(0, 3))).toEqual([
      ["hold_capture", 300, "succeeded"],
      ["charge", 200, "uncollected"],
      ["refund", 200, "waived"],
      ["refund", 200, "succeeded"],
    ]);
    // Settled 500, refunded 400: 100 owed, and it is collected: the charge that failed was the one refunded.
    expect((await s.request("GET", "/v1/balance", { key: k })).body.uncollected_cents).toBe(0);
    expect(await collected(c.id)).toBe(100);
  });

  it("a refund reaching a charge that needs an operator: collected money first, the rest needs the operator too", async () => {
    const { k, c, auth } = await authorizedInNewAccount(300);
    await whileFailing("charge", "fail", async () => {
      await s.request("POST", `/v1/test_helpers/authorizations/${auth.id}/capture`, { key: k, body: { amount_cents: 500 } });
      for (let i = 0; i < 10; i++) {
        await s.query("UPDATE payments SET next_attempt_at = 0 WHERE card_id = ? AND status = 'pending'", [c.id]);
        await s.app.services.maintenance.run();
      }
    });
    const txn = (await s.request("GET", `/v1/transactions?card_id=${c.id}`, { key: k })).body.data[0];
    expect((await s.request("POST", `/v1/test_helpers/transactions/${txn.id}/refund`, { key: k, body: { amount_cents: 400 } })).status).toBe(201);
    const rows = await s.query("SELECT kind, amount_cents, status, last_error FROM payments WHERE card_id = ? ORDER BY seq", [c.id]);
    expect(rows.map((p) => [p.kind, Number(p.amount_cents), p.status])).toEqual([
      ["hold_capture", 300, "succeeded"],
      ["charge", 200, "attention"],
      ["refund", 300, "succeeded"],
      ["refund", 100, "attention"],
    ]);
    expect(rows[3]!.last_error).toMatch(/^waiting for the payment it refunds \(pay_\w+\), which needs an operator$/);
  });

  it("a refund drawn on a charge still being retried is given back from it once the charge succeeds", async () => {
    const { k, c, auth } = await authorizedInNewAccount(300);
    await whileFailing("charge", "fail", async () => {
      const txn = (await s.request("POST", `/v1/test_helpers/authorizations/${auth.id}/capture`, { key: k, body: { amount_cents: 500 } })).body;
      await s.request("POST", `/v1/test_helpers/transactions/${txn.id}/refund`, { key: k, body: { amount_cents: 150 } });
    });
    for (let i = 0; i < 2; i++) {
      await s.query("UPDATE payments SET next_attempt_at = 0 WHERE card_id = ? AND status = 'pending'", [c.id]);
      await s.app.services.maintenance.run();
    }
    const rows = await s.query("SELECT kind, amount_cents, status FROM payments WHERE card_id = ? ORDER BY seq", [c.id]);
    expect(rows.map((p) => [p.kind, Number(p.amount_cents), p.status])).toEqual([
      ["hold_capture", 300, "succeeded"],
      ["charge", 200, "succeeded"],
      ["refund", 150, "succeeded"],
    ]);
    expect(await collected(c.id)).toBe(350);
  });

  it("test helpers refuse what no network would do: capturing a reversal or a verification, refunding more than the capture", async () => {
    const c = await card(1000);
    const check = await authorize(c.id, 0);
    expectError(await post(`/v1/test_helpers/authorizations/${check.id}/capture`, { amount_cents: 500 }), 409, "authorization_not_capturable");
    for (const outcome of ["reverse", "expire"]) {
      const auth = await authorize(c.id, 600);
      await post(`/v1/test_helpers/authorizations/${auth.id}/${outcome}`);
      const refused = await post(`/v1/test_helpers/authorizations/${auth.id}/capture`);
      expectError(refused, 409, "authorization_not_capturable");
      expect(refused.body.error.details).toEqual({ status: `${outcome}d` });
      expect(await read(c.id)).toMatchObject({ status: "OPEN", spent_cents: 0 });
    }
    const again = await authorize(c.id, 600);
    const txn = await capture(again.id, 500);
    const over = await post(`/v1/test_helpers/transactions/${txn.id}/refund`, { amount_cents: 501 });
    expectError(over, 409, "refund_exceeds_capture");
    expect(over.body.error.details).toEqual({ refundable_cents: 500 });
    await refund(txn.id, 400);
    expectError(await post(`/v1/test_helpers/transactions/${txn.id}/refund`, { amount_cents: 101 }), 409, "refund_exceeds_capture");
    await refund(txn.id, 100);
    await expectInvariant(c.id, 0);
  });

  it("expire_hold on a hold already captured changes nothing: a settled hold cannot lapse", async () => {
    const c = await card(800);
    const auth = await authorize(c.id, 800);
    await capture(auth.id);
    const after = (await post(`/v1/test_helpers/cards/${c.id}/expire_hold`)).body;
    expect(after).toMatchObject({ id: c.id, status: "USED", spent_cents: 800 });
    expect(await read(c.id)).toMatchObject({ status: "USED" });
    await expectInvariant(c.id, 800);
  });

  it("20 parallel refunds of one whole capture: one is recorded, the others refused; no refund credit is left behind", async () => {
    const c = await card(1000);
    const auth = await authorize(c.id, 1000);
    const txn = await capture(auth.id);
    // Each with its own Idempotency-Key, as a client would send them (on MariaDB several read the card before any refund commits).
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => post(`/v1/test_helpers/transactions/${txn.id}/refund`, { amount_cents: 1000 }, { "idempotency-key": `refund-${txn.id}-${i}` })),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([201, ...Array(19).fill(409)]);
    for (const refused of answers.filter((a) => a.status === 409)) expect(refused.body.error).toMatchObject({ code: "refund_exceeds_capture", details: { refundable_cents: 0 } });
    await expectInvariant(c.id, 0);
    // A later capture of the authorization is collected in full.
    await capture(auth.id, 300);
    await expectInvariant(c.id, 300);
  });

  it("the refunds of one capture together never exceed it, even while the card has other captures to refund", async () => {
    const c = await card(1000);
    const auth = await authorize(c.id, 1000);
    const first = await capture(auth.id, 400);
    const second = await capture(auth.id, 600);
    await refund(first.id, 250);
    const over = await post(`/v1/test_helpers/transactions/${first.id}/refund`, { amount_cents: 200 });
    expectError(over, 409, "refund_exceeds_capture");
    expect(over.body.error.details).toEqual({ refundable_cents: 150 });
    // Parallel refunds of the rest, each with its own key: only what is left of the first capture goes back.
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => post(`/v1/test_helpers/transactions/${first.id}/refund`, { amount_cents: 50 }, { "idempotency-key": `rest-${first.id}-${i}` })),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([...Array(3).fill(201), ...Array(7).fill(409)]);
    expectError(await post(`/v1/test_helpers/transactions/${first.id}/refund`), 409, "refund_exceeds_capture");
    // The second capture is still refundable in full.
    await refund(second.id);
    await expectInvariant(c.id, 0);
  });

  it("a reversal and a capture of one authorization at once: exactly one lands, and the card agrees with it", async () => {
    for (let round = 0; round < 6; round++) {
      const c = await card(1000);
      const auth = await authorize(c.id, 1000);
      const [reversed, captured] = await Promise.all([
        post(`/v1/test_helpers/authorizations/${auth.id}/reverse`, undefined, { "idempotency-key": `reverse-${auth.id}` }),
        post(`/v1/test_helpers/authorizations/${auth.id}/capture`, undefined, { "idempotency-key": `capture-${auth.id}` }),
      ]);
      if (captured.status === 201) {
        expectError(reversed, 409, "authorization_not_pending");
        expect(reversed.body.error.details).toEqual({ status: "closed" });
        expect(await read(c.id)).toMatchObject({ status: "USED", spent_cents: 1000 });
        await expectInvariant(c.id, 1000);
      } else {
        expect(reversed.status).toBe(200);
        expectError(captured, 409, "authorization_not_capturable");
        expect(await read(c.id)).toMatchObject({ status: "OPEN", spent_cents: 0, remaining_cents: 1000 });
        await expectInvariant(c.id, 0);
        // The card takes a purchase again: its hold is in force.
        expect((await authorize(c.id, 400)).approved).toBe(true);
      }
    }
  });

  for (const outcome of ["reverse", "expire"] as const)
    it(`an authorization that ${outcome}s unsettled gives the card back, OPEN with its full remaining`, async () => {
      const c = await card(900);
      const auth = await authorize(c.id, 400);
      expect(await read(c.id)).toMatchObject({ status: "USED" });
      const released = (await post(`/v1/test_helpers/authorizations/${auth.id}/${outcome}`)).body;
      expect(released.status).toBe(outcome === "reverse" ? "reversed" : "expired");
      expect(await read(c.id)).toMatchObject({ status: "OPEN", remaining_cents: 900, spent_cents: 0 });
      await expectInvariant(c.id, 0);
      expectError(await post(`/v1/test_helpers/authorizations/${auth.id}/${outcome}`), 409, "authorization_not_pending");
      // The card is usable again.
      const again = await authorize(c.id, 900);
      expect(again.approved).toBe(true);
      await capture(again.id);
      await expectInvariant(c.id, 900);
    });

  // The simulated network's decision is final; on Stripe the final answer comes after ours.
  it.runIf(processor === "stripe")("approved, then the network's final decline: nothing is charged, the card is OPEN again", async () => {
    const c = await card(800);
    const [{ processor_card_id }] = await s.query("SELECT processor_card_id FROM cards WHERE id = ?", [c.id]);
    const auth = authorizationFor(s.fake!.cards.get(processor_card_id)!, 800, { pending: true });
    const deliver = async (type: string, object: unknown) => {
      const signed = signedEvent(type, object, { secret: WEBHOOK_SECRET });
      const res = await fetch(`${s.url}/v1/webhooks/stripe`, { method: "POST", headers: { "content-type": "application/json", "stripe-signature": signed.signature }, body: signed.payload });
      return res.json();
    };
    expect(await deliver("issuing_authorization.request", auth)).toEqual({ approved: true });
    expect(await read(c.id)).toMatchObject({ status: "USED" });
    expect(await deliver("issuing_authorization.created", { ...auth, approved: false, pending_request: null })).toMatchObject({ outcome: "applied" });
    expect(await read(c.id)).toMatchObject({ status: "OPEN", remaining_cents: 800 });
    await expectInvariant(c.id, 0);
    const again = await authorize(c.id, 800);
    expect(again.approved).toBe(true);
    await capture(again.id, 650);
    await expectInvariant(c.id, 650);
  });

  it("a hold the processor canceled closes the card at once; nothing is approved after", async () => {
    const c = await card(700);
    const before = (await s.request("GET", "/v1/balance", { key })).body;
    const closed = (await post(`/v1/test_helpers/cards/${c.id}/expire_hold`)).body;
    expect(closed).toMatchObject({ id: c.id, status: "CLOSED" });
    expect(await authorize(c.id, 100)).toMatchObject({ approved: false, decline_reason: "card_not_open" });
    const [row] = await s.query("SELECT hold_status, processor_card_id FROM cards WHERE id = ?", [c.id]);
    expect(row.hold_status).toBe("EXPIRED");
    expect(await s.processor.card(row.processor_card_id)).toBe("canceled");
    const [{ hold_id }] = await s.query("SELECT hold_id FROM cards WHERE id = ?", [c.id]);
    expect(await s.processor.hold(hold_id)).toMatchObject({ status: "canceled" });
    expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ open_cards: before.open_cards - 1, held_cents: before.held_cents - 700 });
  });

  it("a hold canceled after the authorization: the settlement is charged off-session", async () => {
    const c = await card(700);
    const auth = await authorize(c.id, 500);
    await post(`/v1/test_helpers/cards/${c.id}/expire_hold`);
    await capture(auth.id, 500);
    const payments = await s.query("SELECT kind, status FROM payments WHERE card_id = ?", [c.id]);
    expect(payments).toEqual([{ kind: "charge", status: "succeeded" }]);
    await expectInvariant(c.id, 500);
  });

  it("a hold that lapsed at the processor before its capture, the news not yet here: announced released, not captured, and charged", async () => {
    const c = await card(700);
    const auth = await authorize(c.id, 500);
    const [{ hold_id }] = await s.query("SELECT hold_id FROM cards WHERE id = ?", [c.id]);
    await s.processor.lapse(hold_id);
    await capture(auth.id, 500);
    expect(await s.query("SELECT kind, status FROM payments WHERE card_id = ?", [c.id])).toEqual([{ kind: "charge", status: "succeeded" }]);
    const events = ((await s.request("GET", "/v1/events?limit=100", { key })).body.data as { type: string; data: { object: { id?: string; card_id?: string } } }[])
      .filter((e) => e.type.startsWith("hold.") && e.data.object.card_id === c.id);
    expect(events.map((e) => [e.type, e.data.object])).toEqual([
      ["hold.released", { card_id: c.id, amount_cents: 700, captured_cents: 0, released_cents: 700, status: "released" }],
    ]);
    await expectInvariant(c.id, 500);
  });

  it("a charge the payment method declines is uncollected, shown on the balance", async () => {
    const { acct, k, c, auth } = await authorizedInNewAccount(400);
    await whileFailing("charge", "decline", () => s.request("POST", `/v1/test_helpers/authorizations/${auth.id}/capture`, { key: k, body: { amount_cents: 650 } }));
    const payments = await s.query("SELECT kind, amount_cents, status FROM payments WHERE card_id = ? ORDER BY seq", [c.id]);
    expect(payments.map((p) => [p.kind, Number(p.amount_cents), p.status])).toEqual([
      ["hold_capture", 400, "succeeded"],
      ["charge", 250, "uncollected"],
    ]);
    expect((await s.request("GET", "/v1/balance", { key: k })).body.uncollected_cents).toBe(250);
    // The operator sees it.
    const listed = (await s.admin("GET", `/payments?status=uncollected&account_id=${acct.id}`)).body.data;
    expect(listed).toMatchObject([{ account_id: acct.id, card_id: c.id, kind: "charge", amount_cents: 250, status: "uncollected", waived_cents: 0, attempts: 1 }]);
    expect(listed[0].last_error).toMatch(/declined/);
  });

  it("a payment that keeps failing needs attention, listed for the operator", async () => {
    const { acct, k, c, auth } = await authorizedInNewAccount(400);
    await whileFailing("capture", "fail", async () => {
      await s.request("POST", `/v1/test_helpers/authorizations/${auth.id}/capture`, { key: k });
      // The last allowed attempt fails too.
      await s.query("UPDATE payments SET attempts = 8, next_attempt_at = 0 WHERE card_id = ?", [c.id]);
      await s.app.services.maintenance.run();
    });
    const [p] = (await s.admin("GET", `/payments?account_id=${acct.id}`)).body.data;
    expect(p).toMatchObject({ card_id: c.id, kind: "hold_capture", status: "attention", attempts: 9 });
    expect(p.last_error).toBeTruthy();
    // It is not retried on its own any more.
    await s.query("UPDATE payments SET next_attempt_at = 0 WHERE card_id = ?", [c.id]);
    await s.app.services.maintenance.run();
    expect((await s.query("SELECT status FROM payments WHERE card_id = ?", [c.id]))[0].status).toBe("attention");
  });

  it("lost answers at every processor step are retried from the queue until the invariant holds", async () => {
    const c = await card(1000);
    const auth = await authorize(c.id, 1000);
    s.processor.fail("capture", "fail");
    s.processor.fail("charge", "fail");
    const txn = await capture(auth.id, 1300);
    s.processor.clear();
    s.processor.fail("refund", "fail");
    await refund(txn.id, 100);
    s.processor.clear();
    expect(await collected(c.id)).toBe(0); // nothing moved yet
    for (let i = 0; i < 4; i++) {
      await s.query("UPDATE payments SET next_attempt_at = 0 WHERE card_id = ? AND status = 'pending'", [c.id]);
      await s.app.services.maintenance.run();
    }
    const statuses = await s.query("SELECT kind, status, attempts FROM payments WHERE card_id = ? ORDER BY seq", [c.id]);
    expect(statuses.map((p) => p.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
    await expectInvariant(c.id, 1200);
  });
});

/**
 * Every processor step's work done and its answer lost (the simulated processor errs after the
 * work; Stripe does not answer before the timeout). Each scenario ends, after the maintenance pass,
 * with the invariant, one object per intent at the processor, and nothing held that should not be.
 */
describe(`lost answers at every processor step (${dbKind}, ${processor})`, () => {
  let s: TestServer;
  let key: string;
  let accountId: string;
  beforeAll(async () => {
    s = guarded(await startServer({ PROCESSOR_TIMEOUT_MS: "400" }));
  });
  beforeEach(async () => {
    const account = await s.newAccount();
    accountId = account.id;
    key = await account.key();
  });
  afterEach(() => s.processor.clear());
  afterAll(() => s.close());
  const { post, card, authorize, capture, refund, read, expectInvariant } = scenarioKit(() => ({ s, key }));

  /** Runs the maintenance pass with every queued payment due. */
  async function maintain() {
    await s.query("UPDATE payments SET next_attempt_at = 0 WHERE status = 'pending'");
    await s.app.services.maintenance.run();
  }

  for (const step of ["hold", "mint"] as const)
    it(`${step}: 502, the failed card's hold and card are released, and the retry makes one card with one hold`, async () => {
      s.processor.lose(step);
      const headers = { "idempotency-key": `lost-${step}` };
      expectError(await post("/v1/cards", { amount_cents: 700 }, headers), 502, "processor_error");
      await maintain();
      const [failed] = await s.query("SELECT id, status FROM cards WHERE account_id = ?", [accountId]);
      expect(failed.status).toBe("FAILED");
      for (const h of await s.processor.holds(failed.id)) expect(h.status).toBe("canceled");
      for (const c of await s.processor.cards(failed.id)) expect(c).toBe("canceled");
      expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(0);
      const ok = await post("/v1/cards", { amount_cents: 700 }, headers);
      expect(ok.status).toBe(201);
      expect((await s.processor.holds(ok.body.id)).map((h) => h.status)).toEqual(["requires_capture"]);
      expect(await s.processor.cards(ok.body.id)).toEqual(["active"]);
      expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(700);
    });

  it("capture: the settlement stands, and the queue's retry finds the capture made", async () => {
    const c = await card(900);
    const auth = await authorize(c.id, 600);
    s.processor.lose("capture");
    expect((await capture(auth.id)).type).toBe("capture");
    await maintain();
    expect((await s.processor.holds(c.id)).map((h) => [h.status, h.captured_cents])).toEqual([["captured", 600]]);
    await expectInvariant(c.id, 600);
  });

  it("charge: the overage is charged once", async () => {
    const c = await card(500);
    const auth = await authorize(c.id, 500);
    const before = await s.processor.holdCount();
    s.processor.lose("charge");
    await capture(auth.id, 800);
    await maintain();
    expect(await s.processor.holdCount()).toBe(before + 1);
    await expectInvariant(c.id, 800);
  });

  it("refund: refunded once", async () => {
    const c = await card(900);
    const txn = await capture((await authorize(c.id, 900)).id);
    s.processor.lose("refund");
    await refund(txn.id, 250);
    await maintain();
    await expectInvariant(c.id, 650);
  });

  for (const step of ["cancel", "revoke"] as const)
    it(`${step} on close: the card ends CLOSED, revoked, its hold released`, async () => {
      const c = await card(400);
      s.processor.lose(step);
      const first = await post(`/v1/cards/${c.id}/close`);
      expect([200, 502]).toContain(first.status);
      await maintain();
      if ((await read(c.id)).status !== "CLOSED") expect((await post(`/v1/cards/${c.id}/close`)).status).toBe(200);
      await maintain();
      expect(await read(c.id)).toMatchObject({ status: "CLOSED" });
      expect((await s.processor.holds(c.id)).map((h) => h.status)).toEqual(["canceled"]);
      expect(await s.processor.cards(c.id)).toEqual(["canceled"]);
      expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(0);
    });
});

describe(`card expiry (${dbKind}, ${processor})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer({ CARD_TTL_SECONDS: "1" }));
  });
  afterAll(() => s.close());

  it("a step of the maintenance pass that fails keeps none of the others from running; the pass reports the failure", async () => {
    const c = (await s.request("POST", "/v1/cards", { body: { amount_cents: 650 } })).body;
    await sleep(1100);
    // The approvals' step (the first) fails: its table is away.
    await s.query("ALTER TABLE approvals RENAME TO approvals_away");
    try {
      await expect(s.app.services.maintenance.run()).rejects.toThrow(/approvals/);
    } finally {
      await s.query("ALTER TABLE approvals_away RENAME TO approvals");
    }
    // The card's expiry, a later step, ran all the same.
    expect((await s.request("GET", `/v1/cards/${c.id}`)).body.status).toBe("CLOSED");
  });

  it("a card past expires_at is declined at once, and the maintenance pass closes it and releases its hold", async () => {
    const c = (await s.request("POST", "/v1/cards", { body: { amount_cents: 600 } })).body;
    expect(Date.parse(c.expires_at) - Date.parse(c.created_at)).toBe(1000);
    const used = (await s.request("POST", "/v1/cards", { body: { amount_cents: 300 } })).body;
    const auth = (await s.request("POST", `/v1/test_helpers/cards/${used.id}/authorizations`, { body: { amount_cents: 200 } })).body;
    await sleep(1100);
    const late = (await s.request("POST", `/v1/test_helpers/cards/${c.id}/authorizations`, { body: { amount_cents: 100 } })).body;
    expect(late).toMatchObject({ approved: false, decline_reason: "card_expired" });
    await s.app.services.maintenance.run();
    expect((await s.request("GET", `/v1/cards/${c.id}`)).body.status).toBe("CLOSED");
    const [row] = await s.query("SELECT hold_id, processor_card_id FROM cards WHERE id = ?", [c.id]);
    expect(await s.processor.hold(row.hold_id)).toMatchObject({ status: "canceled" });
    expect(await s.processor.card(row.processor_card_id)).toBe("canceled");
    // A USED card is deactivated for new authorizations; its pending authorization still settles from the hold.
    const [u] = await s.query("SELECT processor_card_id, status FROM cards WHERE id = ?", [used.id]);
    expect(u.status).toBe("USED");
    expect(await s.processor.card(u.processor_card_id)).toBe("canceled");
    const txn = (await s.request("POST", `/v1/test_helpers/authorizations/${auth.id}/capture`)).body;
    expect(txn).toMatchObject({ type: "capture", amount_cents: 200 });
    expect((await s.request("GET", `/v1/cards/${used.id}`)).body.spent_cents).toBe(200);
  });

  it("an expired USED card whose authorization never settles is closed as expired, its hold released (not OPEN again)", async () => {
    const deactivated = (await s.request("POST", "/v1/cards", { body: { amount_cents: 400 } })).body;
    const notYet = (await s.request("POST", "/v1/cards", { body: { amount_cents: 300 } })).body;
    const auths = [];
    for (const c of [deactivated, notYet]) auths.push((await s.request("POST", `/v1/test_helpers/cards/${c.id}/authorizations`, { body: { amount_cents: 100 } })).body);
    await sleep(1100);
    // The first card's expiry is swept while it is USED (deactivated; its hold kept for the authorization).
    await s.app.services.maintenance.run();
    const [swept] = await s.query("SELECT status, revoked_at FROM cards WHERE id = ?", [deactivated.id]);
    expect(swept.status).toBe("USED");
    expect(swept.revoked_at).not.toBeNull();
    expect((await s.request("POST", `/v1/test_helpers/authorizations/${auths[0].id}/expire`)).status).toBe(200);
    expect((await s.request("POST", `/v1/test_helpers/authorizations/${auths[1].id}/reverse`)).status).toBe(200);
    for (const c of [deactivated, notYet]) {
      expect((await s.request("GET", `/v1/cards/${c.id}`)).body).toMatchObject({ status: "CLOSED", spent_cents: 0 });
      const [row] = await s.query("SELECT hold_id, hold_status, processor_card_id FROM cards WHERE id = ?", [c.id]);
      expect(row.hold_status).toBe("RELEASED");
      expect(await s.processor.hold(row.hold_id)).toMatchObject({ status: "canceled" });
      expect(await s.processor.card(row.processor_card_id)).toBe("canceled");
      const types = ((await s.request("GET", "/v1/events?limit=100")).body.data as { type: string; data: { object: { id?: string } } }[])
        .filter((e) => e.data.object.id === c.id)
        .map((e) => e.type);
      expect(types).toContain("card.expired");
      expect(types).not.toContain("card.reopened");
    }
  });

  it("a lapse reported against a card read before its settlement leaves the settled card USED (not closed)", async () => {
    const c = (await s.request("POST", "/v1/cards", { body: { amount_cents: 500 } })).body;
    const principal = { keyId: "key_lapse", accountId: s.accountId, mode: "test" as const, role: "full" as const };
    const auth = (await s.request("POST", `/v1/test_helpers/cards/${c.id}/authorizations`, { body: { amount_cents: 200 } })).body;
    const readBeforeSettlement = await s.app.services.cards.find(principal, c.id);
    expect((await s.request("POST", `/v1/test_helpers/authorizations/${auth.id}/capture`, {})).status).toBe(201);
    const after = await s.app.services.lifecycle.holdCanceled(readBeforeSettlement);
    expect(after).toMatchObject({ status: "USED", hold_status: "CAPTURED" });
    const types = (await s.request("GET", "/v1/events?limit=5")).body.data.filter((e: any) => [e.data.object.id, e.data.object.card_id].includes(c.id)).map((e: any) => e.type);
    expect(types).not.toContain("card.closed");
  });

  it("a sweep that read the card OPEN leaves it alone when an authorization used it before the sweep's update", async () => {
    const c = (await s.request("POST", "/v1/cards", { body: { amount_cents: 500 } })).body;
    const principal = { keyId: "key_sweep", accountId: s.accountId, mode: "test" as const, role: "full" as const };
    const readBySweep = await s.app.services.cards.find(principal, c.id);
    const auth = (await s.request("POST", `/v1/test_helpers/cards/${c.id}/authorizations`, { body: { amount_cents: 200 } })).body;
    expect(auth.approved).toBe(true);
    await sleep(1100);
    expect(await s.app.services.lifecycle.expire(readBySweep)).toBe(false);
    const [row] = await s.query("SELECT status, hold_id FROM cards WHERE id = ?", [c.id]);
    expect(row.status).toBe("USED");
    // The hold the pending authorization settles from is still there, and no card.expired was written.
    expect(await s.processor.hold(row.hold_id)).toMatchObject({ status: "requires_capture" });
    const events = (await s.request("GET", `/v1/events?limit=100`)).body.data as { type: string; data: { object: { id?: string } } }[];
    expect(events.filter((e) => e.data.object.id === c.id).map((e) => e.type)).not.toContain("card.expired");
    const txn = (await s.request("POST", `/v1/test_helpers/authorizations/${auth.id}/capture`)).body;
    expect(txn).toMatchObject({ type: "capture", amount_cents: 200 });
    expect((await s.request("GET", `/v1/cards/${c.id}`)).body).toMatchObject({ status: "USED", spent_cents: 200 });
  });
});
