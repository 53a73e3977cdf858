import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, dbKind, expectError, startServer, TEST_CARDHOLDER, type TestServer } from "./harness.js";
import { expectKeys, guarded, ISO, trpc } from "./helpers.js";

const ACCOUNT_KEYS = ["id", "name", "kyb_verified", "payment_method", "cardholder", "created_at"];
const CREATED_KEY_KEYS = ["id", "secret", "mode", "role", "name", "created_at"];
const LISTED_KEY_KEYS = ["id", "mode", "role", "name", "prefix", "last4", "created_at", "revoked_at"];

/** The operator API of DESIGN 3.3 at /admin/v1, exactly as tabled there. */
describe(`operator API (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer());
  });
  afterAll(() => s.close());

  const as = (token: string | null) => (method: string, path: string, body?: unknown) =>
    s.request(method, `/admin/v1${path}`, { body, key: null, headers: token === null ? {} : { authorization: `Bearer ${token}` } });

  it("POST /accounts → 201 {id: acct_…, name, kyb_verified: false, payment_method: null, created_at}", async () => {
    const r = await s.admin("POST", "/accounts", { name: "Acme Robotics" });
    expect(r.status).toBe(201);
    expectKeys(r.body, ACCOUNT_KEYS);
    expect(r.body).toMatchObject({ name: "Acme Robotics", kyb_verified: false, payment_method: null, cardholder: null });
    expect(r.body.id).toMatch(/^acct_[A-Za-z0-9]+$/);
    expect(r.body.created_at).toMatch(ISO);
  });

  it("GET /accounts/:id → 200 account; unknown → 404", async () => {
    const made = (await s.admin("POST", "/accounts", { name: "Getter" })).body;
    const r = await s.admin("GET", `/accounts/${made.id}`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual(made);
    expectError(await s.admin("GET", "/accounts/acct_doesnotexist"), 404, "not_found");
  });

  it("POST /accounts/:id/kyb {verified} → 200 account", async () => {
    const { id } = (await s.admin("POST", "/accounts", { name: "KYB" })).body;
    const on = await s.admin("POST", `/accounts/${id}/kyb`, { verified: true });
    expect(on.status).toBe(200);
    expectKeys(on.body, ACCOUNT_KEYS);
    expect(on.body).toMatchObject({ id, kyb_verified: true, payment_method: null });
    const off = await s.admin("POST", `/accounts/${id}/kyb`, { verified: false });
    expect(off.body.kyb_verified).toBe(false);
    expectError(await s.admin("POST", `/accounts/${id}/kyb`, { verified: "yes" }), 400, "validation_error");
    expectError(await s.admin("POST", `/accounts/${id}/kyb`, {}), 400, "validation_error");
    expectError(await s.admin("POST", "/accounts/acct_nope/kyb", { verified: true }), 404, "not_found");
  });

  it("POST /accounts/:id/payment_method {payment_method: pm_…} → 200 account; null removes", async () => {
    const { id } = (await s.admin("POST", "/accounts", { name: "PM" })).body;
    const set = await s.admin("POST", `/accounts/${id}/payment_method`, { payment_method: "pm_card_mastercard" });
    expect(set.status).toBe(200);
    expectKeys(set.body, ACCOUNT_KEYS);
    expect(set.body.payment_method).toBe("pm_card_mastercard");
    const removed = await s.admin("POST", `/accounts/${id}/payment_method`, { payment_method: null });
    expect(removed.status).toBe(200);
    expect(removed.body.payment_method).toBeNull();
    const err = expectError(await s.admin("POST", `/accounts/${id}/payment_method`, { payment_method: "card_1234" }), 400, "validation_error");
    expect(err.details.issues[0].path).toBe("payment_method");
    expectError(await s.admin("POST", "/accounts/acct_nope/payment_method", { payment_method: "pm_x" }), 404, "not_found");
  });

  it("POST /accounts/:id/keys → 201 {id: key_…, secret, mode, role, name, created_at}; role defaults to full", async () => {
    const { id } = (await s.admin("POST", "/accounts", { name: "Keys" })).body;
    const test = await s.admin("POST", `/accounts/${id}/keys`, { mode: "test" });
    expect(test.status).toBe(201);
    expectKeys(test.body, CREATED_KEY_KEYS);
    expect(test.body).toMatchObject({ mode: "test", role: "full", name: null });
    expect(test.body.id).toMatch(/^key_[A-Za-z0-9]+$/);
    expect(test.body.secret).toMatch(/^sk_test_[A-Za-z0-9_-]{32,}$/);
    expect(test.body.created_at).toMatch(ISO);
    const live = await s.admin("POST", `/accounts/${id}/keys`, { mode: "live", role: "agent", name: "ci bot" });
    expect(live.status).toBe(201);
    expect(live.body).toMatchObject({ mode: "live", role: "agent", name: "ci bot" });
    expect(live.body.secret).toMatch(/^sk_live_[A-Za-z0-9_-]{32,}$/);
    // The key works right away.
    expect((await s.request("GET", "/v1/balance", { key: test.body.secret })).status).toBe(200);
    for (const bad of [{}, { mode: "prod" }, { mode: "test", role: "admin" }, { mode: "test", extra: 1 }])
      expectError(await s.admin("POST", `/accounts/${id}/keys`, bad), 400, "validation_error");
    expectError(await s.admin("POST", "/accounts/acct_nope/keys", { mode: "test" }), 404, "not_found");
  });

  it("GET /accounts/:id/keys → 200 {data: [keys without secret, with last4 and revoked_at]}", async () => {
    const { id } = (await s.admin("POST", "/accounts", { name: "List keys" })).body;
    const a = (await s.admin("POST", `/accounts/${id}/keys`, { mode: "test", name: "first" })).body;
    const b = (await s.admin("POST", `/accounts/${id}/keys`, { mode: "live", role: "agent" })).body;
    await s.admin("POST", `/keys/${a.id}/revoke`);
    const r = await s.admin("GET", `/accounts/${id}/keys`);
    expect(r.status).toBe(200);
    expectKeys(r.body, ["data"]);
    expect(r.body.data).toHaveLength(2);
    for (const k of r.body.data) expectKeys(k, LISTED_KEY_KEYS);
    const byId = Object.fromEntries(r.body.data.map((k: any) => [k.id, k]));
    expect(byId[a.id]).toMatchObject({ mode: "test", role: "full", name: "first", last4: a.secret.slice(-4), created_at: a.created_at });
    expect(byId[a.id].revoked_at).toMatch(ISO);
    expect(byId[a.id].prefix).toBe(a.secret.slice(0, byId[a.id].prefix.length));
    expect(byId[a.id].prefix.length).toBeLessThanOrEqual(12);
    expect(byId[b.id]).toMatchObject({ mode: "live", role: "agent", name: null, last4: b.secret.slice(-4), revoked_at: null });
    expect(JSON.stringify(r.body)).not.toContain(a.secret);
    expect(JSON.stringify(r.body)).not.toContain(b.secret);
    expectError(await s.admin("GET", "/accounts/acct_nope/keys"), 404, "not_found");
  });

  it("POST /keys/:id/revoke → 200 {ok: true, revoked_at}; effective immediately; unknown → 404", async () => {
    const { id } = (await s.admin("POST", "/accounts", { name: "Revoke" })).body;
    const k = (await s.admin("POST", `/accounts/${id}/keys`, { mode: "test" })).body;
    expect((await s.request("GET", "/v1/policies/default", { key: k.secret })).status).toBe(200);
    const r = await s.admin("POST", `/keys/${k.id}/revoke`);
    expect(r.status).toBe(200);
    expectKeys(r.body, ["ok", "revoked_at"]);
    expect(r.body.ok).toBe(true);
    expect(r.body.revoked_at).toMatch(ISO);
    expectError(await s.request("GET", "/v1/policies/default", { key: k.secret }), 401, "unauthorized");
    // Revoking again is idempotent: 200 with the original revoked_at.
    const again = await s.admin("POST", `/keys/${k.id}/revoke`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ ok: true, revoked_at: r.body.revoked_at });
    expectError(await s.request("GET", "/v1/policies/default", { key: k.secret }), 401, "unauthorized");
    expectError(await s.admin("POST", "/keys/key_doesnotexist/revoke"), 404, "not_found");
  });

  it("the whole flow: a new account can create cards once KYB and a payment method are set (and, on Stripe, the cardholder)", async () => {
    const { id } = (await s.admin("POST", "/accounts", { name: "Flow" })).body;
    const key = (await s.admin("POST", `/accounts/${id}/keys`, { mode: "test" })).body.secret;
    expect(expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 100 } }), 403, "setup_required").details.missing).toEqual([
      "kyb",
      "payment_method",
      ...(s.onStripe ? ["cardholder"] : []),
    ]);
    await s.admin("POST", `/accounts/${id}/kyb`, { verified: true });
    await s.admin("POST", `/accounts/${id}/payment_method`, { payment_method: "pm_card_visa" });
    if (s.onStripe) {
      expect(expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 100 } }), 403, "setup_required").details.missing).toEqual(["cardholder"]);
      expect((await s.admin("POST", `/accounts/${id}/cardholder`, TEST_CARDHOLDER)).status).toBe(200);
    }
    expect((await s.request("POST", "/v1/cards", { key, body: { amount_cents: 100 } })).status).toBe(201);
  });

  it("validation: POST /accounts needs a non-empty name", async () => {
    for (const body of [{}, { name: "" }, { name: "   " }, { name: 5 }, { name: "x".repeat(201) }])
      expectError(await s.admin("POST", "/accounts", body), 400, "validation_error");
  });

  it("names are trimmed, as the owner API trims them: an account's and a key's; blank is 400", async () => {
    const account = await s.admin("POST", "/accounts", { name: "  Acme Robotics \t" });
    expect(account.status).toBe(201);
    expect(account.body.name).toBe("Acme Robotics");
    const { id } = account.body;
    expect((await s.admin("POST", `/accounts/${id}/keys`, { mode: "test", name: " ci bot  " })).body.name).toBe("ci bot");
    const blank = expectError(await s.admin("POST", `/accounts/${id}/keys`, { mode: "test", name: "   " }), 400, "validation_error");
    expect(blank.details.issues).toEqual([{ path: "name", message: "name must not be empty" }]);
    expect((await s.admin("GET", `/accounts/${id}/keys`)).body.data.map((k: any) => k.name)).toEqual(["ci bot"]);
  });

  it("validation: every operator input is strict, bodyless calls and queries too: an unknown field is 400 and changes nothing", async () => {
    const { id } = (await s.admin("POST", "/accounts", { name: "Strict" })).body;
    const k = (await s.admin("POST", `/accounts/${id}/keys`, { mode: "test" })).body;
    const unknown = [{ path: "foo", message: "foo is not a field of the request (field names are case-sensitive)" }];
    for (const [method, path, body] of [
      ["POST", `/keys/${k.id}/revoke`, { foo: 1 }],
      ["POST", "/cards/card_doesnotexist/retry_recovery", { foo: 1 }],
      ["POST", `/accounts/${id}/kyb`, { verified: true, foo: 1 }],
      ["GET", `/accounts/${id}?foo=1`],
      ["GET", `/accounts/${id}/keys?foo=1`],
      ["GET", "/payments?foo=1"],
      ["GET", "/cards/attention?foo=1"],
    ] as [string, string, unknown?][])
      expect(expectError(await s.admin(method, path, body), 400, "validation_error").details.issues, `${method} ${path}`).toEqual(unknown);
    expect((await s.admin("GET", `/accounts/${id}/keys`)).body.data[0].revoked_at).toBeNull();
    expect((await s.request("GET", "/v1/balance", { key: k.secret })).status).toBe(200);
  });

  describe("admin token", () => {
    const bad: [string, string | null][] = [
      ["no token", null],
      ["a wrong token", "adm_wrong_0123456789abcdefghijklmnopqrstuv"],
      ["the token with one character changed", ADMIN_TOKEN.slice(0, -1) + (ADMIN_TOKEN.endsWith("v") ? "w" : "v")],
      ["a prefix of the token", ADMIN_TOKEN.slice(0, 10)],
    ];
    for (const [name, token] of bad)
      it(`${name} → 401 unauthorized on every operator call, and nothing is made`, async () => {
        const call = as(token);
        const { id } = (await s.admin("POST", "/accounts", { name: "Target" })).body;
        const k = (await s.admin("POST", `/accounts/${id}/keys`, { mode: "test" })).body;
        for (const [method, path, body] of [
          ["POST", "/accounts", { name: "Intruder" }],
          ["GET", `/accounts/${id}`],
          ["POST", `/accounts/${id}/kyb`, { verified: true }],
          ["POST", `/accounts/${id}/payment_method`, { payment_method: "pm_x" }],
          ["POST", `/accounts/${id}/cardholder`, TEST_CARDHOLDER],
          ["POST", `/accounts/${id}/keys`, { mode: "live" }],
          ["GET", `/accounts/${id}/keys`],
          ["POST", `/keys/${k.id}/revoke`],
        ] as [string, string, unknown?][])
          expectError(await call(method, path, body), 401, "unauthorized");
        expect((await s.admin("GET", `/accounts/${id}`)).body).toMatchObject({ kyb_verified: false, payment_method: null, cardholder: null });
        expect((await s.admin("GET", `/accounts/${id}/keys`)).body.data).toHaveLength(1);
        expect((await s.request("GET", "/v1/balance", { key: k.secret })).status).toBe(200);
      });

    it("an API key is not an admin token, and the admin token is not an API key", async () => {
      expectError(await as(s.apiKey)("GET", `/accounts/${s.accountId}`), 401, "unauthorized");
      expectError(await s.request("GET", "/v1/balance", { key: ADMIN_TOKEN }), 401, "unauthorized");
      expectError(await trpc(s).query("balance.retrieve", undefined, { key: ADMIN_TOKEN }), 401, "unauthorized");
    });
  });
});
