import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startFakeStripe, faults, type FakeStripe } from "./fake-stripe.js";
import { dbKind, expectError, startServer, TEST_CARDHOLDER, type TestServer } from "./harness.js";
import { expectKeys, guarded, ISO } from "./helpers.js";

/**
 * Cardholders per account (DESIGN 3.3, 3.6): the operator sets who an account's cards are issued
 * to; on Stripe that is the account's own Issuing cardholder, required before card creation; the
 * simulated processor needs none.
 */

const ACCOUNT_KEYS = ["id", "name", "kyb_verified", "payment_method", "cardholder", "created_at"];
const CARDHOLDER_KEYS = ["type", "name", "email", "phone_number", "billing", "tax_id_last4", "updated_at"];
const BILLING_KEYS = ["line1", "line2", "city", "state", "postal_code", "country"];

const COMPANY = {
  type: "company",
  name: "Globex Corporation",
  email: "billing@globex.example",
  phone_number: "+1 415 555 0123",
  billing: { line1: "500 Oak Avenue", line2: "Suite 200", city: "Portland", state: "OR", postal_code: "97205", country: "US" },
  tax_id: "98-7654321",
};
const INDIVIDUAL = {
  type: "individual",
  name: "Mary Ann Smith",
  billing: { line1: "12 Rue de Rivoli", city: "Paris", postal_code: "75001", country: "FR" },
};

describe(`operator API: POST /admin/v1/accounts/:id/cardholder (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer());
  });
  afterAll(() => s.close());

  const account = async () => (await s.admin("POST", "/accounts", { name: "Cardholder test" })).body.id as string;

  it("→ 200 the account with its cardholder; GET shows it; the tax id only by its last 4", async () => {
    const id = await account();
    expect((await s.admin("GET", `/accounts/${id}`)).body.cardholder).toBeNull();
    const r = await s.admin("POST", `/accounts/${id}/cardholder`, COMPANY);
    expect(r.status).toBe(200);
    expectKeys(r.body, ACCOUNT_KEYS);
    expectKeys(r.body.cardholder, CARDHOLDER_KEYS);
    expectKeys(r.body.cardholder.billing, BILLING_KEYS);
    expect(r.body.cardholder).toEqual({
      type: "company",
      name: "Globex Corporation",
      email: "billing@globex.example",
      phone_number: "+1 415 555 0123",
      billing: COMPANY.billing,
      tax_id_last4: "4321",
      updated_at: expect.stringMatching(ISO),
    });
    const got = await s.admin("GET", `/accounts/${id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(r.body);
    // Never the tax id in full, in any shape, on any answer.
    for (const body of [r.body, got.body]) {
      const text = JSON.stringify(body);
      expect(text).not.toContain(COMPANY.tax_id);
      expect(text).not.toContain("7654321");
    }
  });

  it("an individual: optional fields come back null; setting again replaces every field", async () => {
    const id = await account();
    const first = (await s.admin("POST", `/accounts/${id}/cardholder`, COMPANY)).body.cardholder;
    const r = await s.admin("POST", `/accounts/${id}/cardholder`, INDIVIDUAL);
    expect(r.status).toBe(200);
    expect(r.body.cardholder).toEqual({
      type: "individual",
      name: "Mary Ann Smith",
      email: null,
      phone_number: null,
      billing: { ...INDIVIDUAL.billing, line2: null, state: null },
      tax_id_last4: null,
      updated_at: expect.stringMatching(ISO),
    });
    expect(Date.parse(r.body.cardholder.updated_at)).toBeGreaterThanOrEqual(Date.parse(first.updated_at));
  });

  it("surrounding spaces are trimmed; accents are letters", async () => {
    const id = await account();
    const r = await s.admin("POST", `/accounts/${id}/cardholder`, {
      type: "individual",
      name: "  José Müller-Lüdenscheidt ".slice(0, 26),
      billing: { line1: " 1 Strasse ", city: "Berlin", postal_code: "10115", country: "DE" },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.cardholder.name).toBe("José Müller-Lüdenscheidt");
    expect(r.body.cardholder.billing.line1).toBe("1 Strasse");
  });

  describe("validation → 400 validation_error with details.issues", () => {
    const without = (o: Record<string, unknown>, key: string) => Object.fromEntries(Object.entries(o).filter(([k]) => k !== key));
    const billing = (patch: Record<string, unknown>) => ({ ...COMPANY, billing: { ...COMPANY.billing, ...patch } });
    const cases: [string, unknown, string][] = [
      ["no type", without(COMPANY, "type"), "type"],
      ["an unknown type", { ...COMPANY, type: "person" }, "type"],
      ["no name", without(COMPANY, "name"), "name"],
      ["an empty name", { ...COMPANY, name: "   " }, "name"],
      ["a name over 24 characters (Stripe prints it on cards)", { ...COMPANY, name: "Globex Corporation International" }, "name"],
      ["digits in the name", { ...COMPANY, name: "Acme 2000" }, "name"],
      ["special characters in the name", { ...COMPANY, name: "Acme & Sons" }, "name"],
      ["a name that is not a string", { ...COMPANY, name: 5 }, "name"],
      ["an individual without a last name", { ...INDIVIDUAL, name: "Cher" }, "name"],
      ["a tax id for an individual", { ...INDIVIDUAL, tax_id: "123-45-6789" }, "tax_id"],
      ["a malformed email", { ...COMPANY, email: "billing at globex" }, "email"],
      ["a phone number with letters", { ...COMPANY, phone_number: "call me maybe" }, "phone_number"],
      ["a tax id too short to hide", { ...COMPANY, tax_id: "1234" }, "tax_id"],
      ["a tax id with odd characters", { ...COMPANY, tax_id: "12<script>" }, "tax_id"],
      ["no billing", without(COMPANY, "billing"), "billing"],
      ["billing without city", { ...COMPANY, billing: without(COMPANY.billing, "city") }, "billing.city"],
      ["billing without line1", { ...COMPANY, billing: without(COMPANY.billing, "line1") }, "billing.line1"],
      ["billing without postal code", { ...COMPANY, billing: without(COMPANY.billing, "postal_code") }, "billing.postal_code"],
      ["billing without country", { ...COMPANY, billing: without(COMPANY.billing, "country") }, "billing.country"],
      ["a lowercase country", billing({ country: "us" }), "billing.country"],
      ["a three-letter country", billing({ country: "USA" }), "billing.country"],
      ["a country code that is not assigned", billing({ country: "XX" }), "billing.country"],
      ["a blank line1", billing({ line1: "  " }), "billing.line1"],
      ["a line1 over 200 characters", billing({ line1: "x".repeat(201) }), "billing.line1"],
      ["a postal code over 20 characters", billing({ postal_code: "1".repeat(21) }), "billing.postal_code"],
      ["billing as a string", { ...COMPANY, billing: "500 Oak Avenue, Portland" }, "billing"],
    ];
    for (const [name, body, path] of cases)
      it(`${name} → issue at ${path}`, async () => {
        const id = await account();
        const err = expectError(await s.admin("POST", `/accounts/${id}/cardholder`, body), 400, "validation_error");
        const paths = (err.details.issues as { path: string; message: string }[]).map((i) => i.path);
        expect(paths, JSON.stringify(err.details.issues)).toContain(path);
        for (const issue of err.details.issues) expect(issue.message).toBeTruthy();
        // Nothing was saved.
        expect((await s.admin("GET", `/accounts/${id}`)).body.cardholder).toBeNull();
      });

    it("unknown fields, at the top or in billing, are refused (strict objects)", async () => {
      const id = await account();
      expectError(await s.admin("POST", `/accounts/${id}/cardholder`, { ...COMPANY, ssn: "078-05-1120" }), 400, "validation_error");
      expectError(await s.admin("POST", `/accounts/${id}/cardholder`, billing({ county: "Multnomah" })), 400, "validation_error");
      expectError(await s.admin("POST", `/accounts/${id}/cardholder`, {}), 400, "validation_error");
      expect((await s.admin("GET", `/accounts/${id}`)).body.cardholder).toBeNull();
    });

    it("a validation error never echoes the tax id", async () => {
      const id = await account();
      for (const body of [
        { ...COMPANY, country: "US" },
        { ...COMPANY, tax_id: "98-7654321<" },
        { ...INDIVIDUAL, tax_id: "98-7654321" },
      ]) {
        const res = await s.admin("POST", `/accounts/${id}/cardholder`, body);
        expectError(res, 400, "validation_error");
        expect(JSON.stringify(res.body)).not.toContain("7654321");
      }
    });
  });

  it("unknown account → 404 not_found; without the admin token → 401", async () => {
    expectError(await s.admin("POST", "/accounts/acct_doesnotexist/cardholder", COMPANY), 404, "not_found");
    const id = await account();
    const res = await s.request("POST", `/admin/v1/accounts/${id}/cardholder`, { body: COMPANY, key: null });
    expectError(res, 401, "unauthorized");
    expect((await s.admin("GET", `/accounts/${id}`)).body.cardholder).toBeNull();
  });
});

describe(`cardholders on the simulated processor (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer({ PROCESSOR: "simulated" }));
  });
  afterAll(() => s.close());

  it("cards need no cardholder: setup_complete true without one, and missing never lists it", async () => {
    const account = await s.newAccount({ cardholder: null });
    const key = await account.key();
    expect((await s.request("GET", "/v1/balance", { key })).body.setup_complete).toBe(true);
    expect((await s.request("POST", "/v1/cards", { key, body: { amount_cents: 500 } })).status).toBe(201);
    const unverified = await s.newAccount({ kyb: false, paymentMethod: null, cardholder: null });
    const err = expectError(await s.request("POST", "/v1/cards", { key: await unverified.key(), body: { amount_cents: 500 } }), 403, "setup_required");
    expect(err.details.missing).toEqual(["kyb", "payment_method"]);
  });

  it("the first-start demo account issues without a cardholder", async () => {
    expect((await s.admin("GET", `/accounts/${s.accountId}`)).body.cardholder).toBeNull();
    expect((await s.request("POST", "/v1/cards", { body: { amount_cents: 300 } })).status).toBe(201);
  });

  it("a live key without Stripe still answers 503 processor_not_configured", async () => {
    const account = await s.newAccount({ cardholder: null });
    expectError(await s.request("POST", "/v1/cards", { key: await account.key("live"), body: { amount_cents: 500 } }), 503, "processor_not_configured");
  });
});

describe(`cardholders on Stripe (${dbKind})`, () => {
  let fake: FakeStripe;
  let s: TestServer;
  beforeAll(async () => {
    fake = await startFakeStripe("sk_test_fake");
    s = guarded(await startServer({ PROCESSOR: "stripe", STRIPE_TEST_SECRET_KEY: "sk_test_fake", STRIPE_API_BASE: fake.url, PROCESSOR_TIMEOUT_MS: "1000" }));
  });
  afterAll(async () => {
    await s?.close();
    await fake?.close();
  });
  afterEach(() => fake.clearFaults());

  const since = (n: number) => fake.requests.slice(n);
  const create = (key: string, amount = 900) => s.request("POST", "/v1/cards", { key, body: { amount_cents: amount } });
  /** The cardholder at the fake that the Issuing card of one of our cards was issued to. */
  const cardholderOfCard = (cardId: string) => {
    const ic = [...fake.cards.values()].find((c) => c.metadata.card_id === cardId)!;
    return fake.cardholders.get(ic.cardholder.id)!;
  };
  const customerOf = async (accountId: string) =>
    ((await s.query("SELECT customer_id FROM stripe_accounts WHERE account_id = ? AND mode = 'test'", [accountId]))[0] as { customer_id: string }).customer_id;
  /** Nothing held and no Issuing card for the account at Stripe. */
  async function expectNothingAtStripe(accountId: string) {
    const customer = await customerOf(accountId);
    for (const pi of fake.paymentIntents.values()) if (pi.customer === customer) expect(pi.status, pi.id).toBe("canceled");
    const ours = new Set([...fake.cardholders.values()].filter((c) => c.metadata.account_id === accountId).map((c) => c.id));
    expect([...fake.cards.values()].filter((c) => ours.has(c.cardholder.id) && c.status !== "canceled")).toEqual([]);
  }

  it("without cardholder details: 403 setup_required with cardholder missing, before the policy, and nothing at Stripe", async () => {
    const account = await s.newAccount({ cardholder: null });
    const key = await account.key();
    const n = fake.requests.length;
    const err = expectError(await create(key), 403, "setup_required");
    expectKeys(err.details, ["missing", "setup_url"]);
    expect(err.details).toEqual({ missing: ["cardholder"], setup_url: "http://cardctl.test/setup" });
    expect(err.message).toMatch(/cardholder/);
    expect(err.message).toContain("/admin/v1/accounts/:id/cardholder");
    // Set-up comes before the policy maximum and before approval (DESIGN 3.4).
    expectError(await create(key, 50000), 403, "setup_required");
    await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 100 } });
    expectError(await create(key, 900), 403, "setup_required");
    await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 50000, approval_required: true } });
    expectError(await create(key, 900), 403, "setup_required");
    expect((await s.request("GET", "/v1/approvals", { key })).body.data).toEqual([]);
    expect(since(n)).toEqual([]);
    expect(await s.query("SELECT id FROM cards WHERE account_id = ?", [account.id])).toEqual([]);
    // With KYB missing too, both are listed, kyb first.
    const bare = await s.newAccount({ kyb: false, paymentMethod: null, cardholder: null });
    expect(expectError(await create(await bare.key()), 403, "setup_required").details.missing).toEqual(["kyb", "payment_method", "cardholder"]);
  });

  it("balance setup_complete agrees with create: false without a cardholder, true once set", async () => {
    const account = await s.newAccount({ cardholder: null });
    const key = await account.key();
    expect((await s.request("GET", "/v1/balance", { key })).body.setup_complete).toBe(false);
    await s.admin("POST", `/accounts/${account.id}/cardholder`, COMPANY);
    expect((await s.request("GET", "/v1/balance", { key })).body.setup_complete).toBe(true);
    expect((await create(key)).status).toBe(201);
  });

  it("approve re-checks the cardholder: disabled at Stripe since the request → 403 setup_required, the approval stays PENDING", async () => {
    const account = await s.newAccount({ cardholder: COMPANY });
    const key = await account.key();
    const first = (await create(key)).body;
    const pending = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 800, policy_override: { approval_required: true } } });
    expect(pending.status).toBe(202);
    const ch = cardholderOfCard(first.id);
    fake.setCardholderState(ch.id, { status: "inactive" });
    const approve = () => s.request("POST", `/v1/approvals/${pending.body.approval_id}/approve`, { key });
    const err = expectError(await approve(), 403, "setup_required");
    expect(err.details.missing).toEqual(["cardholder"]);
    expect((await s.request("GET", "/v1/approvals", { key })).body.data.map((a: any) => a.status)).toEqual(["PENDING"]);
    // Fixed at Stripe: the same approval can be approved.
    fake.setCardholderState(ch.id, { status: "active" });
    expect((await approve()).status).toBe(201);
  });

  it("with details → 201, and the card's cardholder at Stripe carries the account's own details", async () => {
    const account = await s.newAccount({ cardholder: COMPANY });
    const key = await account.key();
    const n = fake.requests.length;
    const card = await create(key);
    expect(card.status).toBe(201);
    const made = since(n).find((r) => r.method === "POST" && r.path === "/v1/issuing/cardholders")!;
    expect(made.params).toEqual({
      type: "company",
      name: "Globex Corporation",
      status: "active",
      email: "billing@globex.example",
      phone_number: "+1 415 555 0123",
      "billing[address][line1]": "500 Oak Avenue",
      "billing[address][line2]": "Suite 200",
      "billing[address][city]": "Portland",
      "billing[address][state]": "OR",
      "billing[address][postal_code]": "97205",
      "billing[address][country]": "US",
      "company[tax_id]": "98-7654321",
      "metadata[account_id]": account.id,
      "metadata[mode]": "test",
      "metadata[details_version]": expect.stringMatching(/^[0-9a-f]{32}$/),
    });
    expect(made.idempotencyKey).toBe(`${account.id}:test:cardholder:${made.params["metadata[details_version]"]}`);
    const ch = cardholderOfCard(card.body.id);
    expect(ch).toMatchObject({
      type: "company",
      name: "Globex Corporation",
      email: "billing@globex.example",
      status: "active",
      billing: { address: { line1: "500 Oak Avenue", line2: "Suite 200", city: "Portland", state: "OR", postal_code: "97205", country: "US" } },
      company: { tax_id_provided: true },
      metadata: { account_id: account.id, mode: "test" },
    });
    expect(ch.name).not.toBe("Cardctl Agent");
    // Another account's cards go to its own cardholder.
    const other = await s.newAccount({ cardholder: { ...INDIVIDUAL } });
    const theirs = await create(await other.key());
    expect(theirs.status).toBe(201);
    const theirCh = cardholderOfCard(theirs.body.id);
    expect(theirCh.id).not.toBe(ch.id);
    expect(theirCh).toMatchObject({
      type: "individual",
      name: "Mary Ann Smith",
      individual: { first_name: "Mary Ann", last_name: "Smith" },
      requirements: { disabled_reason: null, past_due: [] },
      billing: { address: { line1: "12 Rue de Rivoli", line2: null, state: null, city: "Paris", country: "FR" } },
      email: null,
      company: null,
    });
    const theirCall = fake.calls("/v1/issuing/cardholders", "POST").find((c) => c.params["metadata[account_id]"] === other.id)!;
    expect(Object.keys(theirCall.params).filter((k) => /^(company|email|phone_number|billing\[address\]\[(line2|state)\])/.test(k))).toEqual([]);
  });

  it("changed details reach Stripe on the next card: an update of the same cardholder, under a key of the new version", async () => {
    const account = await s.newAccount({ cardholder: COMPANY });
    const key = await account.key();
    const first = (await create(key)).body;
    const ch = cardholderOfCard(first.id);
    const oldVersion = ch.metadata.details_version;
    const moved = { ...COMPANY, email: "ap@globex.example", billing: { ...COMPANY.billing, line1: "1 Pine Street", line2: "Floor 3", postal_code: "97204" } };
    await s.admin("POST", `/accounts/${account.id}/cardholder`, moved);
    const n = fake.requests.length;
    const second = await create(key);
    expect(second.status).toBe(201);
    const calls = since(n);
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual([
      "POST /v1/payment_intents",
      `GET /v1/issuing/cardholders/${ch.id}`,
      `POST /v1/issuing/cardholders/${ch.id}`,
      "POST /v1/issuing/cards",
    ]);
    const update = calls[2]!;
    expect(update.params).not.toHaveProperty("name");
    expect(update.params).not.toHaveProperty("type");
    expect(update.params).toMatchObject({ email: "ap@globex.example", "billing[address][line1]": "1 Pine Street", "company[tax_id]": "98-7654321" });
    expect(update.idempotencyKey).toBe(`${account.id}:test:cardholder:${update.params["metadata[details_version]"]}:update`);
    expect(update.params["metadata[details_version]"]).not.toBe(oldVersion);
    expect(cardholderOfCard(second.body.id).id).toBe(ch.id);
    expect(fake.cardholders.get(ch.id)).toMatchObject({ email: "ap@globex.example", billing: { address: { line1: "1 Pine Street", line2: "Floor 3", postal_code: "97204" } } });
    // Unchanged since: the next card only reads the cardholder.
    const m = fake.requests.length;
    expect((await create(key)).status).toBe(201);
    expect(since(m).map((c) => `${c.method} ${c.path}`)).toEqual(["POST /v1/payment_intents", `GET /v1/issuing/cardholders/${ch.id}`, "POST /v1/issuing/cards"]);
  });

  it("a new name or type, or a dropped field, makes a new cardholder (Stripe cannot change them); older cards keep theirs", async () => {
    const account = await s.newAccount({ cardholder: COMPANY });
    const key = await account.key();
    const first = (await create(key)).body;
    const old = cardholderOfCard(first.id);

    await s.admin("POST", `/accounts/${account.id}/cardholder`, { ...COMPANY, name: "Globex Holdings" });
    const renamed = (await create(key)).body;
    const second = cardholderOfCard(renamed.id);
    expect(second.id).not.toBe(old.id);
    expect(second.name).toBe("Globex Holdings");
    expect(cardholderOfCard(first.id).id).toBe(old.id);
    expect((await s.query("SELECT cardholder_id FROM stripe_accounts WHERE account_id = ?", [account.id]))[0].cardholder_id).toBe(second.id);

    // Dropping the email: an update cannot clear it, so a new cardholder without one.
    const { email: _e, ...noEmail } = { ...COMPANY, name: "Globex Holdings" };
    await s.admin("POST", `/accounts/${account.id}/cardholder`, noEmail);
    const third = cardholderOfCard((await create(key)).body.id);
    expect(third.id).not.toBe(second.id);
    expect(third.email).toBeNull();

    // Company → individual.
    await s.admin("POST", `/accounts/${account.id}/cardholder`, INDIVIDUAL);
    const fourth = cardholderOfCard((await create(key)).body.id);
    expect(fourth).toMatchObject({ type: "individual", name: "Mary Ann Smith", individual: { first_name: "Mary Ann", last_name: "Smith" } });
  });

  it("setting A, B, then A again ends at A: every set is a new version, never a replayed key", async () => {
    const account = await s.newAccount({ cardholder: COMPANY });
    const key = await account.key();
    const ch = cardholderOfCard((await create(key)).body.id);
    const b = { ...COMPANY, billing: { ...COMPANY.billing, city: "Salem", postal_code: "97301" } };
    for (const details of [b, COMPANY, b, COMPANY]) {
      await s.admin("POST", `/accounts/${account.id}/cardholder`, details);
      expect((await create(key)).status).toBe(201);
      expect(fake.cardholders.get(ch.id)!.billing!.address!.city).toBe(details.billing.city);
    }
    const updates = fake.calls(`/v1/issuing/cardholders/${ch.id}`, "POST");
    expect(updates).toHaveLength(4);
    expect(new Set(updates.map((u) => u.idempotencyKey)).size).toBe(4);
    expect(updates.every((u) => !u.replayed)).toBe(true);
  });

  describe("a cardholder Stripe will not issue to → 403 setup_required with cardholder missing, nothing held", () => {
    const states: [string, Parameters<FakeStripe["setCardholderState"]>[1], RegExp][] = [
      ["deactivated (status inactive)", { status: "inactive" }, /status at Stripe is 'inactive'/],
      ["blocked", { status: "blocked" }, /'blocked'/],
      ["disabled (requirements.disabled_reason)", { disabled_reason: "under_review" }, /disabled_reason 'under_review'/],
      [
        "requirements past due",
        { disabled_reason: "requirements.past_due", past_due: ["company.tax_id"] },
        /Stripe needs company\.tax_id \(requirements\.past_due\)/,
      ],
      ["past due without being disabled yet", { past_due: ["individual.dob.day", "individual.dob.month"] }, /individual\.dob\.day, individual\.dob\.month/],
    ];
    for (const [name, state, message] of states)
      it(name, async () => {
        const account = await s.newAccount({ cardholder: COMPANY });
        const key = await account.key();
        const ok = (await create(key)).body;
        const ch = cardholderOfCard(ok.id);
        fake.setCardholderState(ch.id, state);
        const before = fake.cards.size;
        const err = expectError(await create(key, 700), 403, "setup_required");
        expect(err.details).toEqual({ missing: ["cardholder"], setup_url: "http://cardctl.test/setup" });
        expect(err.message).toMatch(message);
        expect(err.message).toContain(ch.id);
        // No card was made, and the hold placed before the check was cancelled.
        expect(fake.cards.size).toBe(before);
        const customer = await customerOf(account.id);
        const intents = [...fake.paymentIntents.values()].filter((pi) => pi.customer === customer);
        expect(intents.map((pi) => pi.status).sort()).toEqual(["canceled", "requires_capture"]);
        expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 900, open_cards: 1 });
        expect((await s.request("GET", "/v1/cards", { key })).body.data.map((c: any) => c.id)).toEqual([ok.id]);

        // Once Stripe is satisfied again, cards issue.
        fake.setCardholderState(ch.id, { status: "active", disabled_reason: null, past_due: [] });
        expect((await create(key, 700)).status).toBe(201);
      });

    it("an individual Stripe needs names for gets them from the name (first words, last word)", async () => {
      const account = await s.newAccount({ cardholder: { ...INDIVIDUAL, name: "Jean Luc Picard" } });
      const card = await create(await account.key());
      expect(card.status).toBe(201);
      expect(cardholderOfCard(card.body.id)).toMatchObject({ individual: { first_name: "Jean Luc", last_name: "Picard" }, requirements: { past_due: [] } });
    });

    it("a cardholder Stripe disables as it makes it: the account's first card is refused too", async () => {
      const account = await s.newAccount({ cardholder: COMPANY });
      const key = await account.key();
      fake.newCardholderState = { disabled_reason: "requirements.past_due", past_due: ["company.tax_id"] };
      try {
        const n = fake.requests.length;
        const err = expectError(await create(key), 403, "setup_required");
        expect(err.details.missing).toEqual(["cardholder"]);
        expect(err.message).toMatch(/company\.tax_id/);
        expect(since(n).filter((r) => r.path === "/v1/issuing/cardholders")).toHaveLength(1);
        expect(since(n).some((r) => r.path === "/v1/issuing/cards")).toBe(false);
        await expectNothingAtStripe(account.id);
        expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 0, open_cards: 0 });
      } finally {
        fake.newCardholderState = null;
      }
      // Stripe's verdict is read again on every card: no cached refusal.
      const [row] = await s.query("SELECT cardholder_id FROM stripe_accounts WHERE account_id = ?", [account.id]);
      fake.setCardholderState(row.cardholder_id, { disabled_reason: null, past_due: [] });
      expect((await create(key)).status).toBe(201);
    });
  });

  it("details Stripe refuses (a 400 about a parameter): 403 setup_required naming Stripe's complaint, not a 502; nothing left at Stripe", async () => {
    const account = await s.newAccount({ cardholder: COMPANY });
    const key = await account.key();
    const complaint = { type: "invalid_request_error" as const, param: "name", message: "The name cannot contain special characters." };
    fake.fail("issuing.cardholders.create", { kind: "error", status: 400, error: complaint });
    const err = expectError(await create(key), 403, "setup_required");
    expect(err.details.missing).toEqual(["cardholder"]);
    expect(err.message).toContain("Stripe refused the cardholder's details (name): The name cannot contain special characters.");
    expect(err.message).toContain("/admin/v1/accounts/:id/cardholder");
    await expectNothingAtStripe(account.id);
    expect((await create(key)).status).toBe(201);
  });

  it("a card minted under a cardholder replaced since (its answer lost) is still found by recovery, and revoked", async () => {
    const account = await s.newAccount({ cardholder: COMPANY });
    const key = await account.key();
    expect((await create(key)).status).toBe(201);
    // The mint is made at Stripe but its answer is lost, and the failing request's own lookup fails too.
    fake.fail("issuing.cards.create", faults.hangAfter());
    fake.fail("issuing.cards.list", faults.serverError(), 2);
    const lost = await create(key, 700);
    expect(lost.status).toBe(502);
    fake.clearFaults();
    const [failed] = await s.query("SELECT id, revoked_at FROM cards WHERE account_id = ? AND status = 'FAILED'", [account.id]);
    expect(failed!.revoked_at).toBeNull();
    const issued = [...fake.cards.values()].find((c) => c.metadata.card_id === failed!.id)!;
    expect(issued.status).toBe("active");
    // As if an instance of the older version had made the cardholder: not in the record of cardholders.
    await s.query("DELETE FROM stripe_cardholders WHERE account_id = ?", [account.id]);
    // A new name makes a new cardholder (the next card's) before the recovery pass looks.
    await s.admin("POST", `/accounts/${account.id}/cardholder`, { ...COMPANY, name: "Acme Robotics West" });
    expect((await create(key, 800)).status).toBe(201);
    const replaced = cardholderOfCard(issued.metadata.card_id!).id;
    const current = (await s.query("SELECT cardholder_id FROM stripe_accounts WHERE account_id = ?", [account.id]))[0]!.cardholder_id;
    expect(replaced).not.toBe(current);
    await s.query("UPDATE cards SET recovery_next_at = ? WHERE id = ?", [Date.now() - 1, failed!.id]);
    const n = fake.requests.length;
    await s.app.services.maintenance.run();
    // The replaced cardholder was recorded when it was replaced: both cardholders' cards are read, no other.
    const lists = fake.requests.slice(n).filter((r) => r.route === "issuing.cards.list");
    expect(lists.map((r) => r.params.cardholder).sort()).toEqual([replaced, current].sort());
    expect(fake.cards.get(issued.id)!.status).toBe("canceled");
    const [after] = await s.query("SELECT processor_card_id, revoked_at FROM cards WHERE id = ?", [failed!.id]);
    expect(after).toMatchObject({ processor_card_id: issued.id });
    expect(after!.revoked_at).not.toBeNull();
  });

  it("a cardholder update that fails: 502 at mint, the hold cancelled; the next card finishes the update", async () => {
    const account = await s.newAccount({ cardholder: COMPANY });
    const key = await account.key();
    const ch = cardholderOfCard((await create(key)).body.id);
    await s.admin("POST", `/accounts/${account.id}/cardholder`, { ...COMPANY, phone_number: "+1 503 555 0199" });
    fake.fail("issuing.cardholders.update", faults.serverError(), 2); // a 5xx is read past once, then retried once
    const err = expectError(await create(key, 700), 502, "processor_error");
    expect(err.details).toMatchObject({ step: "mint" });
    const customer = await customerOf(account.id);
    expect([...fake.paymentIntents.values()].filter((pi) => pi.customer === customer && pi.status === "requires_capture")).toHaveLength(1);
    expect((await create(key, 700)).status).toBe(201);
    expect(fake.cardholders.get(ch.id)!.phone_number).toBe("+1 503 555 0199");
  });

  it("the first-start demo account has a test-mode cardholder of its own on Stripe, and issues", async () => {
    const demo = (await s.admin("GET", `/accounts/${s.accountId}`)).body;
    expect(demo.cardholder).toMatchObject({ type: "company", name: "Cardctl Demo", tax_id_last4: null });
    const card = await s.request("POST", "/v1/cards", { body: { amount_cents: 400 } });
    expect(card.status).toBe(201);
    expect(cardholderOfCard(card.body.id)).toMatchObject({ name: "Cardctl Demo", metadata: { account_id: s.accountId } });
  });

  it("the harness's accounts on Stripe get TEST_CARDHOLDER", async () => {
    const account = await s.newAccount();
    expect((await s.admin("GET", `/accounts/${account.id}`)).body.cardholder).toMatchObject({ name: TEST_CARDHOLDER.name, tax_id_last4: "6789" });
  });
});
