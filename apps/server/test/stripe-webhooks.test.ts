import { PassThrough } from "node:stream";
import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authorizationFor, captureTransactionFor, faults, signedEvent, startFakeStripe, type FakeIssuingCard, type FakeStripe } from "./fake-stripe.js";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";

const SECRET = "whsec_test_0123456789";
/** The live-mode endpoint's own secret (STRIPE_LIVE_WEBHOOK_SECRET; the test one's is STRIPE_TEST_WEBHOOK_SECRET). */
const LIVE_SECRET = "whsec_live_9876543210";

/**
 * POST /v1/webhooks/stripe: payloads signed with the SDK's own test-header helper; bad signatures,
 * replays and out-of-order events. Purchases go through the same domain path as the test helper.
 */
describe(`stripe webhooks (${dbKind})`, () => {
  let fake: FakeStripe;
  let s: TestServer;

  beforeAll(async () => {
    fake = await startFakeStripe("sk_test_fake");
    s = await startServer({
      PROCESSOR: "stripe",
      STRIPE_TEST_SECRET_KEY: "sk_test_fake",
      STRIPE_API_BASE: fake.url,
      STRIPE_TEST_WEBHOOK_SECRET: SECRET,
      STRIPE_LIVE_WEBHOOK_SECRET: LIVE_SECRET,
      PROCESSOR_TIMEOUT_MS: "1500",
    });
  });
  afterAll(async () => {
    await s?.close();
    await fake?.close();
  });

  async function deliver(type: string, object: unknown, o: { id?: string; secret?: string; signature?: string; livemode?: boolean; timestamp?: number } = {}) {
    const signed = signedEvent(type, object, { secret: o.secret ?? SECRET, id: o.id, livemode: o.livemode, timestamp: o.timestamp });
    const res = await fetch(`${s.url}/v1/webhooks/stripe`, {
      method: "POST",
      headers: { "content-type": "application/json; charset=utf-8", "stripe-signature": o.signature ?? signed.signature },
      body: signed.payload,
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, event: signed.event };
  }

  async function openCard(amount = 2000) {
    const account = await s.newAccount();
    const key = await account.key();
    const created = await s.request("POST", "/v1/cards", { key, body: { amount_cents: amount } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const card = created.body;
    const issued = [...fake.cards.values()].find((c) => c.metadata.card_id === card.id) as FakeIssuingCard;
    const [row] = await s.query("SELECT hold_id FROM cards WHERE id = ?", [card.id]);
    const pi = fake.paymentIntents.get(row!.hold_id)!;
    return { account, key, card, issued, pi };
  }
  const cardOf = async (key: string, id: string) => (await s.request("GET", `/v1/cards/${id}`, { key })).body;
  const authorizationsOf = async (key: string, cardId: string) => (await s.request("GET", `/v1/authorizations?card_id=${cardId}`, { key })).body.data;

  describe("signature", () => {
    it("a bad signature, a wrong secret, a missing header, a stale timestamp or a tampered body: 400 invalid_signature", async () => {
      const { issued } = await openCard();
      const auth = authorizationFor(issued, 500, { pending: true });
      expectError(await deliver("issuing_authorization.request", auth, { signature: "t=1,v1=deadbeef" }), 400, "invalid_signature");
      expectError(await deliver("issuing_authorization.request", auth, { secret: "whsec_other" }), 400, "invalid_signature");
      expectError(
        await deliver("issuing_authorization.request", auth, { timestamp: Math.floor(Date.now() / 1000) - 3600 }),
        400,
        "invalid_signature",
      );
      const signed = signedEvent("issuing_authorization.request", auth, { secret: SECRET });
      const tampered = await fetch(`${s.url}/v1/webhooks/stripe`, {
        method: "POST",
        headers: { "content-type": "application/json", "stripe-signature": signed.signature },
        body: signed.payload.replace('"amount":500', '"amount":5'),
      });
      expect(tampered.status).toBe(400);
      const missing = await fetch(`${s.url}/v1/webhooks/stripe`, { method: "POST", headers: { "content-type": "application/json" }, body: signed.payload });
      expect(missing.status).toBe(400);
      expect((await missing.json()).error.code).toBe("invalid_signature");
    });

    it("each mode's endpoint signs with its own secret, and only events of its mode: the test secret moves no live money", async () => {
      const live = await deliver("customer.created", { id: "cus_live_1" }, { secret: LIVE_SECRET, livemode: true });
      expect(live.status).toBe(200);
      expect(live.body).toEqual({ received: true, outcome: "ignored" });
      expect((await deliver("customer.created", { id: "cus_test_1" }, { secret: SECRET })).status).toBe(200);
      const liveWithTestSecret = expectError(await deliver("customer.created", { id: "cus_live_2" }, { secret: SECRET, livemode: true }), 400, "invalid_event");
      expect(liveWithTestSecret.details.issues).toEqual([{ path: "livemode", message: "must be false for an event signed with the test-mode endpoint's secret" }]);
      expectError(await deliver("customer.created", { id: "cus_test_2" }, { secret: LIVE_SECRET }), 400, "invalid_event");
      // A Stripe decline signed with the live secret but naming test mode gives no test card back.
      const { key, card, issued } = await openCard(1000);
      const auth = authorizationFor(issued, 900, { pending: true });
      expect((await deliver("issuing_authorization.request", auth)).body).toEqual({ approved: true });
      expectError(await deliver("issuing_authorization.created", { ...auth, approved: false, pending_request: null }, { secret: LIVE_SECRET }), 400, "invalid_event");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED" });
    });

    it("the raw body is verified byte for byte, whatever its content type; no API key is needed", async () => {
      const { issued } = await openCard();
      const signed = signedEvent("issuing_card.updated", issued, { secret: SECRET });
      const res = await fetch(`${s.url}/v1/webhooks/stripe`, {
        method: "POST",
        headers: { "content-type": "text/plain", "stripe-signature": signed.signature },
        body: signed.payload,
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ received: true, outcome: "ignored" });
    });
  });

  describe("issuing_authorization.request (synchronous)", () => {
    it("approves the first purchase within the limit, answering {approved} with Stripe-Version; nothing is captured before settlement", async () => {
      const { key, card, issued, pi } = await openCard(2000);
      const auth = authorizationFor(issued, 1500, { pending: true });
      const res = await deliver("issuing_authorization.request", { ...auth, merchant_data: { name: "Bookshop", category: "book_stores", country: "US" } });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ approved: true });
      expect(res.headers.get("stripe-version")).toBe(Stripe.API_VERSION);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED", remaining_cents: 0, spent_cents: 0 });
      expect(pi.status).toBe("requires_capture"); // money moves only at settlement
      const [recorded] = await authorizationsOf(key, card.id);
      expect(recorded).toMatchObject({ amount_cents: 1500, approved: true, status: "pending", merchant: { name: "Bookshop", category: "book_stores", country: "US" } });

      // Settlement: the hold is captured for the settled amount, the card deactivated.
      expect((await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 1500), authorization: auth.id })).body.outcome).toBe("applied");
      expect(pi).toMatchObject({ status: "succeeded", amount_received: 1500 });
      const capture = fake.calls(`/v1/payment_intents/${pi.id}/capture`)[0]!;
      expect(capture.params).toEqual({ amount_to_capture: "1500" });
      expect(capture.idempotencyKey).toMatch(/^pay_\w+:hold_capture$/);
      expect(issued.status).toBe("canceled");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED", spent_cents: 1500 });
      expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 0, open_cards: 0 });
    });

    it("approves a zero-amount verification without using the card", async () => {
      const { key, card, issued } = await openCard(1000);
      expect((await deliver("issuing_authorization.request", authorizationFor(issued, 0, { pending: true }))).body).toEqual({ approved: true });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "OPEN", remaining_cents: 1000 });
      expect((await deliver("issuing_authorization.request", authorizationFor(issued, 900, { pending: true }))).body).toEqual({ approved: true });
    });

    it("declines over remaining_cents, on a used card (single use), on a closed card, and on an unknown card", async () => {
      const { key, card, issued } = await openCard(1000);
      expect((await deliver("issuing_authorization.request", authorizationFor(issued, 1001, { pending: true }))).body).toEqual({ approved: false });
      expect((await cardOf(key, card.id)).status).toBe("OPEN");
      expect((await deliver("issuing_authorization.request", authorizationFor(issued, 1000, { pending: true }))).body).toEqual({ approved: true });
      expect((await deliver("issuing_authorization.request", authorizationFor(issued, 1, { pending: true }))).body).toEqual({ approved: false });

      const other = await openCard(1000);
      await s.request("POST", `/v1/cards/${other.card.id}/close`, { key: other.key });
      expect((await deliver("issuing_authorization.request", authorizationFor(other.issued, 10, { pending: true }))).body).toEqual({ approved: false });

      const stranger = { ...issued, id: "ic_not_ours", metadata: {} };
      expect((await deliver("issuing_authorization.request", authorizationFor(stranger, 10, { pending: true }))).body).toEqual({ approved: false });
    });

    it("an increment of an approved authorization is approved within the card's hold (pending_request.amount is the addition)", async () => {
      const { key, card, issued } = await openCard(1000);
      const auth = authorizationFor(issued, 600, { pending: true });
      expect((await deliver("issuing_authorization.request", auth)).body).toEqual({ approved: true });
      // Stripe's increment: `amount` is what is authorized so far, `pending_request.amount` what it would add.
      const more = (authorized: number, additional: number) =>
        deliver("issuing_authorization.request", { ...auth, amount: authorized, pending_request: { amount: additional, currency: "usd" } });
      expect((await more(600, 300)).body).toEqual({ approved: true });
      expect((await authorizationsOf(key, card.id))[0]).toMatchObject({ amount_cents: 900 });
      expect((await more(900, 101)).body).toEqual({ approved: false });
      expect((await authorizationsOf(key, card.id))[0]).toMatchObject({ amount_cents: 900 });
    });

    it("asked again on an authorization it approved, Stripe is told no once the card's hold is gone or the authorization gave the card back", async () => {
      // The hold lapsed (the card closed): a repeat, or an increment after a partial reversal, is declined.
      const lapsed = await openCard(1000);
      const first = authorizationFor(lapsed.issued, 900, { pending: true });
      expect((await deliver("issuing_authorization.request", first)).body).toEqual({ approved: true });
      expect((await deliver("payment_intent.canceled", { ...lapsed.pi, status: "canceled" })).body.outcome).toBe("applied");
      expect((await deliver("issuing_authorization.request", first)).body).toEqual({ approved: false });
      const smaller = { ...first, amount: 600, pending_request: { amount: 200, currency: "usd" } };
      expect((await deliver("issuing_authorization.request", smaller)).body).toEqual({ approved: false });

      // Reversed (the card OPEN again), and the card then used by another: the first is not approved again.
      const { issued } = await openCard(1000);
      const a = authorizationFor(issued, 700, { pending: true });
      expect((await deliver("issuing_authorization.request", a)).body).toEqual({ approved: true });
      expect((await deliver("issuing_authorization.updated", { ...a, status: "reversed", pending_request: null })).body.outcome).toBe("applied");
      expect((await deliver("issuing_authorization.request", authorizationFor(issued, 1000, { pending: true }))).body).toEqual({ approved: true });
      expect((await deliver("issuing_authorization.request", { ...a, amount: 500, pending_request: { amount: 100, currency: "usd" } })).body).toEqual({ approved: false });
    });

    it("a live-mode event never touches a test-mode card", async () => {
      const { key, card, issued } = await openCard(1000);
      const res = await deliver("issuing_authorization.request", authorizationFor(issued, 100, { pending: true }), { livemode: true, secret: LIVE_SECRET });
      expect(res.body).toEqual({ approved: false });
      expect((await cardOf(key, card.id)).status).toBe("OPEN");
    });

    it("two authorizations racing on one card: exactly one is approved", async () => {
      const { issued } = await openCard(1000);
      const answers = await Promise.all(
        [1, 2, 3, 4].map(() => deliver("issuing_authorization.request", authorizationFor(issued, 300, { pending: true }))),
      );
      expect(answers.filter((a) => a.body.approved === true)).toHaveLength(1);
    });

    it.each([
      ["each its own event id", {}, 4],
      ["the same event id", { id: "evt_request_at_once_1" }, 1],
    ])("one authorization in four request events at once (%s): recorded once, one decision for all", async (_label, overrides, eventIds) => {
      const { key, card, issued } = await openCard(1000);
      const auth = authorizationFor(issued, 400, { pending: true });
      const answers = await Promise.all([1, 2, 3, 4].map(() => deliver("issuing_authorization.request", auth, overrides)));
      expect(new Set(answers.map((a) => a.event.id)).size).toBe(eventIds);
      expect(answers.map((a) => a.body)).toEqual(Array(4).fill({ approved: true }));
      const recorded = await authorizationsOf(key, card.id);
      expect(recorded).toHaveLength(1);
      expect(recorded[0]).toMatchObject({ approved: true, amount_cents: 400 });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED", remaining_cents: 0 });
    });

    it.each([
      ["an approval", 400, true, { status: "USED", remaining_cents: 0 }],
      ["a decline", 1500, false, { status: "OPEN", remaining_cents: 1000 }],
    ])("a replayed request event (%s) gets the same decision again, and nothing is recorded twice", async (_label, amount, approved, cardAfter) => {
      const { key, card, issued } = await openCard(1000);
      const auth = authorizationFor(issued, amount, { pending: true });
      expect((await deliver("issuing_authorization.request", auth, { id: `evt_replay_request_${amount}` })).body).toEqual({ approved });
      expect((await deliver("issuing_authorization.request", auth, { id: `evt_replay_request_${amount}` })).body).toEqual({ approved });
      const recorded = await authorizationsOf(key, card.id);
      expect(recorded).toHaveLength(1);
      expect(recorded[0]).toMatchObject({ approved, amount_cents: amount });
      expect(await cardOf(key, card.id)).toMatchObject(cardAfter);
    });
  });

  describe("final answers, settlement and refunds (in any order, twice)", () => {
    it("Stripe's final decline after we approved gives the card back; nothing is charged", async () => {
      const { key, card, issued, pi } = await openCard(2000);
      const auth = authorizationFor(issued, 1200, { pending: true });
      expect((await deliver("issuing_authorization.request", auth)).body).toEqual({ approved: true });
      const res = await deliver("issuing_authorization.created", { ...auth, approved: false, pending_request: null });
      expect(res.body).toEqual({ received: true, outcome: "applied" });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "OPEN", remaining_cents: 2000 });
      expect(pi.status).toBe("requires_capture");
      const [recorded] = await authorizationsOf(key, card.id);
      expect(recorded).toMatchObject({ approved: false, status: "closed" });
    });

    it("issuing_authorization.created (approved) without a request event records it and uses the card", async () => {
      const { key, card, issued } = await openCard(2000);
      const res = await deliver("issuing_authorization.created", authorizationFor(issued, 1200));
      expect(res.body).toEqual({ received: true, outcome: "applied" });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED" });
    });

    it("a reversal gives the card back", async () => {
      const { key, card, issued } = await openCard(2000);
      const auth = authorizationFor(issued, 700, { pending: true });
      await deliver("issuing_authorization.request", auth);
      expect((await deliver("issuing_authorization.updated", { ...auth, status: "reversed", pending_request: null })).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "OPEN", remaining_cents: 2000 });
    });

    it("a reversal handled before its authorization's .created is answered 409 and applied when Stripe redelivers it", async () => {
      const { key, card, issued } = await openCard(2000);
      const auth = authorizationFor(issued, 700);
      const reversal = { ...auth, status: "reversed" };
      const early = await deliver("issuing_authorization.updated", reversal, { id: "evt_reversal_early_1" });
      expectError(early, 409, "event_too_early");
      expect(await authorizationsOf(key, card.id)).toEqual([]);
      expect((await deliver("issuing_authorization.created", auth)).body).toEqual({ received: true, outcome: "applied" });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED" });
      // Stripe's retry of the same event: now it applies, and the card is OPEN again.
      expect((await deliver("issuing_authorization.updated", reversal, { id: "evt_reversal_early_1" })).body).toEqual({ received: true, outcome: "applied" });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "OPEN", remaining_cents: 2000 });
      // Not ours, or never approved: nothing to wait for.
      const stranger = { ...issued, id: "ic_not_ours", metadata: {} };
      expect((await deliver("issuing_authorization.updated", { ...authorizationFor(stranger, 100), status: "reversed" })).body.outcome).toBe("ignored");
      expect((await deliver("issuing_authorization.updated", { ...authorizationFor(issued, 100, { approved: false }), status: "reversed" })).body.outcome).toBe("ignored");
    });

    it("a stand-in approval beside the card's use keeps the card USED when the first is reversed, and takes over its use; it gets no increment of ours until then", async () => {
      const { key, card, issued, pi } = await openCard(2000);
      const first = authorizationFor(issued, 1200, { pending: true });
      expect((await deliver("issuing_authorization.request", first)).body).toEqual({ approved: true });
      // Stripe approved a second one alone (our answer came too late): recorded approved, pending, beside the first.
      const standIn = authorizationFor(issued, 800);
      expect((await deliver("issuing_authorization.created", standIn)).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED" });
      // An increment of the stand-in is not ours to approve, whatever the hold leaves.
      const more = { ...standIn, pending_request: { ...authorizationFor(issued, 100, { pending: true }).pending_request! } };
      expect((await deliver("issuing_authorization.request", more)).body).toEqual({ approved: false });
      // The first is reversed: the stand-in still settles on the hold, so the card is not given back.
      const reversed = await deliver("issuing_authorization.updated", { ...first, status: "reversed", pending_request: null });
      expect(reversed.body.outcome, JSON.stringify(reversed.body)).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED", remaining_cents: 0 });
      expect(pi.status).toBe("requires_capture");
      // The stand-in now holds the card's use: reversed too, the card is OPEN again.
      expect((await deliver("issuing_authorization.updated", { ...standIn, status: "reversed" })).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "OPEN", remaining_cents: 2000 });
    });

    it("a request event repeated after its reversal is declined (its approval no longer stands) and does not use the card again", async () => {
      const { key, card, issued } = await openCard(2000);
      const auth = authorizationFor(issued, 700, { pending: true });
      expect((await deliver("issuing_authorization.request", auth, { id: "evt_before_reversal_1" })).body).toEqual({ approved: true });
      await deliver("issuing_authorization.updated", { ...auth, status: "reversed", pending_request: null });
      expect((await deliver("issuing_authorization.request", auth, { id: "evt_before_reversal_1" })).body).toEqual({ approved: false });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "OPEN", remaining_cents: 2000 });
      const recorded = await authorizationsOf(key, card.id);
      expect(recorded).toHaveLength(1);
      expect(recorded[0]).toMatchObject({ approved: true, status: "reversed" });
      const used = (await s.request("GET", "/v1/events?type=card.used", { key })).body.data.filter((e: any) => e.data.object.id === card.id);
      expect(used).toHaveLength(1);
      expect((await deliver("issuing_authorization.request", authorizationFor(issued, 2000, { pending: true }))).body).toEqual({ approved: true });
    });

    it("settles more than the hold: the hold is captured whole and the rest charged off-session; a refund comes back", async () => {
      const { key, card, issued, pi } = await openCard(1000);
      const auth = authorizationFor(issued, 1000, { pending: true });
      await deliver("issuing_authorization.request", auth);
      const txn = { ...captureTransactionFor(issued, 1250), authorization: auth.id };
      expect((await deliver("issuing_transaction.created", txn)).body.outcome).toBe("applied");
      expect((await deliver("issuing_transaction.created", txn)).body.outcome).toBe("applied"); // a second delivery (new event id) moves nothing
      expect(pi).toMatchObject({ status: "succeeded", amount_received: 1000 });
      const charges = [...fake.paymentIntents.values()].filter((p) => p.metadata?.card_id === card.id && p.metadata?.purpose === "charge");
      expect(charges.map((p) => [p.amount, p.status])).toEqual([[250, "succeeded"]]);
      expect(await cardOf(key, card.id)).toMatchObject({ spent_cents: 1250 });
      const refund = { ...captureTransactionFor(issued, 0), id: "ipi_refund_1", type: "refund", amount: 300 };
      expect((await deliver("issuing_transaction.created", refund)).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ spent_cents: 950 });
      expect(fake.refunded(pi.id)).toBe(300);
    });

    it("a refund delivered before the capture it refunds: the capture nets it, the customer pays only the difference", async () => {
      const { key, card, issued, pi } = await openCard(1000);
      const auth = authorizationFor(issued, 800, { pending: true });
      await deliver("issuing_authorization.request", auth);
      const refund = { ...captureTransactionFor(issued, 0), id: "ipi_refund_early", type: "refund", amount: 300 };
      expect((await deliver("issuing_transaction.created", refund)).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ spent_cents: -300 });
      expect((await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 800), authorization: auth.id })).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ spent_cents: 500 });
      expect(pi).toMatchObject({ status: "succeeded", amount_received: 500 });
      expect(fake.refunded(pi.id)).toBe(0);
      const charges = [...fake.paymentIntents.values()].filter((p) => p.metadata?.card_id === card.id && p.metadata?.purpose === "charge");
      expect(charges).toEqual([]);
    });

    it("a refund of the whole capture delivered before it: nothing is captured, the hold is released", async () => {
      const { key, card, issued, pi } = await openCard(1000);
      const auth = authorizationFor(issued, 600, { pending: true });
      await deliver("issuing_authorization.request", auth);
      await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 0), id: "ipi_refund_whole", type: "refund", amount: 600 });
      expect((await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 600), authorization: auth.id })).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED", spent_cents: 0 });
      expect(pi).toMatchObject({ status: "canceled", amount_received: 0 });
      expect(issued.status).toBe("canceled");
      expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(0);
      const holdEvents = (await s.request("GET", "/v1/events?type=hold.released", { key })).body.data.filter((e: any) => e.data.object.card_id === card.id);
      expect(holdEvents.map((e: any) => e.data.object)).toEqual([{ card_id: card.id, amount_cents: 1000, captured_cents: 0, released_cents: 1000, status: "released" }]);
    });

    it("a refund reversal (a refund transaction with a negative amount) is owed again, charged off-session", async () => {
      const { key, card, issued, pi } = await openCard(1000);
      const auth = authorizationFor(issued, 1000, { pending: true });
      await deliver("issuing_authorization.request", auth);
      await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 1000), authorization: auth.id });
      await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 0), id: "ipi_refund_r", type: "refund", amount: 300 });
      expect(await cardOf(key, card.id)).toMatchObject({ spent_cents: 700 });
      expect((await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 0), id: "ipi_refund_r_rev", type: "refund", amount: -300 })).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ spent_cents: 1000 });
      expect(fake.refunded(pi.id)).toBe(300);
      const charges = [...fake.paymentIntents.values()].filter((p) => p.metadata?.card_id === card.id && p.metadata?.purpose === "charge");
      expect(charges.map((p) => [p.amount, p.status])).toEqual([[300, "succeeded"]]);
    });

    it("merchant data out of shape never refuses a settlement: it is shown cut to size, or not at all", async () => {
      const { key, card, issued } = await openCard(1000);
      const auth = authorizationFor(issued, 400, { pending: true });
      await deliver("issuing_authorization.request", auth);
      const merchant_data = { name: "M".repeat(10_000), category: 42, country: "usa" };
      const res = await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 400), authorization: auth.id, merchant_data });
      expect(res.body.outcome).toBe("applied");
      const [txn] = (await s.request("GET", `/v1/transactions?card_id=${card.id}`, { key })).body.data;
      expect(txn).toMatchObject({ type: "capture", amount_cents: 400, merchant_name: "M".repeat(200) });
    });

    it("an Issuing card that only names our card in its metadata (left over from a lost mint) cannot spend that card's hold", async () => {
      const { key, card, issued } = await openCard(1000);
      const leftover = { ...issued, id: "ic_leftover_of_lost_mint" };
      expect((await deliver("issuing_authorization.request", authorizationFor(leftover, 500, { pending: true }))).body).toEqual({ approved: false });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "OPEN", remaining_cents: 1000 });
    });

    it("Stripe's decline of an authorization we have not decided is recorded: our late decision cannot use the card", async () => {
      const { key, card, issued } = await openCard(1000);
      const auth = authorizationFor(issued, 600, { approved: false });
      expect((await deliver("issuing_authorization.created", auth)).body.outcome).toBe("applied");
      expect(await authorizationsOf(key, card.id)).toMatchObject([{ approved: false, decline_reason: "processor_declined", status: "closed", amount_cents: 600 }]);
      // The request event, decided after Stripe gave up waiting: the recorded decline stands.
      expect((await deliver("issuing_authorization.request", { ...auth, amount: 0, approved: false, pending_request: { amount: 600 } })).body).toEqual({ approved: false });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "OPEN", remaining_cents: 1000 });
    });

    it("Stripe's approval of what we declined (its timeout setting decided) stands: the card is spent by it and takes no second purchase", async () => {
      const { key, card, issued } = await openCard(1000);
      const auth = authorizationFor(issued, 900, { pending: true });
      // Our answer (here a decline, as one that came too late) and Stripe's final approval.
      expect((await deliver("issuing_authorization.request", { ...auth, pending_request: { ...auth.pending_request!, amount: 1200 } })).body).toEqual({ approved: false });
      const created = { ...auth, amount: 1200, approved: true, pending_request: null };
      expect((await deliver("issuing_authorization.created", created)).body).toEqual({ received: true, outcome: "applied" });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED", remaining_cents: 0 });
      expect(await authorizationsOf(key, card.id)).toMatchObject([{ amount_cents: 1200, approved: true, status: "pending", decline_reason: null }]);
      const announced = (await s.request("GET", "/v1/events", { key })).body.data.map((e: { type: string }) => e.type).reverse();
      expect(announced.filter((t: string) => t.startsWith("authorization.") || t === "card.used")).toEqual(["authorization.declined", "authorization.approved", "card.used"]);
      // The same final answer again, under another event id: nothing more changes.
      expect((await deliver("issuing_authorization.created", created)).body).toEqual({ received: true, outcome: "ignored" });
      expect((await deliver("issuing_authorization.request", authorizationFor(issued, 100, { pending: true }))).body).toEqual({ approved: false });

      // Approved by Stripe alone on a card another purchase already spent: recorded approved, the card as it was.
      const other = await openCard(1000);
      expect((await deliver("issuing_authorization.request", authorizationFor(other.issued, 500, { pending: true }))).body).toEqual({ approved: true });
      const late = authorizationFor(other.issued, 300);
      expect((await deliver("issuing_authorization.created", late)).body).toEqual({ received: true, outcome: "applied" });
      expect((await authorizationsOf(other.key, other.card.id)).find((a: { amount_cents: number }) => a.amount_cents === 300)).toMatchObject({
        approved: true,
        status: "pending",
        decline_reason: null,
      });
      expect(await cardOf(other.key, other.card.id)).toMatchObject({ status: "USED" });
    });

    it("Stripe's approval of what we declined, reversed before its .created is handled: 409 until then, and the card comes back", async () => {
      const { key, card, issued } = await openCard(1000);
      const auth = authorizationFor(issued, 1200, { pending: true });
      expect((await deliver("issuing_authorization.request", auth)).body).toEqual({ approved: false });
      const reversed = { ...auth, amount: 0, approved: true, status: "reversed", pending_request: null };
      const early = await deliver("issuing_authorization.updated", reversed);
      expect(early.status).toBe(409);
      expect(early.body.error.code).toBe("event_too_early");
      expect((await deliver("issuing_authorization.created", { ...auth, amount: 1200, approved: true, pending_request: null })).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED" });
      // Stripe's redelivery of the reversal, under its own event id.
      expect((await deliver("issuing_authorization.updated", reversed, { id: early.event.id })).body).toEqual({ received: true, outcome: "applied" });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "OPEN", remaining_cents: 1000 });
      expect(await authorizationsOf(key, card.id)).toMatchObject([{ approved: true, status: "reversed" }]);
    });

    it("Stripe's approval of what we declined, settled before its .created is handled: recorded approved and closed, never pending", async () => {
      const { key, card, issued } = await openCard(1000);
      const auth = authorizationFor(issued, 1200, { pending: true });
      expect((await deliver("issuing_authorization.request", auth)).body).toEqual({ approved: false });
      expect((await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 1200), authorization: auth.id })).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED", spent_cents: 1200 });
      expect((await deliver("issuing_authorization.created", { ...auth, amount: 1200, approved: true, pending_request: null })).body.outcome).toBe("applied");
      expect(await authorizationsOf(key, card.id)).toMatchObject([{ approved: true, status: "closed", decline_reason: null }]);
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED", spent_cents: 1200 });
    });

    it("a capture handled before its authorization is recorded at all: 409 until the .created is, then settled against it, never left pending", async () => {
      const { key, card, issued, pi } = await openCard(1000);
      const auth = authorizationFor(issued, 700);
      const capture = { ...captureTransactionFor(issued, 700), authorization: auth.id };
      const early = await deliver("issuing_transaction.created", capture, { id: "evt_capture_early_1" });
      expectError(early, 409, "event_too_early");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "OPEN", spent_cents: 0 });
      expect((await deliver("issuing_authorization.created", auth)).body.outcome).toBe("applied");
      expect((await deliver("issuing_transaction.created", capture, { id: "evt_capture_early_1" })).body.outcome).toBe("applied");
      expect(await authorizationsOf(key, card.id)).toMatchObject([{ approved: true, status: "closed" }]);
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED", spent_cents: 700 });
      expect(pi).toMatchObject({ status: "succeeded", amount_received: 700 });
    });

    it("a force capture (no authorization) on an OPEN card settles from its hold and spends the card", async () => {
      const { key, card, issued, pi } = await openCard(1000);
      expect((await deliver("issuing_transaction.created", captureTransactionFor(issued, 450))).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED", remaining_cents: 0, spent_cents: 450 });
      expect(pi).toMatchObject({ status: "succeeded", amount_received: 450 });
      expect(issued.status).toBe("canceled");
      expect((await deliver("issuing_authorization.request", authorizationFor(issued, 100, { pending: true }))).body).toEqual({ approved: false });
    });

    it("a refund Stripe reports failed after accepting it: its payment needs an operator, announced", async () => {
      const { account, key, card, issued, pi } = await openCard(1000);
      const auth = authorizationFor(issued, 800, { pending: true });
      await deliver("issuing_authorization.request", auth);
      await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 800), authorization: auth.id });
      await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 0), id: "ipi_refund_fails", type: "refund", amount: 200 });
      const refund = [...fake.refunds.values()].find((r) => r.payment_intent === pi.id)!;
      expect(refund.metadata?.request).toMatch(/^pay_\w+:refund$/);
      expect((await deliver("refund.updated", { ...refund, status: "pending" })).body.outcome).toBe("ignored");
      expect((await deliver("refund.failed", { ...refund, status: "failed", failure_reason: "expired_or_canceled_card" })).body.outcome).toBe("applied");
      const [listed] = (await s.admin("GET", `/payments?status=attention&account_id=${account.id}`)).body.data;
      expect(listed).toMatchObject({ card_id: card.id, kind: "refund", amount_cents: 200, status: "attention" });
      expect(listed.last_error).toMatch(/failed \(expired_or_canceled_card\)/);
      const announced = (await s.request("GET", "/v1/events?type=processor.attention_needed", { key })).body.data;
      expect(announced.map((e: any) => e.data.object.id)).toContain(listed.id);
      // Told again (another event id): nothing more changes.
      expect((await deliver("refund.failed", { ...refund, status: "failed" })).body.outcome).toBe("ignored");
      // A key that is not a refund payment's own (a top-up of a charge below Stripe's minimum) marks nothing.
      const topUp = { ...refund, id: "re_top_up", metadata: { request: `${listed.id}:charge:refund` } };
      expect((await deliver("refund.failed", { ...topUp, status: "failed" })).body.outcome).toBe("ignored");
    });

    it("a capture below Stripe's minimum whose refund of the difference fails later: the capture needs an operator (the customer paid the minimum)", async () => {
      const { account, key, card, issued, pi } = await openCard(30);
      const auth = authorizationFor(issued, 30, { pending: true });
      expect((await deliver("issuing_authorization.request", auth)).body).toEqual({ approved: true });
      await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 30), authorization: auth.id });
      expect(pi).toMatchObject({ amount_received: 50 });
      const topUp = [...fake.refunds.values()].find((r) => r.payment_intent === pi.id)!;
      expect(topUp).toMatchObject({ amount: 20 });
      expect(topUp.metadata?.request).toMatch(/^pay_\w+:hold_capture:refund$/);
      expect((await deliver("refund.failed", { ...topUp, status: "failed", failure_reason: "expired_or_canceled_card" })).body.outcome).toBe("applied");
      const [listed] = (await s.admin("GET", `/payments?status=attention&account_id=${account.id}`)).body.data;
      expect(listed).toMatchObject({ card_id: card.id, kind: "hold_capture", amount_cents: 30, status: "attention" });
      expect(listed.last_error).toMatch(/minimum charge took beyond 30 cents failed/);
      const announced = (await s.request("GET", "/v1/events?type=processor.attention_needed", { key })).body.data;
      expect(announced.map((e: any) => e.data.object.id)).toContain(listed.id);
      // The merchant refunds the purchase: drawn on the capture that needs an operator, the refund
      // is the operator's at once too (not retried until it gives up), and nothing is sent to Stripe.
      await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 0), id: `ipi_refund_${card.id}`, type: "refund", amount: 30 });
      const refunds = await s.query("SELECT status, amount_cents, attempts, last_error FROM payments WHERE card_id = ? AND kind = 'refund'", [card.id]);
      expect(refunds.map((r) => [r.status, Number(r.amount_cents)])).toEqual([["attention", 30]]);
      expect(refunds[0]!.last_error).toMatch(/waiting for the payment it refunds \(pay_\w+\), which needs an operator/);
      expect([...fake.refunds.values()].filter((r) => r.payment_intent === pi.id).map((r) => r.amount)).toEqual([20]);
    });

    it("a capture below Stripe's minimum whose refund of the difference Stripe answers failed at once: the capture needs an operator, and is not asked again", async () => {
      const { account, key, card, issued, pi } = await openCard(30);
      const auth = authorizationFor(issued, 30, { pending: true });
      expect((await deliver("issuing_authorization.request", auth)).body).toEqual({ approved: true });
      fake.failRefunds("expired_or_canceled_card");
      expect((await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 30), authorization: auth.id })).status).toBe(200);
      expect(pi).toMatchObject({ amount_received: 50 });
      expect(fake.refunded(pi.id)).toBe(0);
      const [listed] = (await s.admin("GET", `/payments?status=attention&account_id=${account.id}`)).body.data;
      expect(listed).toMatchObject({ card_id: card.id, kind: "hold_capture", amount_cents: 30, status: "attention" });
      expect(listed.last_error).toMatch(/minimum charge took beyond 30 cents failed: Stripe refund re_\w+ failed \(expired_or_canceled_card\)$/);
      const announced = (await s.request("GET", "/v1/events?type=processor.attention_needed", { key })).body.data;
      expect(announced.map((e: any) => e.data.object.id)).toContain(listed.id);
      // The card's spend stands at what was bought; the queue leaves the payment to the operator.
      expect(await cardOf(key, card.id)).toMatchObject({ spent_cents: 30 });
      const calls = fake.calls("/v1/refunds", "POST").length;
      await s.query("UPDATE payments SET next_attempt_at = 0 WHERE card_id = ?", [card.id]);
      await s.app.services.maintenance.run();
      expect(fake.calls("/v1/refunds", "POST")).toHaveLength(calls);
    });

    it("a refund Stripe answers failed at once: its payment needs an operator at once, announced, not retried", async () => {
      const { account, key, card, issued, pi } = await openCard(1000);
      const auth = authorizationFor(issued, 800, { pending: true });
      await deliver("issuing_authorization.request", auth);
      await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 800), authorization: auth.id });
      fake.failRefunds("lost_or_stolen_card");
      await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 0), id: "ipi_refund_fails_at_once", type: "refund", amount: 200 });
      const [listed] = (await s.admin("GET", `/payments?status=attention&account_id=${account.id}`)).body.data;
      expect(listed).toMatchObject({ card_id: card.id, kind: "refund", amount_cents: 200, status: "attention" });
      expect(listed.last_error).toMatch(/^Stripe refund re_\w+ failed \(lost_or_stolen_card\)$/);
      const announced = (await s.request("GET", "/v1/events?type=processor.attention_needed", { key })).body.data;
      expect(announced.map((e: any) => e.data.object.id)).toContain(listed.id);
      expect(fake.refunded(pi.id)).toBe(0);
      // The queue does not ask again: the same key would answer the same failure.
      const calls = fake.calls("/v1/refunds", "POST").length;
      await s.query("UPDATE payments SET next_attempt_at = 0 WHERE card_id = ?", [card.id]);
      await s.app.services.maintenance.run();
      expect(fake.calls("/v1/refunds", "POST")).toHaveLength(calls);
    });

    it("news of a failed refund while our attempt at it is still out is answered 409 and applied on redelivery", async () => {
      const { account, issued } = await openCard(1000);
      const auth = authorizationFor(issued, 500, { pending: true });
      await deliver("issuing_authorization.request", auth);
      await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 500), authorization: auth.id });
      fake.fail("refunds.create", faults.serverError(), Number.POSITIVE_INFINITY);
      try {
        await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 0), id: "ipi_refund_out", type: "refund", amount: 100 });
      } finally {
        fake.clearFaults();
      }
      const [pending] = await s.query("SELECT id, status FROM payments WHERE account_id = ? AND kind = 'refund'", [account.id]);
      expect(pending.status).toBe("pending");
      const news = { id: "re_out_1", object: "refund", status: "failed", metadata: { request: `${pending.id}:refund` } };
      const first = await deliver("refund.failed", news);
      expectError(first, 409, "event_too_early");
      // Our retry makes the refund; Stripe's redelivery of the same event then applies.
      await s.query("UPDATE payments SET next_attempt_at = 0 WHERE id = ?", [pending.id]);
      await s.app.services.maintenance.run();
      expect((await s.query("SELECT status FROM payments WHERE id = ?", [pending.id]))[0].status).toBe("succeeded");
      expect((await deliver("refund.failed", news, { id: first.event.id })).body.outcome).toBe("applied");
      expect((await s.query("SELECT status FROM payments WHERE id = ?", [pending.id]))[0].status).toBe("attention");
    });

    it("a capture failure at settlement: the transaction stands and the retry queue captures", async () => {
      const { key, card, issued, pi } = await openCard(2000);
      const auth = authorizationFor(issued, 700, { pending: true });
      await deliver("issuing_authorization.request", auth);
      fake.fail("payment_intents.capture", faults.serverError(), 2);
      expect((await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 700), authorization: auth.id })).status).toBe(200);
      fake.clearFaults();
      expect(pi.status).toBe("requires_capture");
      await s.query("UPDATE payments SET next_attempt_at = 0 WHERE card_id = ?", [card.id]);
      await s.app.services.maintenance.run();
      expect(pi).toMatchObject({ status: "succeeded", amount_received: 700 });
      await s.app.services.maintenance.run();
      expect(issued.status).toBe("canceled");
      expect(await cardOf(key, card.id)).toMatchObject({ spent_cents: 700 });
    });

    it("a replayed event id is acknowledged without being applied again", async () => {
      const { issued } = await openCard(2000);
      const auth = authorizationFor(issued, 300);
      expect((await deliver("issuing_authorization.created", auth, { id: "evt_replay_created_1" })).body.outcome).toBe("applied");
      const n = fake.requests.length;
      expect((await deliver("issuing_authorization.created", auth, { id: "evt_replay_created_1" })).body).toEqual({ received: true, duplicate: true });
      expect(fake.requests.length).toBe(n);
    });

    it("payment_intent.canceled (the hold lapsed) closes the card at once", async () => {
      const { key, card, issued, pi } = await openCard(900);
      expect((await deliver("payment_intent.canceled", { ...pi, status: "canceled" })).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "CLOSED" });
      expect(issued.status).toBe("canceled");
      expect((await deliver("issuing_authorization.request", authorizationFor(issued, 100, { pending: true }))).body).toEqual({ approved: false });
    });

    it("other event types are acknowledged and ignored", async () => {
      expect((await deliver("customer.created", { id: "cus_x", object: "customer" })).body).toEqual({ received: true, outcome: "ignored" });
    });
  });

  it("the test helper purchase authorizes and settles: a later authorization event for that card is declined", async () => {
    const { key, card, issued, pi } = await openCard(2000);
    expect((await s.request("POST", `/v1/test_helpers/cards/${card.id}/purchase`, { key, body: { amount_cents: 600 } })).body.approved).toBe(true);
    expect((await deliver("issuing_authorization.request", authorizationFor(issued, 600, { pending: true }))).body).toEqual({ approved: false });
    expect(pi.amount_received).toBe(600);
  });
});

describe(`stripe webhooks without a secret (${dbKind})`, () => {
  it("503 processor_not_configured", async () => {
    const s = await startServer({});
    try {
      const signed = signedEvent("issuing_authorization.created", {}, { secret: SECRET });
      const res = await fetch(`${s.url}/v1/webhooks/stripe`, {
        method: "POST",
        headers: { "content-type": "application/json", "stripe-signature": signed.signature },
        body: signed.payload,
      });
      expect(res.status).toBe(503);
      expect((await res.json()).error.code).toBe("processor_not_configured");
    } finally {
      await s.close();
    }
  });
});

/**
 * Events with a valid signature but malformed fields (found by fuzzing): each is 400 invalid_event
 * with the envelope, before anything uses it (nothing is claimed in stripe_events, no header is
 * made of it), and never a 500 or a logged error.
 */
describe(`stripe webhooks: malformed events (${dbKind})`, () => {
  let fake: FakeStripe;
  let s: TestServer;
  let logs = "";

  beforeAll(async () => {
    fake = await startFakeStripe("sk_test_fake");
    const stream = new PassThrough().on("data", (d) => (logs += d.toString()));
    s = await startServer(
      {
        PROCESSOR: "stripe",
        STRIPE_TEST_SECRET_KEY: "sk_test_fake",
        STRIPE_API_BASE: fake.url,
        STRIPE_WEBHOOK_SECRET: SECRET,
        LOG_LEVEL: "warn",
      },
      { logStream: stream },
    );
  });
  afterAll(async () => {
    await s?.close();
    await fake?.close();
  });

  /** Posts a payload exactly as given, with a valid signature for it. */
  async function post(payload: string) {
    const signature = Stripe.webhooks.generateTestHeaderString({ payload, secret: SECRET });
    const res = await fetch(`${s.url}/v1/webhooks/stripe`, {
      method: "POST",
      headers: { "content-type": "application/json", "stripe-signature": signature },
      body: payload,
    });
    const text = await res.text();
    let body: any = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: keep the text
    }
    return { status: res.status, headers: res.headers, body };
  }
  /** A well-formed event of this type and object, then the overrides (undefined removes a field). */
  function event(type: string, object: unknown, overrides: Record<string, unknown> = {}) {
    const e: Record<string, unknown> = { ...(signedEvent(type, object, { secret: SECRET }).event as unknown as Record<string, unknown>), ...overrides };
    for (const [k, v] of Object.entries(overrides)) if (v === undefined) delete e[k];
    return e;
  }
  const stranger = { id: "ic_not_ours", object: "issuing.card", metadata: {}, livemode: false } as unknown as FakeIssuingCard;
  const auth = (over: Record<string, unknown> = {}) => ({ ...authorizationFor(stranger, 500, { pending: true }), ...over });
  const tx = (over: Record<string, unknown> = {}) => ({ ...captureTransactionFor(stranger, 500), ...over });
  const long = (n: number) => "a".repeat(n);
  const eventCount = async () => Number((await s.query("SELECT COUNT(*) AS n FROM stripe_events"))[0].n);

  const cases: [label: string, payload: string, path: string][] = [
    ["id null", JSON.stringify(event("issuing_authorization.created", auth(), { id: null })), "id"],
    ["id a number", JSON.stringify(event("issuing_authorization.created", auth(), { id: 42 })), "id"],
    ["id 300 characters", JSON.stringify(event("issuing_authorization.created", auth(), { id: `evt_${long(296)}` })), "id"],
    ["id not an event id", JSON.stringify(event("customer.created", { id: "cus_x" }, { id: "ch_123" })), "id"],
    ["id missing", JSON.stringify(event("customer.created", { id: "cus_x" }, { id: undefined })), "id"],
    ["data.object null", JSON.stringify(event("issuing_authorization.request", null)), "data.object"],
    ["data.object null, unhandled type", JSON.stringify(event("customer.created", null)), "data.object"],
    ["data.object an array", JSON.stringify(event("issuing_transaction.created", [])), "data.object"],
    ["data missing", JSON.stringify(event("issuing_transaction.created", tx(), { data: undefined })), "data"],
    ["type 10,000 characters", JSON.stringify(event(long(10_000), { id: "x" })), "type"],
    ["type a number", JSON.stringify(event("customer.created", {}, { type: 7 })), "type"],
    ["type with a newline", JSON.stringify(event("customer.created\nx", {})), "type"],
    ["livemode a string", JSON.stringify(event("issuing_authorization.created", auth(), { livemode: "false" })), "livemode"],
    ["created a string", JSON.stringify(event("customer.created", {}, { created: "now" })), "created"],
    ["created a fraction", JSON.stringify(event("customer.created", {}, { created: 1.5 })), "created"],
    [
      "api_version with a newline (request event: it would be the Stripe-Version header)",
      JSON.stringify(event("issuing_authorization.request", auth(), { api_version: "2024-06-20\r\nX-Injected: 1" })),
      "api_version",
    ],
    ["api_version with a newline (created event)", JSON.stringify(event("issuing_authorization.created", auth(), { api_version: "2024-06-20\n" })), "api_version"],
    ["api_version not a version", JSON.stringify(event("issuing_authorization.request", auth(), { api_version: "latest" })), "api_version"],
    ["api_version 10,000 characters", JSON.stringify(event("issuing_authorization.request", auth(), { api_version: `2024-06-20.${long(10_000)}` })), "api_version"],
    ["api_version a number", JSON.stringify(event("issuing_authorization.request", auth(), { api_version: 20240620 })), "api_version"],
    ["body []", "[]", "(body)"],
    ['body "x"', '"x"', "(body)"],
    ["body {}", "{}", "id"],
    ["body null", "null", "(body)"],
    ["body 42", "42", "(body)"],
    ["body not JSON", "not json {", "(body)"],
    ["request: card missing", JSON.stringify(event("issuing_authorization.request", auth({ card: undefined }))), "data.object.card"],
    ["request: card id 300 characters", JSON.stringify(event("issuing_authorization.request", auth({ card: `ic_${long(297)}` }))), "data.object.card"],
    ["request: card a number", JSON.stringify(event("issuing_authorization.request", auth({ card: 42 }))), "data.object.card"],
    ["request: card object without id", JSON.stringify(event("issuing_authorization.request", auth({ card: { object: "issuing.card", metadata: {} } }))), "data.object.card"],
    [
      "request: card metadata card_id 10,000 characters",
      JSON.stringify(event("issuing_authorization.request", auth({ card: { ...stranger, metadata: { card_id: long(10_000) } } }))),
      "data.object.card.metadata.card_id",
    ],
    [
      "request: card metadata a number value",
      JSON.stringify(event("issuing_authorization.request", auth({ card: { ...stranger, metadata: { card_id: 1 } } }))),
      "data.object.card",
    ],
    ["request: amount a string", JSON.stringify(event("issuing_authorization.request", auth({ amount: "100" }))), "data.object.amount"],
    ["request: amount a fraction", JSON.stringify(event("issuing_authorization.request", auth({ amount: 1.5 }))), "data.object.amount"],
    ["request: amount negative", JSON.stringify(event("issuing_authorization.request", auth({ amount: -5 }))), "data.object.amount"],
    [
      "request: pending_request.amount null",
      JSON.stringify(event("issuing_authorization.request", auth({ pending_request: { amount: null, currency: "usd" } }))),
      "data.object.pending_request.amount",
    ],
    ["request: pending_request a string", JSON.stringify(event("issuing_authorization.request", auth({ pending_request: "x" }))), "data.object.pending_request"],
    ["request: object id 300 characters", JSON.stringify(event("issuing_authorization.request", auth({ id: `iauth_${long(294)}` }))), "data.object.id"],
    ["created: approved a string", JSON.stringify(event("issuing_authorization.created", auth({ approved: "yes" }))), "data.object.approved"],
    ["created: approved missing", JSON.stringify(event("issuing_authorization.created", auth({ approved: undefined }))), "data.object.approved"],
    ["transaction: type 10,000 characters", JSON.stringify(event("issuing_transaction.created", tx({ type: long(10_000) }))), "data.object.type"],
    ["transaction: type null", JSON.stringify(event("issuing_transaction.created", tx({ type: null }))), "data.object.type"],
    ["transaction: amount beyond a safe integer", JSON.stringify(event("issuing_transaction.created", tx({ amount: 1e300 }))), "data.object.amount"],
    ["transaction: card null", JSON.stringify(event("issuing_transaction.created", tx({ card: null }))), "data.object.card"],
  ];

  it.each(cases)("%s: 400 invalid_event with the envelope and its issues", async (_label, payload, path) => {
    const before = await eventCount();
    const res = await post(payload);
    const err = expectError(res, 400, "invalid_event");
    expect(res.headers.get("request-id")).toMatch(/^req_/);
    expect(res.headers.get("stripe-version")).toBeNull();
    expect(err.message).toMatch(/^Invalid Stripe event: /);
    const issues = err.details?.issues as { path: string; message: string }[];
    expect(Array.isArray(issues) && issues.length > 0, JSON.stringify(err)).toBe(true);
    for (const i of issues) {
      expect(Object.keys(i).sort()).toEqual(["message", "path"]);
      expect(typeof i.path).toBe("string");
      expect(typeof i.message).toBe("string");
    }
    expect(issues.map((i) => i.path), JSON.stringify(issues)).toContain(path);
    expect(err.message).toContain(`${path}: `);
    // Nothing is claimed: the event log never saw it.
    expect(await eventCount()).toBe(before);
  });

  it("issue paths and the message stay bounded whatever the input's keys", async () => {
    const res = await post(
      JSON.stringify(event("issuing_authorization.request", auth({ card: { ...stranger, metadata: Object.fromEntries([1, 2, 3].map((n) => [`${n}${long(10_000)}`, "v"])) } }))),
    );
    const err = expectError(res, 400, "invalid_event");
    expect(err.message.length).toBeLessThan(1000);
    for (const i of err.details.issues) expect(i.path.length).toBeLessThan(200);
  });

  it("a malformed event does not use up its id: the well-formed delivery of it is handled", async () => {
    const id = "evt_malformed_then_valid_1";
    expectError(await post(JSON.stringify(event("issuing_authorization.created", auth({ amount: "x" }), { id }))), 400, "invalid_event");
    const ok = await post(JSON.stringify(event("issuing_authorization.created", auth({ approved: true, amount: 500 }), { id })));
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ received: true, outcome: "ignored" });
  });

  it("a valid event's API version is echoed in Stripe-Version; none falls back to the SDK's", async () => {
    for (const version of ["2024-06-20", "2025-09-30.clover", Stripe.API_VERSION]) {
      const res = await post(JSON.stringify(event("issuing_authorization.request", auth(), { api_version: version })));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ approved: false });
      expect(res.headers.get("stripe-version")).toBe(version);
    }
    const none = await post(JSON.stringify(event("issuing_authorization.request", auth(), { api_version: null })));
    expect(none.status).toBe(200);
    expect(none.headers.get("stripe-version")).toBe(Stripe.API_VERSION);
  });

  it("fields Stripe adds pass through; an unhandled type needs only a valid envelope", async () => {
    const extra = await post(
      JSON.stringify(
        event("issuing_authorization.request", auth({ merchant_data: { name: "Shop", category: "x" }, card: { ...stranger, brand_new_field: [1] } }), {
          context: "acct_x",
          new_top_level: { a: 1 },
        }),
      ),
    );
    expect(extra.status).toBe(200);
    expect(extra.body).toEqual({ approved: false });
    const unhandled = await post(JSON.stringify(event("customer.created", { id: null, amount: "anything", card: 42 })));
    expect(unhandled.status).toBe(200);
    expect(unhandled.body).toEqual({ received: true, outcome: "ignored" });
  });

  it("none of it was logged as an error", async () => {
    await new Promise((r) => setTimeout(r, 50));
    const lines = logs
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { level: number; msg?: string });
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
    expect(logs).not.toContain("ERR_INVALID_CHAR");
    expect(lines.some((l) => l.msg === "stripe webhook event invalid")).toBe(true);
  });
});

describe(`stripe webhooks: a hold canceled while its card is being made (${dbKind})`, () => {
  let fake: FakeStripe;
  let s: TestServer;
  let onHold: ((cardId: string) => Promise<void>) | undefined;

  beforeAll(async () => {
    fake = await startFakeStripe("sk_test_fake");
    s = await startServer(
      { PROCESSOR: "stripe", STRIPE_TEST_SECRET_KEY: "sk_test_fake", STRIPE_API_BASE: fake.url, STRIPE_TEST_WEBHOOK_SECRET: SECRET },
      { afterHold: async (cardId) => onHold?.(cardId) },
    );
  });
  afterAll(async () => {
    await s?.close();
    await fake?.close();
  });

  const deliver = async (type: string, object: unknown) => {
    const signed = signedEvent(type, object, { secret: SECRET });
    const res = await fetch(`${s.url}/v1/webhooks/stripe`, { method: "POST", headers: { "content-type": "application/json", "stripe-signature": signed.signature }, body: signed.payload });
    return { status: res.status, body: await res.json() };
  };

  it("is answered 409 event_too_early (Stripe redelivers it), and its redelivery closes the card once it is made", async () => {
    const key = await (await s.newAccount()).key();
    let canceled: unknown;
    onHold = async (cardId) => {
      const pi = [...fake.paymentIntents.values()].find((p) => p.metadata?.card_id === cardId)!;
      canceled = { ...pi, status: "canceled" };
      const early = await deliver("payment_intent.canceled", canceled);
      expect(early.status).toBe(409);
      expect(early.body.error.code).toBe("event_too_early");
    };
    const created = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 800 } });
    onHold = undefined;
    expect(created.status).toBe(201);
    expect(canceled).toBeDefined();
    const again = await deliver("payment_intent.canceled", canceled);
    expect(again).toMatchObject({ status: 200, body: { outcome: "applied" } });
    expect((await s.request("GET", `/v1/cards/${created.body.id}`, { key })).body.status).toBe("CLOSED");
  });
});
