import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { faults, startFakeStripe, type FakeStripe } from "./fake-stripe.js";
import { dbKind, expectError, startServer, TEST_CARDHOLDER, type TestServer } from "./harness.js";

/**
 * PROCESSOR=stripe against a local fake of the Stripe API: the real stripe SDK, the exact requests
 * the adapter makes (method, path, form parameters, Idempotency-Key), and Stripe failures injected
 * at every step: never an orphan hold (every PaymentIntent of a failed card ends canceled) and never
 * a card without a hold (every Issuing card of a failed request ends canceled).
 */
describe(`stripe processor (${dbKind})`, () => {
  let fake: FakeStripe;
  let s: TestServer;
  const TIMEOUT_MS = 1000;

  beforeAll(async () => {
    fake = await startFakeStripe("sk_test_fake");
    s = await startServer({
      PROCESSOR: "stripe",
      STRIPE_TEST_SECRET_KEY: "sk_test_fake",
      STRIPE_API_BASE: fake.url,
      STRIPE_WEBHOOK_SECRET: "whsec_test",
      PROCESSOR_TIMEOUT_MS: String(TIMEOUT_MS),
    });
  });
  afterAll(async () => {
    await s?.close();
    await fake?.close();
  });
  afterEach(() => fake.clearFaults());

  const since = (n: number) => fake.requests.slice(n);
  async function stripeIds(accountId: string) {
    const [row] = await s.query("SELECT customer_id, payment_method_id, cardholder_id FROM stripe_accounts WHERE account_id = ? AND mode = 'test'", [accountId]);
    return row as { customer_id: string; payment_method_id: string; cardholder_id: string | null };
  }
  /** The fake's PaymentIntents and Issuing cards that belong to an account. */
  async function atStripe(accountId: string) {
    const { customer_id, cardholder_id } = await stripeIds(accountId);
    return {
      intents: [...fake.paymentIntents.values()].filter((pi) => pi.customer === customer_id),
      cards: [...fake.cards.values()].filter((c) => c.cardholder.id === cardholder_id),
    };
  }
  /** Nothing held, nothing spendable: what every failed request must leave behind. */
  async function expectNothingLeft(accountId: string) {
    const { intents, cards } = await atStripe(accountId);
    for (const pi of intents) expect(pi.status, `PaymentIntent ${pi.id}`).toBe("canceled");
    for (const c of cards) expect(c.status, `Issuing card ${c.id}`).toBe("canceled");
  }
  const setup = async (paymentMethod = "pm_card_visa") => {
    const account = await s.newAccount({ paymentMethod });
    return { account, key: await account.key() };
  };

  it("saving the payment method makes the account's Customer once and attaches the method to it", async () => {
    const n = fake.requests.length;
    const account = await s.newAccount({ paymentMethod: "pm_card_visa" });
    const calls = since(n);
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual(["POST /v1/customers", "POST /v1/payment_methods/pm_card_visa/attach"]);
    expect(calls[0]!.idempotencyKey).toBe(`${account.id}:test:customer`);
    expect(calls[0]!.params).toMatchObject({ "metadata[account_id]": account.id, "metadata[mode]": "test" });
    const ids = await stripeIds(account.id);
    expect(calls[1]!.params).toEqual({ customer: ids.customer_id });
    expect(calls[1]!.idempotencyKey).toBe(`${account.id}:test:attach:pm_card_visa`);
    expect(fake.paymentMethods.get(ids.payment_method_id)?.customer).toBe(ids.customer_id);

    // The same method again: nothing to do. Another method: attached to the same Customer.
    const m = fake.requests.length;
    await s.admin("POST", `/accounts/${account.id}/payment_method`, { payment_method: "pm_card_visa" });
    expect(since(m)).toEqual([]);
    await s.admin("POST", `/accounts/${account.id}/payment_method`, { payment_method: "pm_card_mastercard" });
    expect(since(m).map((c) => `${c.method} ${c.path} ${c.params.customer}`)).toEqual([
      `POST /v1/payment_methods/pm_card_mastercard/attach ${ids.customer_id}`,
    ]);
  });

  it("a payment method Stripe refuses is not saved", async () => {
    const account = await s.newAccount({ paymentMethod: null });
    const err = expectError(
      await s.admin("POST", `/accounts/${account.id}/payment_method`, { payment_method: "pm_card_chargeCustomerFail" }),
      402,
      "payment_method_declined",
    );
    expect(err.details).toEqual({ decline_code: "generic_decline" });
    expect((await s.admin("GET", `/accounts/${account.id}`)).body.payment_method).toBeNull();
  });

  it("create: a manual-capture PaymentIntent confirmed off-session, then an active virtual card with an all-time limit", async () => {
    const { account, key } = await setup();
    const ids = await stripeIds(account.id);
    const n = fake.requests.length;
    const res = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 1500, agent_id: "agent-7", purpose: "books" } });
    expect(res.status).toBe(201);
    const card = res.body;
    const calls = since(n);
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual([
      "POST /v1/payment_intents",
      "POST /v1/issuing/cardholders",
      "POST /v1/issuing/cards",
    ]);
    const [hold, cardholder, mint] = calls;
    expect(hold!.params).toEqual({
      amount: "1500",
      currency: "usd",
      customer: ids.customer_id,
      payment_method: ids.payment_method_id,
      capture_method: "manual",
      confirm: "true",
      off_session: "true",
      // Cards only (no return_url needed), and our ids on the hold.
      "allowed_payment_method_types[0]": "card",
      "metadata[card_id]": card.id,
      "metadata[account_id]": account.id,
      "metadata[purpose]": "hold",
    });
    expect(hold!.idempotencyKey).toBe(`${card.id}:hold`);
    // The cardholder is the account's own (cardholders.test.ts covers it in full), keyed by its details' version.
    expect(cardholder!.idempotencyKey).toMatch(new RegExp(`^${account.id}:test:cardholder:[0-9a-f]{32}$`));
    expect(cardholder!.params).toMatchObject({ type: "company", name: TEST_CARDHOLDER.name, status: "active", "billing[address][country]": "US" });
    const cardholderId = (await stripeIds(account.id)).cardholder_id;
    expect(mint!.params).toEqual({
      cardholder: cardholderId,
      currency: "usd",
      type: "virtual",
      status: "active",
      "spending_controls[spending_limits][0][amount]": "1500",
      "spending_controls[spending_limits][0][interval]": "all_time",
      "metadata[card_id]": card.id,
      "metadata[agent_id]": "agent-7",
    });
    expect(mint!.idempotencyKey).toBe(`${card.id}:mint`);

    const issued = [...fake.cards.values()].find((c) => c.metadata.card_id === card.id)!;
    expect(card).toMatchObject({
      status: "OPEN",
      last_four: issued.last4,
      expiration: `07/${String(issued.exp_year % 100).padStart(2, "0")}`,
      spending_limit_cents: 1500,
      remaining_cents: 1500,
    });
    const pi = fake.paymentIntents.get(calls.length ? [...fake.paymentIntents.values()].find((p) => p.customer === ids.customer_id)!.id : "")!;
    expect(pi).toMatchObject({ status: "requires_capture", amount: 1500, amount_capturable: 1500 });
    expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 1500, open_cards: 1 });

    // The cardholder is made once per account and mode, then only read (is Stripe still issuing to
    // it?); without agent_id there is no such metadata.
    const m = fake.requests.length;
    const second = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 700 } })).body;
    expect(since(m).map((c) => `${c.method} ${c.path}`)).toEqual(["POST /v1/payment_intents", `GET /v1/issuing/cardholders/${cardholderId}`, "POST /v1/issuing/cards"]);
    expect(since(m)[2]!.params).toMatchObject({ cardholder: cardholderId, "metadata[card_id]": second.id });
    expect(since(m)[2]!.params).not.toHaveProperty("metadata[agent_id]");
  });

  it("get: an ephemeral key for the Issuing card under the version Issuing Elements needs, nonce passed through; no PAN fetched", async () => {
    const { key } = await setup();
    const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
    const n = fake.requests.length;
    const got = await s.request("GET", `/v1/cards/${card.id}?nonce=ephkeynonce_abc`, { key });
    expect(got.status).toBe(200);
    const calls = since(n);
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual(["POST /v1/ephemeral_keys"]);
    expect(calls[0]!.params).toEqual({ issuing_card: got.body.processor_card_id, nonce: "ephkeynonce_abc" });
    expect(calls[0]!.stripeVersion).toBe("2020-03-02");
    expect(calls[0]!.idempotencyKey).toMatch(new RegExp(`^${got.body.processor_card_id}:ephemeral_key:`));
    expect(got.body.ephemeral_key_secret).toBe(fake.ephemeralKeys.at(-1)!.secret);
    expect(fake.cards.has(got.body.processor_card_id)).toBe(true);
    // Without a nonce: a fresh key each time.
    const again = await s.request("GET", `/v1/cards/${card.id}`, { key });
    expect(since(n)[1]!.params).toEqual({ issuing_card: got.body.processor_card_id });
    expect(again.body.ephemeral_key_secret).not.toBe(got.body.ephemeral_key_secret);
  });

  it("close: the card is canceled at Stripe and the PaymentIntent canceled; closing again calls Stripe no more", async () => {
    const { account, key } = await setup();
    const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
    const n = fake.requests.length;
    expect((await s.request("POST", `/v1/cards/${card.id}/close`, { key })).body).toEqual({ ok: true, status: "CLOSED" });
    const calls = since(n);
    const { intents, cards } = await atStripe(account.id);
    expect(calls.map((c) => `${c.method} ${c.path} ${c.idempotencyKey}`)).toEqual([
      `POST /v1/issuing/cards/${cards[0]!.id} ${card.id}:revoke`,
      `POST /v1/payment_intents/${intents[0]!.id}/cancel ${card.id}:cancel`,
    ]);
    expect(calls[0]!.params).toEqual({ status: "canceled" });
    await expectNothingLeft(account.id);
    const m = fake.requests.length;
    expect((await s.request("POST", `/v1/cards/${card.id}/close`, { key })).status).toBe(200);
    expect(since(m)).toEqual([]);
    expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(0);
  });

  it("close is idempotent against Stripe: a card and PaymentIntent already canceled there count as done", async () => {
    const { account, key } = await setup();
    const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
    const { intents, cards } = await atStripe(account.id);
    cards[0]!.status = "canceled";
    intents[0]!.status = "canceled";
    expect((await s.request("POST", `/v1/cards/${card.id}/close`, { key })).body).toEqual({ ok: true, status: "CLOSED" });
    expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(0);
  });

  it("a declined hold: 402 payment_method_declined with the decline code, and no card minted", async () => {
    const { account, key } = await setup("pm_card_chargeDeclinedInsufficientFunds");
    const n = fake.requests.length;
    const err = expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 402, "payment_method_declined");
    expect(err.details).toEqual({ decline_code: "insufficient_funds" });
    expect(since(n).map((c) => c.path)).toEqual(["/v1/payment_intents"]);
    expect((await atStripe(account.id)).cards).toEqual([]);
    expect((await s.request("GET", "/v1/cards", { key })).body.data).toEqual([]);

    const other = await setup();
    fake.fail("payment_intents.create", faults.decline("do_not_honor"));
    const e2 = expectError(await s.request("POST", "/v1/cards", { key: other.key, body: { amount_cents: 900 } }), 402, "payment_method_declined");
    expect(e2.details).toEqual({ decline_code: "do_not_honor" });
    expect((await atStripe(other.account.id)).cards).toEqual([]);
  });

  describe("failures at each step leave no orphan hold and no card without a hold", () => {
    // A 5xx is answered by reading and one more try under a new key: two in a row fail the call.
    it("hold 500 twice: 502 with Stripe's request id; after recovery nothing is held", async () => {
      const { account, key } = await setup();
      fake.fail("payment_intents.create", faults.serverError(), 2);
      const err = expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
      expect(err.details).toMatchObject({ step: "hold", stripe_error_type: "api_error", stripe_status: 500 });
      expect(err.details.stripe_request_id).toMatch(/^req_/);
      await s.app.services.maintenance.run();
      await expectNothingLeft(account.id);
      expect((await atStripe(account.id)).cards).toEqual([]);
      expect((await s.request("GET", "/v1/cards", { key })).body.data).toEqual([]);
    });

    it("hold timeout after Stripe placed it: the PaymentIntent is found by reading (its metadata), never created again, and canceled", async () => {
      const { account, key } = await setup();
      fake.fail("payment_intents.create", faults.hangAfter());
      const err = expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
      expect(err.details).toMatchObject({ step: "hold" });
      const { intents } = await atStripe(account.id);
      expect(intents).toHaveLength(1);
      expect(intents[0]!.status).toBe("canceled");
      const holdCalls = fake.calls("/v1/payment_intents", "POST").filter((c) => c.params.customer === (intents[0]!.customer as string));
      expect(holdCalls).toHaveLength(1);
      expect(fake.calls("/v1/payment_intents", "GET").filter((c) => c.params.customer === (intents[0]!.customer as string)).length).toBeGreaterThan(0);
      expect((await atStripe(account.id)).cards).toEqual([]);
    });

    it("a hold whose outcome is unknown is released after the payment method changed: no create is re-sent under the old key", async () => {
      const { account, key } = await setup();
      fake.fail("payment_intents.create", faults.hangAfter());
      fake.fail("payment_intents.list", faults.serverError()); // the compensation cannot read either
      expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
      fake.clearFaults();
      const [row] = await s.query("SELECT status, hold_status FROM cards WHERE account_id = ?", [account.id]);
      expect(row).toEqual({ status: "FAILED", hold_status: "PENDING" });
      // Re-sending the create under its key with another payment method is Stripe's 400 idempotency_error, forever.
      await s.admin("POST", `/accounts/${account.id}/payment_method`, { payment_method: "pm_card_mastercard" });
      // The recovery pass a creation lease later (its due time moved to now).
      await s.query("UPDATE cards SET recovery_next_at = ? WHERE account_id = ?", [Date.now() - 1, account.id]);
      await s.app.services.maintenance.run();
      await expectNothingLeft(account.id);
      expect((await atStripe(account.id)).intents.map((pi) => pi.status)).toEqual(["canceled"]);
    });

    const inUse = "There is currently another in-progress request using this idempotent key. Please try again later.";
    // Stripe's "try again shortly", none of them stored under the key: a 429 (rate_limit,
    // lock_timeout), and a 409 idempotency_key_in_use (a request under the same key still running).
    const busy = [
      { name: "a 429 rate_limit", status: 429, error: { type: "invalid_request_error" as const, code: "rate_limit", message: "Too many requests." } },
      { name: "a 429 lock_timeout", status: 429, error: { type: "invalid_request_error" as const, code: "lock_timeout", message: "Too many requests." } },
      { name: "a 409 idempotency_key_in_use", status: 409, error: { type: "invalid_request_error" as const, code: "idempotency_key_in_use", message: inUse } },
      { name: "a 409 idempotency_key_in_use typed idempotency_error", status: 409, error: { type: "idempotency_error" as const, code: "idempotency_key_in_use", message: inUse } },
    ];
    for (const { name, status, error } of busy)
      it(`${name} is retried with backoff under the same key, within the call (never under a new key)`, async () => {
        const { account, key } = await setup();
        const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
        fake.fail("payment_intents.capture", { kind: "error", status, error }, 2);
        const bought = await s.request("POST", `/v1/test_helpers/cards/${card.id}/purchase`, { key, body: { amount_cents: 400 } });
        expect(bought.body).toMatchObject({ approved: true });
        const pi = (await atStripe(account.id)).intents[0]!;
        expect(pi).toMatchObject({ status: "succeeded", amount_received: 400 });
        const captures = fake.calls(`/v1/payment_intents/${pi.id}/capture`);
        expect(captures).toHaveLength(3);
        expect(new Set(captures.map((c) => c.idempotencyKey)).size).toBe(1);
      });

    it("an off-session charge whose answer was lost is found by reading after the payment method changed, not refused as a reused key", async () => {
      const { account, key } = await setup();
      const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
      const auth = (await s.request("POST", `/v1/test_helpers/cards/${card.id}/authorizations`, { key, body: { amount_cents: 900 } })).body;
      // The charge beyond the hold is made at Stripe, but its answer never comes back.
      fake.fail("payment_intents.create", faults.hangAfter());
      expect((await s.request("POST", `/v1/test_helpers/authorizations/${auth.id}/capture`, { key, body: { amount_cents: 1000 } })).status).toBe(201);
      fake.clearFaults();
      const [pending] = await s.query("SELECT id, status FROM payments WHERE card_id = ? AND kind = 'charge'", [card.id]);
      expect(pending!.status).toBe("pending");
      // Sending the create again under its key with another payment method is Stripe's idempotency_error.
      await s.admin("POST", `/accounts/${account.id}/payment_method`, { payment_method: "pm_card_mastercard" });
      await s.query("UPDATE payments SET next_attempt_at = ?, lease_until = NULL WHERE id = ?", [Date.now() - 1, pending!.id]);
      await s.app.services.maintenance.run();
      expect(await s.query("SELECT status FROM payments WHERE id = ?", [pending!.id])).toEqual([{ status: "succeeded" }]);
      const charges = (await atStripe(account.id)).intents.filter((pi) => pi.metadata?.purpose === "charge");
      expect(charges.map((pi) => [pi.status, pi.amount_received])).toEqual([["succeeded", 100]]);
    });

    it("the fake refuses a key reused with other parameters, as Stripe does", async () => {
      const { account } = await setup();
      const { customer_id, payment_method_id } = await stripeIds(account.id);
      const post = (amount: string) =>
        fetch(fake.url + "/v1/payment_intents", {
          method: "POST",
          headers: { authorization: "Bearer sk_test_fake", "content-type": "application/x-www-form-urlencoded", "idempotency-key": `reuse-${account.id}` },
          body: new URLSearchParams({ amount, currency: "usd", customer: customer_id, payment_method: payment_method_id, capture_method: "manual", confirm: "true" }),
        });
      expect((await post("100")).status).toBe(200);
      expect((await post("100")).status).toBe(200);
      const other = await post("200");
      expect(other.status).toBe(400);
      expect((await other.json()).error.type).toBe("idempotency_error");
    });

    it("hold hangs and Stripe places it after the request gave up and looked: the recovery pass looks again a lease later and cancels it", async () => {
      const { account, key } = await setup();
      fake.fail("payment_intents.create", faults.hang());
      expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
      fake.clearFaults();
      const [card] = await s.query("SELECT id, status, hold_status, recovery_next_at FROM cards WHERE account_id = ?", [account.id]);
      // Nothing found yet: not taken as final while the hung call may still be running at Stripe.
      expect(card).toMatchObject({ status: "FAILED", hold_status: "PENDING" });
      expect(Number(card!.recovery_next_at)).toBeGreaterThan(Date.now());
      await s.app.services.maintenance.run();
      // The hung call ends at Stripe now: a hold made for our card.
      const { customer_id, payment_method_id } = await stripeIds(account.id);
      const made = await fetch(`${fake.url}/v1/payment_intents`, {
        method: "POST",
        headers: { authorization: "Bearer sk_test_fake", "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          amount: "900",
          currency: "usd",
          customer: customer_id,
          payment_method: payment_method_id,
          capture_method: "manual",
          confirm: "true",
          "metadata[card_id]": card!.id,
          "metadata[purpose]": "hold",
        }),
      });
      const pi = (await made.json()) as { id: string; status: string };
      expect(pi.status).toBe("requires_capture");
      await s.query("UPDATE cards SET recovery_next_at = ? WHERE id = ?", [Date.now() - 1, card!.id]);
      await s.app.services.maintenance.run();
      expect((await atStripe(account.id)).intents.map((i) => [i.id, i.status])).toEqual([[pi.id, "canceled"]]);
      expect(await s.query("SELECT hold_id, hold_status FROM cards WHERE id = ?", [card!.id])).toEqual([{ hold_id: pi.id, hold_status: "RELEASED" }]);
    });

    it("hold hangs (nothing done): 502 in time; recovery leaves nothing held", async () => {
      const { account, key } = await setup();
      fake.fail("payment_intents.create", faults.hang());
      const started = Date.now();
      expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS * 4 + 2000);
      await s.app.services.maintenance.run();
      await expectNothingLeft(account.id);
    });

    it("cardholder creation 500 twice: 502 at mint and the hold is canceled", async () => {
      const { account, key } = await setup();
      fake.fail("issuing.cardholders.create", faults.serverError(), 2);
      const err = expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
      expect(err.details).toMatchObject({ step: "mint" });
      await expectNothingLeft(account.id);
      expect((await atStripe(account.id)).intents.map((pi) => pi.status)).toEqual(["canceled"]);
    });

    it("mint 500 twice: 502 and the hold is canceled", async () => {
      const { account, key } = await setup();
      fake.fail("issuing.cards.create", faults.serverError(), 2);
      const err = expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
      expect(err.details).toMatchObject({ step: "mint" });
      expect(err.details.stripe_request_id).toMatch(/^req_/);
      await expectNothingLeft(account.id);
      expect((await atStripe(account.id)).intents.map((pi) => pi.status)).toEqual(["canceled"]);
      expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 0, open_cards: 0 });
    });

    it("mint timeout after Stripe made the card: the card is found by its key and canceled, the hold canceled", async () => {
      const { account, key } = await setup();
      fake.fail("issuing.cards.create", faults.hangAfter());
      expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
      const { intents, cards } = await atStripe(account.id);
      expect(cards).toHaveLength(1);
      expect(intents).toHaveLength(1);
      await expectNothingLeft(account.id);
    });

    it("a hold declined: the failed card is final at once, and the recovery pass never looks for an Issuing card of it", async () => {
      const { account, key } = await setup("pm_card_chargeDeclined");
      expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 402, "payment_method_declined");
      const [card] = await s.query("SELECT status, revoked_at FROM cards WHERE account_id = ?", [account.id]);
      expect(card!.status).toBe("FAILED");
      expect(card!.revoked_at).not.toBeNull();
      const n = fake.requests.length;
      await s.app.services.maintenance.run();
      expect(since(n).filter((c) => c.route === "issuing.cards.list")).toEqual([]);
    });

    describe("a mint that hangs may make its card after the request gave up and looked", () => {
      /** A request whose mint hangs: 502, the hold released, the card FAILED with its mint unresolved. */
      async function hungMint() {
        const { account, key } = await setup();
        fake.fail("issuing.cards.create", faults.hang());
        expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
        fake.clearFaults();
        const [card] = await s.query("SELECT id, status, hold_status, revoked_at FROM cards WHERE account_id = ?", [account.id]);
        expect(card).toMatchObject({ status: "FAILED", hold_status: "RELEASED", revoked_at: null });
        return { account, cardId: card!.id as string };
      }
      /** The recovery pass, a creation lease after the failure (its due time moved to now). */
      async function aLeaseLater(cardId: string) {
        await s.app.services.maintenance.run();
        await s.query("UPDATE cards SET recovery_next_at = ? WHERE id = ?", [Date.now() - 1, cardId]);
        await s.app.services.maintenance.run();
        const [row] = await s.query("SELECT processor_card_id, revoked_at, recovery_attempts, needs_attention FROM cards WHERE id = ?", [cardId]);
        return row!;
      }

      it("Stripe makes it late: the recovery pass looks again a lease later, finds it and cancels it", async () => {
        const { account, cardId } = await hungMint();
        // The hung call ends at Stripe now: an active card, made for ours.
        const made = await fetch(`${fake.url}/v1/issuing/cards`, {
          method: "POST",
          headers: { authorization: "Bearer sk_test_fake", "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ cardholder: (await stripeIds(account.id)).cardholder_id!, currency: "usd", type: "virtual", status: "active", "metadata[card_id]": cardId }),
        });
        const ic = (await made.json()) as { id: string };
        const row = await aLeaseLater(cardId);
        expect(fake.cards.get(ic.id)!.status).toBe("canceled");
        expect(row.processor_card_id).toBe(ic.id);
        expect(row.revoked_at).not.toBeNull();
        await expectNothingLeft(account.id);
      });

      it("nothing was made: the lookup a lease later settles the card, without an operator", async () => {
        const { account, cardId } = await hungMint();
        const n = fake.requests.length;
        const row = await aLeaseLater(cardId);
        // The account's cardholders' cards (one cardholder here), not every Issuing card of the platform.
        const lists = since(n).filter((c) => c.route === "issuing.cards.list");
        expect(lists).toHaveLength(1);
        expect(lists[0]!.params).toMatchObject({ cardholder: (await stripeIds(account.id)).cardholder_id, limit: "100" });
        expect(row).toMatchObject({ processor_card_id: null, recovery_attempts: 0 });
        expect(row.revoked_at).not.toBeNull();
        expect(!!row.needs_attention).toBe(false);
        expect((await atStripe(account.id)).cards).toEqual([]);
      });

      // Where the record of cardholders cannot be complete, every Issuing card made since is read.
      it.each([
        {
          // As the migration leaves an account it found: its then-current cardholder, copied in just now.
          name: "a card made within a day of the upgrade that began the record",
          record: (accountId: string) => s.query("UPDATE stripe_cardholders SET backfilled = 1, created_at = ? WHERE account_id = ?", [Date.now(), accountId]),
        },
        {
          name: "a current cardholder missing from the record (made by an older version)",
          record: (accountId: string) => s.query("DELETE FROM stripe_cardholders WHERE account_id = ?", [accountId]),
        },
      ])("$name has its card looked for among every Issuing card", async ({ record }) => {
        const { account, cardId } = await hungMint();
        await record(account.id);
        const n = fake.requests.length;
        const row = await aLeaseLater(cardId);
        const lists = since(n).filter((c) => c.route === "issuing.cards.list");
        expect(lists).toHaveLength(1);
        expect(lists[0]!.params).not.toHaveProperty("cardholder");
        expect(row.revoked_at).not.toBeNull();
      });
    });

    it("a retry after a 502 makes a new card under new keys and leaves exactly one hold", async () => {
      const { account, key } = await setup();
      fake.fail("issuing.cards.create", faults.serverError(), 2);
      const headers = { "idempotency-key": "retry-after-502" };
      expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 }, headers }), 502, "processor_error");
      const ok = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 }, headers });
      expect(ok.status).toBe(201);
      const { intents } = await atStripe(account.id);
      expect(intents.filter((pi) => pi.status === "requires_capture")).toHaveLength(1);
      expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(900);
    });

    it("revoke 500 twice on close: 502, and a retried close finishes it (the key's stored 500 read past)", async () => {
      const { account, key } = await setup();
      const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
      fake.fail("issuing.cards.update", faults.serverError(), 2);
      const err = expectError(await s.request("POST", `/v1/cards/${card.id}/close`, { key }), 502, "processor_error");
      expect(err.details).toMatchObject({ step: "revoke" });
      expect((await s.request("POST", `/v1/cards/${card.id}/close`, { key })).status).toBe(200);
      await expectNothingLeft(account.id);
    });

    it("cancel 500 twice on close: 502, and the recovery pass releases the hold", async () => {
      const { account, key } = await setup();
      const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
      fake.fail("payment_intents.cancel", faults.serverError(), 2);
      expectError(await s.request("POST", `/v1/cards/${card.id}/close`, { key }), 502, "processor_error");
      await s.app.services.maintenance.run();
      await expectNothingLeft(account.id);
      expect((await s.request("GET", "/v1/balance", { key })).body.held_cents).toBe(0);
    });

    it("ephemeral key 500: 502 on get, the card untouched", async () => {
      const { key } = await setup();
      const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
      fake.fail("ephemeral_keys.create", faults.serverError());
      const err = expectError(await s.request("GET", `/v1/cards/${card.id}`, { key }), 502, "processor_error");
      expect(err.details).toMatchObject({ step: "ephemeral_key" });
      expect((await s.request("GET", `/v1/cards/${card.id}`, { key })).body.status).toBe("OPEN");
    });
  });

  describe("a Stripe 5xx is stored under its key: the outcome is read, and only then sent again under a new key", () => {
    /** A card that has been through every money step: hold, mint, capture, an overage charge, a refund, close. */
    async function throughEveryStep() {
      const { account, key } = await setup();
      const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
      expect(card.status).toBe("OPEN");
      const auth = (await s.request("POST", `/v1/test_helpers/cards/${card.id}/authorizations`, { key, body: { amount_cents: 900 } })).body;
      expect(auth.approved).toBe(true);
      const capture = await s.request("POST", `/v1/test_helpers/authorizations/${auth.id}/capture`, { key, body: { amount_cents: 1000 } });
      expect(capture.status).toBe(201);
      expect((await s.request("POST", `/v1/test_helpers/transactions/${capture.body.id}/refund`, { key, body: { amount_cents: 300 } })).status).toBe(201);
      const other = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 400 } })).body;
      expect((await s.request("POST", `/v1/cards/${other.id}/close`, { key })).status).toBe(200);
      const payments = await s.query("SELECT kind, status FROM payments WHERE card_id = ? ORDER BY seq", [card.id]);
      expect(payments).toEqual([
        { kind: "hold_capture", status: "succeeded" },
        { kind: "charge", status: "succeeded" },
        { kind: "refund", status: "succeeded" },
      ]);
      const { intents, cards } = await atStripe(account.id);
      const hold = intents.find((pi) => pi.metadata?.card_id === card.id && pi.metadata?.purpose === "hold")!;
      const charge = intents.find((pi) => pi.metadata?.purpose === "charge")!;
      // Collected = settled − refunded: 900 captured + 100 charged − 300 refunded.
      expect(hold.amount_received + charge.amount_received - fake.refunded(hold.id) - fake.refunded(charge.id)).toBe(700);
      expect(intents.filter((pi) => pi.metadata?.purpose === "hold")).toHaveLength(2);
      expect([...fake.refunds.values()].filter((r) => r.payment_intent === hold.id || r.payment_intent === charge.id)).toHaveLength(1);
      expect(intents.filter((pi) => pi.metadata?.purpose === "charge")).toHaveLength(1);
      expect(cards).toHaveLength(2);
      expect(cards.find((c) => c.metadata?.card_id === other.id)!.status).toBe("canceled");
      expect(intents.find((pi) => pi.metadata?.card_id === other.id)!.status).toBe("canceled");
      return { account };
    }

    const steps = [
      "customers.create",
      "issuing.cardholders.create",
      "payment_intents.create",
      "issuing.cards.create",
      "payment_intents.capture",
      "refunds.create",
      "payment_intents.cancel",
      "issuing.cards.update",
    ];
    for (const step of steps) {
      it(`${step}: a 500 after Stripe did the work is found by reading, never done twice`, async () => {
        fake.fail(step, faults.serverErrorAfter());
        const n = fake.requests.length;
        const { account } = await throughEveryStep();
        expect(since(n).find((c) => c.route === step)?.status).toBe(500);
        expect([...fake.customers.values()].filter((c) => c.metadata?.account_id === account.id)).toHaveLength(1);
        expect([...fake.cardholders.values()].filter((c) => c.metadata?.account_id === account.id)).toHaveLength(1);
      });

      it(`${step}: a 500 with nothing done is sent once more, same parameters, under a new attempt key`, async () => {
        fake.fail(step, faults.serverError());
        const n = fake.requests.length;
        await throughEveryStep();
        const [first, second] = since(n).filter((c) => c.route === step);
        expect(first!.status).toBe(500);
        expect(second!.status).toBe(200);
        expect(second!.idempotencyKey!.startsWith(`${first!.idempotencyKey}:`), `${first!.idempotencyKey} then ${second!.idempotencyKey}`).toBe(true);
        expect(second!.params).toEqual(first!.params);
      });
    }
  });

  describe("lookups by metadata read every page of Stripe's list: an object behind 100 newer ones is still found", () => {
    /** Stripe making `n` objects like the newest of `objects` (other accounts' or cards'), with `other` fields. */
    const madeMeanwhile =
      <T extends { id: string }>(objects: Map<string, T>, other: (i: number) => Partial<T>, n = 150) =>
      () => {
        const newest = [...objects.values()].at(-1)!;
        for (let i = 0; i < n; i++) objects.set(`${newest.id}x${i}`, { ...newest, id: `${newest.id}x${i}`, ...other(i) });
      };
    const otherCard = (i: number) => ({ status: "canceled" as const, metadata: { card_id: `card_other${i}`, purpose: "hold" } });
    const cases = [
      { step: "customers.create", made: () => madeMeanwhile(fake.customers, (i) => ({ metadata: { account_id: `acct_other${i}`, mode: "test" } })) },
      { step: "issuing.cardholders.create", made: () => madeMeanwhile(fake.cardholders, (i) => ({ metadata: { account_id: `acct_other${i}`, mode: "test" } })) },
      { step: "payment_intents.create", made: () => madeMeanwhile(fake.paymentIntents, otherCard) },
      { step: "issuing.cards.create", made: () => madeMeanwhile(fake.cards, otherCard) },
    ];
    for (const { step, made } of cases)
      it(`${step}: a 500 after Stripe did the work, with 150 newer objects made meanwhile: found on a later page, never made twice`, async () => {
        fake.fail(step, faults.serverErrorAfter(made()));
        const n = fake.requests.length;
        const { account, key } = await setup();
        const card = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } });
        expect(card.status).toBe(201);
        expect(since(n).filter((c) => c.route === step).map((c) => c.status)).toEqual([500]);
        const listed = since(n).filter((c) => c.route === step.replace(/create$/, "list"));
        expect(listed.some((c) => c.params.starting_after !== undefined)).toBe(true);
        expect(listed.every((c) => Number(c.params["created[gte]"]) > 0)).toBe(true);
        const { intents, cards } = await atStripe(account.id);
        expect(intents.filter((pi) => pi.metadata?.card_id === card.body.id).map((pi) => pi.status)).toEqual(["requires_capture"]);
        expect(cards.filter((c) => c.metadata?.card_id === card.body.id).map((c) => c.status)).toEqual(["active"]);
      });

    it("a hold whose outcome is unknown, behind 150 newer PaymentIntents of the customer: recovery finds and releases it", async () => {
      const { account, key } = await setup();
      fake.fail("payment_intents.create", faults.hangAfter());
      fake.fail("payment_intents.list", faults.serverError()); // the compensation cannot read
      expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
      fake.clearFaults();
      const [card] = await s.query("SELECT id, status, hold_status FROM cards WHERE account_id = ?", [account.id]);
      expect(card).toMatchObject({ status: "FAILED", hold_status: "PENDING" });
      madeMeanwhile(fake.paymentIntents, otherCard)();
      // The recovery pass a creation lease later (its due time moved to now).
      await s.query("UPDATE cards SET recovery_next_at = ? WHERE id = ?", [Date.now() - 1, card!.id]);
      await s.app.services.maintenance.run();
      const hold = (await atStripe(account.id)).intents.filter((pi) => pi.metadata?.card_id === card!.id);
      expect(hold.map((pi) => pi.status)).toEqual(["canceled"]);
      expect(await s.query("SELECT hold_id, hold_status FROM cards WHERE id = ?", [card!.id])).toEqual([{ hold_id: hold[0]!.id, hold_status: "RELEASED" }]);
    });
  });

  it("test helper purchase: captures the PaymentIntent for the amount and cancels the card at Stripe", async () => {
    const { account, key } = await setup();
    const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 2000 } })).body;
    const n = fake.requests.length;
    const res = await s.request("POST", `/v1/test_helpers/cards/${card.id}/purchase`, { key, body: { amount_cents: 1234 } });
    expect(res.body).toMatchObject({ approved: true, card: { status: "USED" } });
    const { intents, cards } = await atStripe(account.id);
    const [pay] = await s.query("SELECT id FROM payments WHERE card_id = ? AND kind = 'hold_capture'", [card.id]);
    expect(since(n).map((c) => `${c.method} ${c.path} ${c.idempotencyKey}`)).toEqual([
      `POST /v1/payment_intents/${intents[0]!.id}/capture ${pay.id}:hold_capture`,
      `POST /v1/issuing/cards/${cards[0]!.id} ${card.id}:revoke`,
    ]);
    expect(since(n)[0]!.params).toEqual({ amount_to_capture: "1234" });
    expect(intents[0]).toMatchObject({ status: "succeeded", amount_received: 1234 });
    expect(cards[0]!.status).toBe("canceled");
  });

  describe("amounts below Stripe's 50-cent minimum charge", () => {
    it("the fake refuses them like Stripe: a PaymentIntent or a capture under 50 cents is amount_too_small", async () => {
      const { account } = await setup();
      const { customer_id, payment_method_id } = await stripeIds(account.id);
      const post = (path: string, body: Record<string, string>) =>
        fetch(fake.url + path, { method: "POST", headers: { authorization: "Bearer sk_test_fake", "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(body) });
      const small = await post("/v1/payment_intents", { amount: "49", currency: "usd", customer: customer_id, payment_method: payment_method_id, capture_method: "manual", confirm: "true" });
      expect(small.status).toBe(400);
      expect((await small.json()).error).toMatchObject({ type: "invalid_request_error", code: "amount_too_small" });
      const pi = await (await post("/v1/payment_intents", { amount: "100", currency: "usd", customer: customer_id, payment_method: payment_method_id, capture_method: "manual", confirm: "true" })).json();
      const under = await post(`/v1/payment_intents/${pi.id}/capture`, { amount_to_capture: "49" });
      expect(under.status).toBe(400);
      expect((await under.json()).error).toMatchObject({ code: "amount_too_small" });
      expect(fake.paymentIntents.get(pi.id)).toMatchObject({ status: "requires_capture", amount_capturable: 100 });
    });

    it("a 1-cent card holds 50 cents at Stripe; the Issuing limit, the card and the balance stay 1 cent", async () => {
      const { account, key } = await setup();
      const n = fake.requests.length;
      const res = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 1 } });
      expect(res.status).toBe(201);
      const [hold, , mint] = since(n);
      expect(hold!.path).toBe("/v1/payment_intents");
      expect(hold!.params.amount).toBe("50");
      expect(mint!.params["spending_controls[spending_limits][0][amount]"]).toBe("1");
      expect(res.body).toMatchObject({ status: "OPEN", spending_limit_cents: 1, remaining_cents: 1 });
      const { intents } = await atStripe(account.id);
      expect(intents.map((pi) => [pi.status, pi.amount])).toEqual([["requires_capture", 50]]);
      expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 1, open_cards: 1 });
      // Closing cancels the 50-cent PaymentIntent.
      expect((await s.request("POST", `/v1/cards/${res.body.id}/close`, { key })).body).toEqual({ ok: true, status: "CLOSED" });
      expect(fake.paymentIntents.get(intents[0]!.id)!.status).toBe("canceled");
    });

    for (const [cardCents, purchase] of [
      [1, 1],
      [30, 20],
      [2000, 49],
    ] as const)
      it(`a ${purchase}-cent purchase on a ${cardCents}-cent card: capture 50, refund ${50 - purchase} at once, net charge ${purchase}`, async () => {
        const { account, key } = await setup();
        const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: cardCents } })).body;
        const n = fake.requests.length;
        const res = await s.request("POST", `/v1/test_helpers/cards/${card.id}/purchase`, { key, body: { amount_cents: purchase } });
        expect(res.body).toMatchObject({ approved: true, amount_cents: purchase, card: { status: "USED", remaining_cents: 0 } });
        const { intents, cards } = await atStripe(account.id);
        const pi = intents[0]!;
        const [pay] = await s.query("SELECT id FROM payments WHERE card_id = ? AND kind = 'hold_capture'", [card.id]);
        expect(since(n).map((c) => `${c.method} ${c.path} ${c.idempotencyKey}`)).toEqual([
          `POST /v1/payment_intents/${pi.id}/capture ${pay.id}:hold_capture`,
          `POST /v1/refunds ${pay.id}:hold_capture:refund`,
          `POST /v1/issuing/cards/${cards[0]!.id} ${card.id}:revoke`,
        ]);
        expect(since(n)[0]!.params).toEqual({ amount_to_capture: "50" });
        expect(since(n)[1]!.params).toEqual({
          payment_intent: pi.id,
          amount: String(50 - purchase),
          "metadata[request]": `${pay.id}:hold_capture:refund`,
          "metadata[reason]": "below_stripe_minimum_charge",
        });
        expect(pi).toMatchObject({ status: "succeeded", amount: Math.max(cardCents, 50), amount_received: 50 });
        expect(50 - fake.refunded(pi.id)).toBe(purchase);
      });

    it("a refund of the minimum's difference that fails is retried with the capture, once, from the queue", async () => {
      const { account, key } = await setup();
      const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 500 } })).body;
      fake.fail("refunds.create", faults.serverError(), 2);
      const buy = await s.request("POST", `/v1/test_helpers/cards/${card.id}/purchase`, { key, body: { amount_cents: 10 } });
      fake.clearFaults();
      // The purchase stands; the payment is retried.
      expect(buy.body).toMatchObject({ approved: true, card: { status: "USED", spent_cents: 10 } });
      await s.query("UPDATE payments SET next_attempt_at = 0 WHERE card_id = ?", [card.id]);
      await s.app.services.maintenance.run();
      const pi = (await atStripe(account.id)).intents[0]!;
      expect(pi).toMatchObject({ status: "succeeded", amount_received: 50 });
      expect(fake.refunded(pi.id)).toBe(40);
      expect([...fake.refunds.values()].filter((r) => r.payment_intent === pi.id)).toHaveLength(1);
    });
  });

  it("an account whose payment method was saved before Stripe was set up gets its Customer on the first hold", async () => {
    const { account, key } = await setup();
    await s.query("DELETE FROM stripe_accounts WHERE account_id = ?", [account.id]);
    const n = fake.requests.length;
    expect((await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).status).toBe(201);
    expect(since(n).map((c) => c.path).slice(0, 3)).toEqual(["/v1/customers", "/v1/payment_methods/pm_card_visa/attach", "/v1/payment_intents"]);
  });
});

describe(`stripe keys per mode (${dbKind})`, () => {
  let testFake: FakeStripe;
  let s: TestServer;
  beforeAll(async () => {
    testFake = await startFakeStripe("sk_test_fake");
    // Only the test key: live mode is not configured.
    s = await startServer({ PROCESSOR: "stripe", STRIPE_TEST_SECRET_KEY: "sk_test_fake", STRIPE_API_BASE: testFake.url });
  });
  afterAll(async () => {
    await s?.close();
    await testFake?.close();
  });

  it("a mode without its secret key answers 503 processor_not_configured; reads still work", async () => {
    const account = await s.newAccount();
    const live = await account.key("live");
    expectError(await s.request("POST", "/v1/cards", { key: live, body: { amount_cents: 900 } }), 503, "processor_not_configured");
    expect((await s.request("GET", "/v1/cards", { key: live })).status).toBe(200);
    expect((await s.request("GET", "/v1/balance", { key: live })).status).toBe(200);
    // Test mode runs on Stripe with the test key.
    expect((await s.request("POST", "/v1/cards", { key: await account.key("test"), body: { amount_cents: 900 } })).status).toBe(201);
  });

  it("live mode uses STRIPE_LIVE_SECRET_KEY", async () => {
    const liveFake = await startFakeStripe("sk_live_fake");
    const t = await startServer({ PROCESSOR: "stripe", STRIPE_LIVE_SECRET_KEY: "sk_live_fake", STRIPE_API_BASE: liveFake.url });
    try {
      const account = await t.newAccount();
      const live = await account.key("live");
      const card = await t.request("POST", "/v1/cards", { key: live, body: { amount_cents: 900 } });
      expect(card.status).toBe(201);
      expect([...liveFake.cards.values()].every((c) => c.livemode)).toBe(true);
      expect(liveFake.requests.some((r) => r.path === "/v1/issuing/cards")).toBe(true);
      // Test mode has no key here: 503, never the simulated processor.
      expectError(await t.request("POST", "/v1/cards", { key: await account.key("test"), body: { amount_cents: 900 } }), 503, "processor_not_configured");
    } finally {
      await t.close();
      await liveFake.close();
    }
  });
});

describe(`stripe calls stop at the domain's deadline (${dbKind})`, () => {
  let fake: FakeStripe;
  let s: TestServer;
  // Stripe's "try again shortly" retries back off 100, 200, 400 ms: the fourth send comes after 525 ms at the earliest.
  const TIMEOUT_MS = 250;
  beforeAll(async () => {
    fake = await startFakeStripe("sk_test_fake");
    s = await startServer({ PROCESSOR: "stripe", STRIPE_TEST_SECRET_KEY: "sk_test_fake", STRIPE_API_BASE: fake.url, PROCESSOR_TIMEOUT_MS: String(TIMEOUT_MS) });
  });
  afterAll(async () => {
    await s?.close();
    await fake?.close();
  });

  it("a hold still being retried when the request gave up is never sent after the deadline: nothing is held behind recovery's back", async () => {
    const account = await s.newAccount({ paymentMethod: "pm_card_visa" });
    const key = await account.key();
    // Three 429s, then Stripe would take it: a send after the deadline would place a hold that
    // the request's compensation and, once past the lease, the recovery pass might never see.
    fake.fail("payment_intents.create", faults.rateLimited(), 3);
    expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } }), 502, "processor_error");
    await new Promise((r) => setTimeout(r, 1200));
    const sends = fake.requests.filter((r) => r.route === "payment_intents.create");
    expect(sends.length).toBeGreaterThanOrEqual(2);
    expect(sends.length).toBeLessThan(4);
    expect([...fake.paymentIntents.values()].filter((pi) => pi.metadata?.purpose === "hold")).toEqual([]);
  });
});
