import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeStripe } from "../../../apps/server/test/fake-stripe.js";
import { ADMIN_TOKEN, startServer, type TestServer } from "../../../apps/server/test/harness.js";
import { run, tempConfigDir } from "./helpers.js";

let s: TestServer;
let env: Record<string, string>;
beforeAll(async () => {
  s = await startServer();
  env = { CARDCTL_BASE_URL: s.url, CARDCTL_ADMIN_TOKEN: ADMIN_TOKEN, CARDCTL_CONFIG_DIR: tempConfigDir() };
});
afterAll(async () => {
  await s?.close();
});

const CARDHOLDER_ARGS = [
  "--type", "company",
  "--name", "Acme Robotics",
  "--line1", "1 Main Street",
  "--line2", "Suite 2",
  "--city", "Springfield",
  "--state", "IL",
  "--postal-code", "62701",
  "--country", "us",
  "--email", "ops@acme.example",
  "--phone", "+1 217 555 0100",
  "--tax-id", "12-3456789",
];

describe("operator commands", () => {
  it("account set-up from scratch: setup_required until kyb and payment method, then a card", async () => {
    const created = await run(["accounts", "create", "--name", "Acme", "--json"], { env });
    expect(created.code, created.stderr).toBe(0);
    const acct = created.json();
    expect(acct).toMatchObject({ name: "Acme", kyb_verified: false, payment_method: null });
    expect(acct.id).toMatch(/^acct_/);

    const t = await run(["accounts", "get", acct.id], { env });
    expect(t.stdout).toMatch(new RegExp(`ID\\s+${acct.id}`));
    expect(t.stdout).toMatch(/KYB verified\s+no/);
    expect(t.stdout).toMatch(/Payment method\s+none/);

    const k = await run(["keys", "create", "--account", acct.id, "--name", "laptop"], { env });
    expect(k.code).toBe(0);
    expect(k.stdout).toContain("it is not shown again");
    const secret = /sk_test_\S+/.exec(k.stdout)![0];

    const blocked = await run(["cards", "create", "--amount", "5"], { env: { ...env, CARDCTL_API_KEY: secret } });
    expect(blocked.code).toBe(1);
    expect(blocked.stderr).toContain("setup_required");
    expect(blocked.stderr).toMatch(/Finish account setup at: http:\/\/cardctl\.test\//);

    expect((await run(["accounts", "verify-kyb", acct.id], { env })).stdout).toMatch(/KYB verified\s+yes/);
    const pm = await run(["accounts", "set-payment-method", acct.id, "pm_card_visa", "--json"], { env });
    expect(pm.json()).toMatchObject({ kyb_verified: true, payment_method: "pm_card_visa" });
    if (s.onStripe) await run(["accounts", "set-cardholder", acct.id, ...CARDHOLDER_ARGS], { env });

    const ok = await run(["cards", "create", "--amount", "5", "--json"], { env: { ...env, CARDCTL_API_KEY: secret } });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.json().status).toBe("OPEN");

    const removed = await run(["accounts", "set-payment-method", acct.id, "--remove", "--json"], { env });
    expect(removed.json().payment_method).toBeNull();
    expect((await run(["accounts", "set-payment-method", acct.id], { env })).code).toBe(2);
  });

  it("accounts set-cardholder: saved and shown (the tax id only by its last 4); get shows it; bad input exits 2 or 1", async () => {
    const acct = (await run(["accounts", "create", "--name", "Holder", "--json"], { env })).json();
    expect((await run(["accounts", "get", acct.id], { env })).stdout).toMatch(/Cardholder\s+none/);

    const set = await run(["accounts", "set-cardholder", acct.id, ...CARDHOLDER_ARGS], { env });
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toContain("Cardholder saved");
    expect(set.stdout).toMatch(/Cardholder\s+Acme Robotics \(company\)/);
    expect(set.stdout).toMatch(/Billing address\s+1 Main Street, Suite 2, Springfield, IL 62701, US/);
    expect(set.stdout).toMatch(/Email\s+ops@acme\.example/);
    expect(set.stdout).toMatch(/Phone\s+\+1 217 555 0100/);
    expect(set.stdout).toMatch(/Tax id\s+••••6789/);
    expect(set.stdout).not.toContain("3456789");

    const got = await run(["accounts", "get", acct.id], { env });
    expect(got.stdout).toMatch(/Cardholder\s+Acme Robotics \(company\)/);
    expect(got.stdout).not.toContain("3456789");
    const json = (await run(["accounts", "get", acct.id, "--json"], { env })).json();
    expect(json.cardholder).toMatchObject({
      type: "company",
      name: "Acme Robotics",
      billing: { line1: "1 Main Street", line2: "Suite 2", city: "Springfield", state: "IL", postal_code: "62701", country: "US" },
      tax_id_last4: "6789",
    });
    expect(JSON.stringify(json)).not.toContain("3456789");

    // An individual, only the required options: no tax id line, optional fields shown as -.
    const person = await run(
      ["accounts", "set-cardholder", acct.id, "--type", "individual", "--name", "Mary Ann Smith", "--line1", "12 Rue de Rivoli", "--city", "Paris", "--postal-code", "75001", "--country", "FR", "--json"],
      { env },
    );
    expect(person.json().cardholder).toMatchObject({ type: "individual", name: "Mary Ann Smith", email: null, tax_id_last4: null, billing: { line2: null, state: null } });

    // Usage errors (exit 2) before any call; the server's validation (exit 1) with its issues.
    expect((await run(["accounts", "set-cardholder", acct.id, ...CARDHOLDER_ARGS, "--type", "person"], { env })).code).toBe(2);
    const individualTax = await run(["accounts", "set-cardholder", acct.id, "--type", "individual", "--name", "Mary Smith", "--line1", "x", "--city", "y", "--postal-code", "1", "--country", "FR", "--tax-id", "12345"], { env });
    expect(individualTax.code).toBe(2);
    expect(individualTax.stderr).toContain("--tax-id");
    const noCity = await run(["accounts", "set-cardholder", acct.id, "--type", "company", "--name", "Acme", "--line1", "x", "--postal-code", "1", "--country", "US"], { env });
    expect(noCity.code).not.toBe(0);
    expect(noCity.stderr).toContain("--city");
    const bad = await run(["accounts", "set-cardholder", acct.id, ...CARDHOLDER_ARGS, "--name", "Acme 2000"], { env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("validation_error");
    expect(bad.stderr).toMatch(/Invalid request: --name must be letters/);
    // The API's fields are named as the flags typed.
    const badFields = await run(["accounts", "set-cardholder", acct.id, ...CARDHOLDER_ARGS, "--postal-code", "", "--phone", "abc"], { env });
    expect(badFields.code).toBe(1);
    expect(badFields.stderr).toContain("--postal-code must not be empty");
    expect(badFields.stderr).toMatch(/--phone must be a phone number/);
    expect(badFields.stderr).not.toMatch(/billing\.postal_code|phone_number/);
    expect((await run(["accounts", "set-cardholder", "acct_doesnotexist", ...CARDHOLDER_ARGS], { env })).code).toBe(1);
    // Nothing of the refused calls was saved.
    expect((await run(["accounts", "get", acct.id, "--json"], { env })).json().cardholder.name).toBe("Mary Ann Smith");
  });

  it("on Stripe: setup_required names the missing cardholder and the command; after set-cardholder cards issue", async () => {
    const fake = await startFakeStripe("sk_test_fake");
    const stripe = await startServer({ PROCESSOR: "stripe", STRIPE_TEST_SECRET_KEY: "sk_test_fake", STRIPE_API_BASE: fake.url });
    try {
      const senv = { ...env, CARDCTL_BASE_URL: stripe.url };
      const account = await stripe.newAccount({ cardholder: null });
      const key = await account.key();
      const blocked = await run(["cards", "create", "--amount", "5"], { env: { ...senv, CARDCTL_API_KEY: key } });
      expect(blocked.code).toBe(1);
      expect(blocked.stderr).toContain("setup_required");
      expect(blocked.stderr).toContain("cardctl accounts set-cardholder");
      expect((await run(["accounts", "set-cardholder", account.id, ...CARDHOLDER_ARGS], { env: senv })).code).toBe(0);
      const ok = await run(["cards", "create", "--amount", "5", "--json"], { env: { ...senv, CARDCTL_API_KEY: key } });
      expect(ok.code, ok.stderr).toBe(0);
      const ic = [...fake.cards.values()].find((c) => c.metadata.card_id === ok.json().id)!;
      expect(fake.cardholders.get(ic.cardholder.id)).toMatchObject({ name: "Acme Robotics", type: "company", company: { tax_id_provided: true } });
    } finally {
      await stripe.close();
      await fake.close();
    }
  });

  it("keys create (agent, --save-profile) / list / revoke; a revoked key exits 3", async () => {
    const acct = (await run(["accounts", "create", "--name", "Keys Inc", "--json"], { env })).json();
    const k = await run(["keys", "create", "--account", acct.id, "--role", "agent", "--save-profile", "agent1", "--json"], { env });
    expect(k.code).toBe(0);
    const key = k.json();
    expect(key).toMatchObject({ mode: "test", role: "agent" });
    expect(key.secret).toMatch(/^sk_test_/);

    const who = await run(["whoami", "--profile", "agent1", "--json"], { env: { ...env, CARDCTL_BASE_URL: undefined } });
    expect(who.json()).toMatchObject({ profile: "agent1", role: "agent", account: acct.id });

    // A base URL given with the API's /v1 (as the SDK accepts) reaches the operator API too.
    const withV1 = await run(["keys", "list", "--account", acct.id, "--json"], { env: { ...env, CARDCTL_BASE_URL: `${s.url}/v1/` } });
    expect(withV1.code, withV1.stderr).toBe(0);
    expect(withV1.json().data.map((x: { id: string }) => x.id)).toContain(key.id);

    const list = await run(["keys", "list", "--account", acct.id], { env });
    expect(list.stdout.split("\n")[0]).toMatch(/^ID\s+KEY\s+MODE\s+ROLE\s+NAME\s+CREATED\s+REVOKED$/);
    expect(list.stdout).toMatch(new RegExp(`${key.id}\\s+sk_test_…\\w{4}\\s+test\\s+agent\\s+-\\s+just now\\s+-`));
    expect(list.stdout).not.toContain(key.secret);

    const rv = await run(["keys", "revoke", key.id], { env });
    expect(rv.code).toBe(0);
    expect(rv.stdout).toContain(`Key ${key.id} revoked`);
    expect((await run(["keys", "list", "--account", acct.id, "--json"], { env })).json().data[0].revoked_at).toBeTruthy();

    const after = await run(["balance"], { env: { ...env, CARDCTL_API_KEY: key.secret } });
    expect(after.code).toBe(3);
    expect(after.stderr).toContain("unauthorized");
  });

  it("accounts invite: the owner's one-time dashboard link, and its expiry; a bad email exits 1", async () => {
    const acct = (await run(["accounts", "create", "--name", "Owned Inc", "--json"], { env })).json();
    const human = await run(["accounts", "invite", acct.id, "--email", "owner@owned.example"], { env });
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`Invited owner@owned.example to own ${acct.id}.`);
    expect(human.stdout).toMatch(/Invite link\s+http:\/\/cardctl\.test\/invite#inv_\w{40}/);
    expect(human.stdout).toMatch(/Expires\s+in 2[34] h/);
    const json = (await run(["accounts", "invite", acct.id, "--email", "owner@owned.example", "--json"], { env })).json();
    expect(json).toMatchObject({ account_id: acct.id, email: "owner@owned.example", invite_url: expect.stringContaining("#inv_") });
    const bad = await run(["accounts", "invite", acct.id, "--email", "nope"], { env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("email");
  });

  it("attention list / retry: the cards the recovery pass gave up on, handed back once fixed", async () => {
    const account = await s.newAccount({ name: "Follow-up" });
    const key = await account.key();
    const card = (await s.request("POST", "/v1/cards", { key, body: { amount_cents: 900 } })).body;
    s.processor.fail("revoke", "fail");
    expect((await s.request("POST", `/v1/cards/${card.id}/close`, { key })).status).toBe(502);
    s.processor.clear();
    // The 8 failed passes that lead here are apps/server/test/card-recovery.test.ts's; set directly.
    await s.query("UPDATE cards SET needs_attention = 1, recovery_attempts = 8, recovery_error = 'The card processor failed during revoke.' WHERE id = ?", [card.id]);

    const wide = await run(["attention", "list", "--account", account.id], { env: { ...env, COLUMNS: "200" } });
    expect(wide.code, wide.stderr).toBe(0);
    expect(wide.stdout.split("\n")[0]).toMatch(/^ID\s+ACCOUNT\s+MODE\s+STATUS\s+HOLD\s+ATTEMPTS\s+LAST ERROR\s+CREATED$/);
    expect(wide.stdout).toMatch(new RegExp(`${card.id}\\s+${account.id}\\s+test\\s+CLOSED\\s+OPEN\\s+8\\s+The card processor failed during revoke\\.\\s+just now`));
    expect(wide.stderr).toContain("cardctl attention retry");
    // 80 columns: the error is kept, the other columns go.
    expect((await run(["attention", "list", "--account", account.id], { env })).stdout.split("\n")[0]).toMatch(/^ID\s+STATUS\s+ATTEMPTS\s+LAST ERROR$/);
    const json = (await run(["attention", "list", "--account", account.id, "--json"], { env })).json();
    expect(json.data).toEqual([expect.objectContaining({ id: card.id, recovery_attempts: 8, recovery_error: "The card processor failed during revoke." })]);

    const retried = await run(["attention", "retry", card.id], { env });
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stdout).toContain(`Card ${card.id} is back in the recovery queue`);
    expect((await run(["attention", "list", "--account", account.id], { env })).stdout).toContain("No cards need attention.");
    await s.app.services.maintenance.run();
    expect(await s.processor.cards(card.id)).toEqual(["canceled"]);
    const again = await run(["attention", "retry", card.id], { env });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("card_not_in_attention");
  });

  it("no admin token → exit 3; a wrong one → exit 3; unknown account → exit 1", async () => {
    const none = await run(["accounts", "get", "acct_x"], { env: { ...env, CARDCTL_ADMIN_TOKEN: undefined } });
    expect(none.code).toBe(3);
    expect(none.stderr).toContain("--admin-token");
    const wrong = await run(["accounts", "get", "acct_x", "--admin-token", "adm_wrong"], { env: { ...env, CARDCTL_ADMIN_TOKEN: undefined } });
    expect(wrong.code).toBe(3);
    const missing = await run(["accounts", "get", "acct_doesnotexist", "--json"], { env });
    expect(missing.code).toBe(1);
    expect(missing.json().error.code).toBe("not_found");
    expect((await run(["keys", "create", "--account", "acct_x", "--mode", "staging"], { env })).code).toBe(2);
  });
});
