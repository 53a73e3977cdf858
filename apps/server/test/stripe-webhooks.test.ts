import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authorizationFor, captureTransactionFor, signedEvent, startFakeStripe, type FakeIssuingCard, type FakeStripe } from "./fake-stripe.js";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";

const SECRET = "whsec_test_0123456789";

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
      STRIPE_WEBHOOK_SECRET: SECRET,
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
  /** Settlement after a synchronous answer runs just after it. */
  async function eventually(check: () => boolean | Promise<boolean>, ms = 3000) {
    const until = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > until) throw new Error("condition not met in time");
      await new Promise((r) => setTimeout(r, 25));
    }
  }

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
    it("approves the first purchase within the limit, answering {approved} with Stripe-Version; the hold is captured and the card canceled", async () => {
      const { key, card, issued, pi } = await openCard(2000);
      const res = await deliver("issuing_authorization.request", authorizationFor(issued, 1500, { pending: true }));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ approved: true });
      expect(res.headers.get("stripe-version")).toBe(Stripe.API_VERSION);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED" });
      await eventually(() => pi.status === "succeeded" && issued.status === "canceled");
      expect(pi.amount_received).toBe(1500);
      const capture = fake.calls(`/v1/payment_intents/${pi.id}/capture`)[0]!;
      expect(capture.params).toEqual({ amount_to_capture: "1500" });
      expect(capture.idempotencyKey).toBe(`${card.id}:capture`);
      expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 0, open_cards: 0 });
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

    it("a live-mode event never touches a test-mode card", async () => {
      const { key, card, issued } = await openCard(1000);
      const res = await deliver("issuing_authorization.request", authorizationFor(issued, 100, { pending: true }), { livemode: true });
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

    it("a replayed request event gets the same decision again, and nothing is applied twice", async () => {
      const { issued, pi } = await openCard(1000);
      const auth = authorizationFor(issued, 400, { pending: true });
      const first = await deliver("issuing_authorization.request", auth, { id: "evt_replay_request_1" });
      expect(first.body).toEqual({ approved: true });
      const again = await deliver("issuing_authorization.request", auth, { id: "evt_replay_request_1" });
      expect(again.body).toEqual({ approved: true });
      await eventually(() => pi.status === "succeeded");
      expect(fake.calls(`/v1/payment_intents/${pi.id}/capture`).filter((c) => !c.replayed)).toHaveLength(1);
    });

    it("answers well within Stripe's 2 s deadline even when Stripe is slow to capture", async () => {
      const { issued, pi } = await openCard(1000);
      fake.fail("payment_intents.capture", { kind: "hang" });
      const started = Date.now();
      const res = await deliver("issuing_authorization.request", authorizationFor(issued, 200, { pending: true }));
      expect(res.body).toEqual({ approved: true });
      expect(Date.now() - started).toBeLessThan(1000);
      // The capture timed out; the recovery pass captures it.
      await new Promise((r) => setTimeout(r, 1700));
      await s.app.services.maintenance.run();
      expect(pi.status).toBe("succeeded");
      expect(issued.status).toBe("canceled");
      fake.clearFaults();
    });
  });

  describe("purchase events (no request webhook, or out of order)", () => {
    it("issuing_authorization.created (approved) makes the card USED, captures the amount and cancels the card", async () => {
      const { key, card, issued, pi } = await openCard(2000);
      const res = await deliver("issuing_authorization.created", authorizationFor(issued, 1200));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ received: true, outcome: "applied" });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED" });
      expect(pi).toMatchObject({ status: "succeeded", amount_received: 1200 });
      expect(issued.status).toBe("canceled");
    });

    it("a declined authorization changes nothing", async () => {
      const { key, card, issued } = await openCard(2000);
      expect((await deliver("issuing_authorization.created", authorizationFor(issued, 500, { approved: false }))).body).toEqual({
        received: true,
        outcome: "ignored",
      });
      expect((await cardOf(key, card.id)).status).toBe("OPEN");
    });

    it("issuing_transaction.created (capture, negative amount) alone makes the card USED", async () => {
      const { key, card, issued, pi } = await openCard(2000);
      expect((await deliver("issuing_transaction.created", captureTransactionFor(issued, 800))).body.outcome).toBe("applied");
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED" });
      expect(pi).toMatchObject({ status: "succeeded", amount_received: 800 });
    });

    it("out of order: the transaction before the authorization events; each later event is a no-op", async () => {
      const { key, card, issued, pi } = await openCard(2000);
      const auth = authorizationFor(issued, 900);
      expect((await deliver("issuing_transaction.created", { ...captureTransactionFor(issued, 900), authorization: auth.id })).body.outcome).toBe("applied");
      expect((await deliver("issuing_authorization.created", auth)).body.outcome).toBe("ignored");
      expect((await deliver("issuing_authorization.request", { ...auth, amount: 0, pending_request: { amount: 900, currency: "usd" } })).body).toEqual({
        approved: false,
      });
      expect(await cardOf(key, card.id)).toMatchObject({ status: "USED" });
      expect(pi.amount_received).toBe(900);
      expect(fake.calls(`/v1/payment_intents/${pi.id}/capture`).filter((c) => !c.replayed)).toHaveLength(1);
    });

    it("a replayed event id is acknowledged without being applied again", async () => {
      const { issued, pi } = await openCard(2000);
      const auth = authorizationFor(issued, 300);
      expect((await deliver("issuing_authorization.created", auth, { id: "evt_replay_created_1" })).body.outcome).toBe("applied");
      const n = fake.requests.length;
      expect((await deliver("issuing_authorization.created", auth, { id: "evt_replay_created_1" })).body).toEqual({ received: true, duplicate: true });
      expect(fake.requests.length).toBe(n);
      expect(pi.amount_received).toBe(300);
    });

    it("a capture failure on a created event: the purchase stands (USED), and the recovery pass captures", async () => {
      const { key, card, issued, pi } = await openCard(2000);
      fake.fail("payment_intents.capture", { kind: "error", status: 500, error: { type: "api_error", message: "boom" } });
      expect((await deliver("issuing_authorization.created", authorizationFor(issued, 700))).status).toBe(200);
      expect((await cardOf(key, card.id)).status).toBe("USED");
      expect(pi.status).toBe("requires_capture");
      await s.app.services.maintenance.run();
      expect(pi).toMatchObject({ status: "succeeded", amount_received: 700 });
      expect(issued.status).toBe("canceled");
    });

    it("other event types are acknowledged and ignored", async () => {
      expect((await deliver("customer.created", { id: "cus_x", object: "customer" })).body).toEqual({ received: true, outcome: "ignored" });
    });
  });

  it("the test helper purchase goes through the same path: a later authorization event for that card is a no-op", async () => {
    const { key, card, issued, pi } = await openCard(2000);
    expect((await s.request("POST", `/v1/test_helpers/cards/${card.id}/purchase`, { key, body: { amount_cents: 600 } })).body.approved).toBe(true);
    expect((await deliver("issuing_authorization.created", authorizationFor(issued, 600))).body.outcome).toBe("ignored");
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
