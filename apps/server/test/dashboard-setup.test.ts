import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BASE_CSP, expectNotStored, haveChromium, openDashboard, ownServer, PASSWORD, STRIPE_CSP, type Dashboard } from "./browser.js";
import { luhnValid, startFakeStripe, type FakeStripe } from "./fake-stripe.js";
import { dbKind, expectError, type TestServer } from "./harness.js";
import { trpc } from "./helpers.js";
import { ConfigError, loadConfig } from "../src/config.js";

/**
 * Issue 17: the dashboard's Setup page, where every 403 setup_required's `setup_url` leads (the
 * owner sees KYB, the cardholder and the payment method per mode, and adds the payment method: a
 * test card on the simulated processor, Stripe's Payment Element on Stripe), and a card's Reveal
 * on the Cards page (the number straight from the processor, with the card's ephemeral key).
 *
 * The browser cannot reach js.stripe.com here, so on Stripe the browser checks only that the pages
 * say so clearly; the Stripe procedures (SetupIntent, complete, the reveal's nonce) are checked
 * against the fake Stripe API, and the CSP for Stripe.js on the headers.
 */
const HTML = { accept: "text/html,application/xhtml+xml,*/*;q=0.8" };

/** An owner of `accountId` signed in over HTTP, as the dashboard's page makes its calls (origin, cookie, CSRF token). */
async function ownerSession(s: TestServer, accountId: string, email: string) {
  const origin = new URL(s.url).origin;
  const { invite_url } = (await s.admin("POST", `/accounts/${accountId}/owners`, { email })).body;
  const token = String(invite_url).split("#")[1]!;
  const r = await s.request("POST", "/auth/invites/accept", { key: null, headers: { origin }, body: { token, password: PASSWORD } });
  expect(r.status).toBe(200);
  const cookie = /^(cardctl_session=[^;]+)/.exec(r.headers.get("set-cookie") ?? "")![1]!;
  const o = { key: null, headers: { origin, cookie, "x-csrf-token": r.body.csrf_token as string } };
  const t = trpc(s);
  return {
    owner: r.body.owner as { id: string },
    query: (proc: string, input?: unknown) => t.query(proc, input, o),
    mutation: (proc: string, input?: unknown) => t.mutation(proc, input ?? {}, o),
  };
}

describe(`the Setup page and a card's reveal, simulated processor (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await ownServer({ PROCESSOR: "simulated" });
  });
  afterAll(() => s?.close());

  it("/setup answers the dashboard with the strict CSP for a browser (no Stripe host), JSON for other clients", async () => {
    const page = await fetch(`${s.url}/setup`, { headers: HTML });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toBe(BASE_CSP);
    expect(await page.text()).toContain('<div id="root">');
    for (const path of ["/", "/cards"]) expect((await fetch(`${s.url}${path}`)).headers.get("content-security-policy"), path).toBe(BASE_CSP);
    const json = await fetch(`${s.url}/setup`, { headers: { accept: "application/json" } });
    expect(json.headers.get("content-type")).toMatch(/^application\/json/);
    expect((await json.json()).steps.map((st: { id: string }) => st.id)).toEqual(["kyb", "payment_method", "cardholder"]);
  });

  it("the Setup procedures are the owner's: API keys, even full ones, get 403", async () => {
    const key = await (await s.newAccount()).key("test", "full");
    const t = trpc(s);
    expectError(await t.query("setup.status", undefined, { key }), 403, "forbidden");
    expectError(await t.mutation("setup.saveTestCard", { payment_method: "pm_card_visa" }, { key }), 403, "forbidden");
    expectError(await t.mutation("setup.createSetupIntent", {}, { key }), 403, "forbidden");
    expectError(await t.mutation("setup.complete", { setup_intent: "seti_x" }, { key }), 403, "forbidden");
  });

  it("a test card is one of the simulated processor's; Stripe's form is not offered here", async () => {
    const account = await s.newAccount({ paymentMethod: null });
    const o = await ownerSession(s, account.id, "picky@setup.example");
    expectError(await o.mutation("setup.saveTestCard", { payment_method: "pm_anything_else" }), 400, "validation_error");
    expectError(await o.mutation("setup.createSetupIntent"), 400, "bad_request");
    expect((await s.admin("GET", `/accounts/${account.id}`)).body.payment_method).toBeNull();
    const status = (await o.query("setup.status")).body.result.data;
    expect(status).toMatchObject({
      account_id: account.id,
      mode: "test",
      setup_complete: false,
      missing: ["payment_method"],
      kyb_verified: true,
      cardholder: { needed: false, set: false },
      payment_method: null,
      collect: "test_cards",
      stripe_publishable_key: null,
      modes: [
        { mode: "test", processor: "simulated", missing: ["payment_method"] },
        { mode: "live", processor: null, missing: ["payment_method"] },
      ],
    });
  });

  describe.skipIf(!haveChromium)("in a browser", () => {
    let d: Dashboard;
    let page: Dashboard["page"];
    let account: { id: string };
    let key: string;
    let card: { id: string; last_four: string };
    const email = "founder@setup.example";
    /** Every /trpc answer the page received: the card number must be in none. */
    const trpcBodies: string[] = [];
    const step = (name: RegExp) => page.getByRole("listitem", { name });
    const shoot = (name: string) => d.shoot(name);

    beforeAll(async () => {
      d = await openDashboard(s);
      page = d.page;
      page.on("response", async (r) => {
        if (new URL(r.url()).pathname.startsWith("/trpc/")) trpcBodies.push(await r.text().catch(() => ""));
      });
    });
    afterAll(() => d?.close());

    it("finish setup for a new account: setup_url opens Setup, the owner picks the test card, and cards can be made", async () => {
      // The operator makes the account and records its KYB; no payment method yet.
      account = (await s.admin("POST", "/accounts", { name: "Setup Co" })).body;
      expect((await s.admin("POST", `/accounts/${account.id}/kyb`, { verified: true })).status).toBe(200);
      key = (await s.admin("POST", `/accounts/${account.id}/keys`, { mode: "test", role: "full" })).body.secret;
      const denied = expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 1500, agent_id: "setup", purpose: "First" } }), 403, "setup_required");
      expect(denied.details.missing).toEqual(["payment_method"]);
      const setupUrl = denied.details.setup_url as string;
      expect(setupUrl).toBe(`${s.url}/setup`);

      // The owner signs in through the invite; signed out, setup_url leads to sign-in and back to Setup.
      await d.signInByInvite(account.id, email);
      await page.getByRole("button", { name: "Sign out" }).click();
      await page.getByRole("heading", { name: "Sign in to cardctl" }).waitFor();
      await page.goto(setupUrl);
      await page.getByRole("heading", { name: "Sign in to cardctl" }).waitFor();
      expect(new URL(page.url()).pathname).toBe("/sign-in");
      await page.getByLabel("Email").fill(email);
      await page.getByLabel("Password").fill(PASSWORD);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("heading", { name: "Setup" }).waitFor();
      expect(new URL(page.url()).pathname).toBe("/setup");
      expect(await page.getByRole("link", { name: "Setup" }).getAttribute("aria-current")).toBe("page");

      // What is there and what is missing; KYB is the operator's.
      await page.getByText("Not finished: a payment method still missing in test mode.").waitFor();
      await step(/^Business verification \(KYB\): Verified$/).getByText("Set by the operator").waitFor();
      await step(/^Payment method: Missing$/).waitFor();
      expect(await page.getByRole("listitem", { name: /^Cardholder/ }).count()).toBe(0);
      const byMode = page.getByRole("list", { name: "Payment method by mode" });
      await byMode.getByText("Test mode: simulated processor, no payment method yet").waitFor();
      await byMode.getByText("Live mode: no card processor on this server").waitFor();
      await shoot("setup");

      // The owner picks the test card that succeeds.
      await page.getByLabel(/Visa test card ending 4242/).check();
      await page.getByRole("button", { name: "Save test card" }).click();
      await page.getByText("Setup complete: agents can get cards in test mode.").waitFor();
      await step(/^Payment method: Saved$/).getByText("pm_card_visa").waitFor();
      await byMode.getByText("Test mode: simulated processor, payment method saved · ready for cards").waitFor();
      await shoot("setup-complete");

      // Really saved, as the operator's route saves it: the API now issues cards.
      expect((await s.admin("GET", `/accounts/${account.id}`)).body.payment_method).toBe("pm_card_visa");
      expect((await s.request("GET", "/v1/balance", { key })).body.setup_complete).toBe(true);
      const created = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 1500, agent_id: "setup", purpose: "First" } });
      expect(created.status).toBe(201);
      card = created.body;
    });

    it("the declining test card: the page saves it, and the processor declines the next card's hold", async () => {
      await page.getByLabel(/Declining test card/).check();
      await page.getByRole("button", { name: "Save test card" }).click();
      await step(/^Payment method: Saved$/).getByText("pm_card_decline").waitFor();
      expect((await s.admin("GET", `/accounts/${account.id}`)).body.payment_method).toBe("pm_card_decline");
      const declined = expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900, agent_id: "setup" } }), 402, "payment_method_declined");
      expect(declined.details).toEqual({ decline_code: "card_declined" });
      // Back to the card that works.
      await page.getByLabel(/Visa test card ending 4242/).check();
      await page.getByRole("button", { name: "Save test card" }).click();
      await step(/^Payment method: Saved$/).getByText("pm_card_visa").waitFor();
      expect((await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900, agent_id: "setup" } })).status).toBe(201);
    });

    it("the operator's KYB change shows on Setup at once: its account.kyb_updated event refreshes the page", async () => {
      await step(/^Business verification \(KYB\): Verified$/).waitFor();
      expect((await s.admin("POST", `/accounts/${account.id}/kyb`, { verified: false })).status).toBe(200);
      await step(/^Business verification \(KYB\): Not verified$/).waitFor();
      await page.getByText(/^Not finished: business verification \(KYB\) still missing/).waitFor();
      expect((await s.admin("POST", `/accounts/${account.id}/kyb`, { verified: true })).status).toBe(200);
      await page.getByText("Setup complete: agents can get cards in test mode.").waitFor();
    });

    it("Reveal shows the card's number, CVC and expiry from the processor, never through /trpc, and Hide removes them", async () => {
      const [row] = await s.query("SELECT number, cvc, exp_month, exp_year FROM sim_cards WHERE card_ref = ?", [card.id]);
      const number = String(row.number);
      await page.getByRole("link", { name: "Cards" }).click();
      const item = page.getByRole("listitem", { name: `Card ending ${card.last_four}` });
      await item.getByRole("button", { name: "Details" }).click();
      await item.getByRole("button", { name: "Reveal" }).click();
      const shown = item.getByLabel("Card number");
      await shown.waitFor();
      const digits = (await shown.textContent())!.replace(/\s/g, "");
      expect(digits).toBe(number);
      expect(luhnValid(digits)).toBe(true);
      expect(digits.slice(-4)).toBe(card.last_four);
      expect(await item.getByLabel("CVC").textContent()).toBe(String(row.cvc));
      expect(await item.getByLabel("Expiry").textContent()).toBe(`${String(row.exp_month).padStart(2, "0")}/${String(Number(row.exp_year) % 100).padStart(2, "0")}`);
      await shoot("card-revealed");

      // Straight from the processor: no /trpc answer carried it, and the browser keeps it nowhere.
      expect(trpcBodies.length).toBeGreaterThan(0);
      for (const body of trpcBodies) expect(body).not.toContain(number);
      await expectNotStored(page, number);

      await item.getByRole("button", { name: "Hide", exact: true }).click();
      await item.getByRole("button", { name: "Reveal" }).waitFor();
      expect(await page.content()).not.toContain(number.slice(0, 12));
      expect(await item.getByLabel("Card number").count()).toBe(0);
    });

    it("loaded nothing the CSP blocked and threw no error", () => {
      expect(d.problems).toEqual([]);
    });
  });
});

describe(`the Setup page on Stripe, against the fake Stripe API (${dbKind})`, () => {
  let fake: FakeStripe;
  let s: TestServer;
  beforeAll(async () => {
    fake = await startFakeStripe("sk_test_fake");
    s = await ownServer({
      PROCESSOR: "stripe",
      STRIPE_TEST_SECRET_KEY: "sk_test_fake",
      STRIPE_TEST_PUBLISHABLE_KEY: "pk_test_fake0123456789",
      STRIPE_API_BASE: fake.url,
    });
  });
  afterAll(async () => {
    await s?.close();
    await fake?.close();
  });

  /** The account's Customer at Stripe (test mode). */
  const customerOf = async (accountId: string) =>
    (await s.query("SELECT customer_id FROM stripe_accounts WHERE account_id = ? AND mode = 'test'", [accountId]))[0]?.customer_id as string | undefined;

  it("the dashboard's CSP allows Stripe.js (js.stripe.com, its frames, api.stripe.com) when Stripe is configured", async () => {
    for (const path of ["/", "/cards", "/sign-in"]) expect((await fetch(`${s.url}${path}`)).headers.get("content-security-policy"), path).toBe(STRIPE_CSP);
    expect((await fetch(`${s.url}/setup`, { headers: HTML })).headers.get("content-security-policy")).toBe(STRIPE_CSP);
  });

  it("setup.createSetupIntent: a SetupIntent for the account's Customer, card only, off-session; the same one until a card is saved", async () => {
    const account = await s.newAccount({ paymentMethod: null });
    const o = await ownerSession(s, account.id, "stripe-owner@setup.example");
    const status = (await o.query("setup.status")).body.result.data;
    expect(status).toMatchObject({
      setup_complete: false,
      missing: ["payment_method"],
      cardholder: { needed: true, set: true, name: "Acme Robotics", type: "company" },
      collect: "stripe",
      stripe_publishable_key: "pk_test_fake0123456789",
      modes: [
        { mode: "test", processor: "stripe", missing: ["payment_method"] },
        { mode: "live", processor: null, missing: ["payment_method"] },
      ],
    });
    // Test cards are the simulated processor's.
    expectError(await o.mutation("setup.saveTestCard", { payment_method: "pm_card_visa" }), 400, "bad_request");

    const n = fake.requests.length;
    const first = await o.mutation("setup.createSetupIntent");
    expect(first.status).toBe(200);
    const intent = first.body.result.data as { setup_intent: string; client_secret: string; publishable_key: string };
    expect(intent.setup_intent).toMatch(/^seti_/);
    expect(intent.client_secret).toBe(fake.setupIntents.get(intent.setup_intent)!.client_secret);
    expect(intent.publishable_key).toBe("pk_test_fake0123456789");
    const customer = await customerOf(account.id);
    expect(customer).toMatch(/^cus_/);
    const created = fake.calls("/v1/setup_intents", "POST").filter((r) => fake.requests.indexOf(r) >= n);
    expect(created).toHaveLength(1);
    expect(created[0]!.params).toMatchObject({
      customer,
      "allowed_payment_method_types[0]": "card",
      usage: "off_session",
      "metadata[account_id]": account.id,
      "metadata[mode]": "test",
    });
    expect(created[0]!.idempotencyKey).toBe(`${account.id}:test:setup_intent:none`);
    // Again (a reload): the same intent, and the Customer is not made twice.
    const again = (await o.mutation("setup.createSetupIntent")).body.result.data;
    expect(again.setup_intent).toBe(intent.setup_intent);
    expect(fake.calls("/v1/customers", "POST").filter((r) => r.params["metadata[account_id]"] === account.id)).toHaveLength(1);
  });

  it("setup.complete saves the payment method only from this account's succeeded SetupIntent; then cards are made on it", async () => {
    const account = await s.newAccount({ paymentMethod: null });
    const other = await s.newAccount({ paymentMethod: null });
    const o = await ownerSession(s, account.id, "completer@setup.example");
    const theirs = await ownerSession(s, other.id, "other@setup.example");
    const mine = (await o.mutation("setup.createSetupIntent")).body.result.data.setup_intent as string;
    const foreign = (await theirs.mutation("setup.createSetupIntent")).body.result.data.setup_intent as string;
    const saved = async () => (await s.admin("GET", `/accounts/${account.id}`)).body.payment_method;

    // Not confirmed in the browser yet: refused, nothing saved.
    const unconfirmed = expectError(await o.mutation("setup.complete", { setup_intent: mine }), 409, "setup_intent_not_succeeded");
    expect(unconfirmed.details).toEqual({ status: "requires_payment_method" });
    // Another account's intent, even succeeded, and one Stripe does not know: not found for this account.
    fake.confirmSetupIntent(foreign, "pm_card_visa");
    expectError(await o.mutation("setup.complete", { setup_intent: foreign }), 404, "not_found");
    expectError(await o.mutation("setup.complete", { setup_intent: "seti_doesnotexist" }), 404, "not_found");
    expectError(await o.mutation("setup.complete", { setup_intent: "pi_notasetupintent" }), 404, "not_found");
    // A card the bank refused in the browser leaves the intent asking for another.
    fake.confirmSetupIntent(mine, "pm_card_visa", { fail: true });
    expectError(await o.mutation("setup.complete", { setup_intent: mine }), 409, "setup_intent_not_succeeded");
    expect(await saved()).toBeNull();
    expect((await s.admin("GET", `/accounts/${other.id}`)).body.payment_method).toBeNull();

    // Confirmed: the intent's payment method (read from Stripe) is saved, already attached to the Customer.
    const pm = fake.confirmSetupIntent(mine, "pm_card_visa").payment_method as string;
    const attachesBefore = fake.calls(/\/attach$/).length;
    const done = await o.mutation("setup.complete", { setup_intent: mine });
    expect(done.status).toBe(200);
    expect(done.body.result.data).toMatchObject({ setup_complete: true, missing: [], payment_method: pm });
    expect(await saved()).toBe(pm);
    expect(fake.calls(/\/attach$/).length).toBe(attachesBefore);
    const key = await account.key();
    // The owner's change is an event, in each mode (one payment method for both); the refused attempts wrote none.
    const changes = async (k: string) => (await s.request("GET", "/v1/events?type=account.payment_method_updated", { key: k })).body.data as any[];
    const [changed] = await changes(key);
    expect(await changes(key)).toHaveLength(1);
    expect(changed).toMatchObject({ mode: "test", actor: { type: "owner", id: o.owner.id } });
    expect(changed.data.object).toEqual(done.body.result.data);
    expect(JSON.stringify(changed)).not.toMatch(/_secret_|sk_test|tax_id/);
    expect(await changes(await account.key("live"))).toMatchObject([{ mode: "live", actor: { type: "owner", id: o.owner.id }, data: { object: { mode: "live", payment_method: pm } } }]);
    const card = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 2500, agent_id: "stripe-setup" } });
    expect(card.status).toBe(201);
    const hold = [...fake.paymentIntents.values()].find((pi) => pi.metadata?.card_id === card.body.id)!;
    expect(hold).toMatchObject({ payment_method: pm, customer: await customerOf(account.id), status: "requires_capture" });
    // With a card saved, the form starts a new intent (to replace it).
    const next = (await o.mutation("setup.createSetupIntent")).body.result.data.setup_intent;
    expect(next).not.toBe(mine);

    // A card Stripe declines off-session: saved, and the next card's hold is declined.
    fake.confirmSetupIntent(next, "pm_card_visa_chargeDeclined");
    expect((await o.mutation("setup.complete", { setup_intent: next })).status).toBe(200);
    expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 700, agent_id: "stripe-setup" } }), 402, "payment_method_declined");
  });

  it("a card's reveal on Stripe: cards.get with Stripe.js's nonce makes the ephemeral key for it (Issuing Elements)", async () => {
    const account = await s.newAccount();
    const o = await ownerSession(s, account.id, "revealer@setup.example");
    const card = (await s.request("POST", "/v1/cards", { key: await account.key(), body: { amount_cents: 1200, agent_id: "reveal" } })).body;
    const nonce = "ephkn_pub_fakeNonce0123456789";
    const got = await o.query("cards.get", { id: card.id, nonce });
    expect(got.status).toBe(200);
    const detail = got.body.result.data;
    expect(detail.ephemeral_key_secret).toMatch(/^ek_test_/);
    expect(fake.ephemeralKeyGrants.get(detail.ephemeral_key_secret)).toEqual({ cardId: detail.processor_card_id, apiVersion: "2020-03-02", nonce });
    expect(JSON.stringify(got.body)).not.toContain(fake.cardSecrets.get(detail.processor_card_id)!.number);
  });

  it("STRIPE_*_PUBLISHABLE_KEY: a pk_ key of its own mode, or the server does not start", () => {
    expect(loadConfig({ STRIPE_TEST_PUBLISHABLE_KEY: "pk_test_abc123", STRIPE_LIVE_PUBLISHABLE_KEY: "pk_live_abc123" }, false)).toMatchObject({
      stripeTestPublishableKey: "pk_test_abc123",
      stripeLivePublishableKey: "pk_live_abc123",
    });
    for (const [name, value] of [
      ["STRIPE_TEST_PUBLISHABLE_KEY", "sk_test_secretkey"],
      ["STRIPE_TEST_PUBLISHABLE_KEY", "pk_live_abc123"],
      ["STRIPE_LIVE_PUBLISHABLE_KEY", "pk_test_abc123"],
    ] as const) {
      expect(() => loadConfig({ [name]: value }, false), `${name}=${value}`).toThrow(ConfigError);
      // The refusal never prints a whole secret key pasted by mistake.
      expect(() => loadConfig({ [name]: value }, false)).not.toThrow(value);
    }
  });

  it("without the publishable key, the card form is refused with what to set", async () => {
    const bare = await ownServer({ PROCESSOR: "stripe", STRIPE_TEST_SECRET_KEY: "sk_test_fake", STRIPE_API_BASE: fake.url });
    try {
      const account = await bare.newAccount({ paymentMethod: null });
      const o = await ownerSession(bare, account.id, "nokey@setup.example");
      expect((await o.query("setup.status")).body.result.data).toMatchObject({ collect: "stripe", stripe_publishable_key: null });
      const refused = expectError(await o.mutation("setup.createSetupIntent"), 503, "processor_not_configured");
      expect(refused.message).toContain("STRIPE_TEST_PUBLISHABLE_KEY");
    } finally {
      await bare.close();
    }
  });

  describe.skipIf(!haveChromium)("in a browser that cannot reach js.stripe.com", () => {
    let d: Dashboard;
    beforeAll(async () => {
      d = await openDashboard(s);
      // No internet here: make it fail at once rather than wait for DNS.
      await d.context.route("https://js.stripe.com/**", (route) => route.abort("internetdisconnected"));
    });
    afterAll(() => d?.close());

    it("Setup and Reveal say clearly that Stripe's form could not be loaded; nothing else goes wrong", async () => {
      const account = await s.newAccount({ paymentMethod: null });
      await d.signInByInvite(account.id, "offline@setup.example");
      const page = d.page;
      await page.getByRole("link", { name: "Setup" }).click();
      await page.getByRole("heading", { name: "Setup" }).waitFor();
      await page.getByRole("listitem", { name: /^Cardholder on Stripe: Set$/ }).waitFor();
      await page.getByRole("button", { name: "Add card" }).click();
      await page.getByRole("alert").filter({ hasText: "could not be loaded from js.stripe.com" }).waitFor();
      await page.getByRole("button", { name: "Add card" }).waitFor();
      await d.shoot("setup-stripe-unavailable");
      // Stripe.js first: no SetupIntent was made for a form that could not show.
      expect([...fake.setupIntents.values()].filter((si) => si.metadata?.account_id === account.id)).toHaveLength(0);

      // A card (saved by the operator) and its Reveal.
      await s.admin("POST", `/accounts/${account.id}/payment_method`, { payment_method: "pm_card_visa" });
      const card = (await s.request("POST", "/v1/cards", { key: await account.key(), body: { amount_cents: 800, agent_id: "offline" } })).body;
      await page.getByRole("link", { name: "Cards" }).click();
      const item = page.getByRole("listitem", { name: `Card ending ${card.last_four}` });
      await item.getByRole("button", { name: "Details" }).click();
      await item.getByRole("button", { name: "Reveal" }).click();
      await item.getByRole("alert").filter({ hasText: "could not be loaded from js.stripe.com" }).waitFor();
      await item.getByRole("button", { name: "Reveal" }).waitFor();

      // The only console errors: the blocked loads of Stripe.js themselves (no CSP refusal, no exception).
      const others = d.problems.filter((p) => !/^Failed to load resource: net::ERR_INTERNET_DISCONNECTED$/.test(p));
      expect(d.problems.length).toBeGreaterThan(others.length);
      expect(others).toEqual([]);
    });
  });
});
