import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { expectCreatedCard, guarded, trpc } from "./helpers.js";

/** Spec 5 and DESIGN 3.2: keys, revocation, query-string keys, modes, roles, live without Stripe. */
describe(`authentication (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = guarded(await startServer());
  });
  afterAll(() => s.close());


  describe("401 unauthorized", () => {
    const headers: [string, Record<string, string>][] = [
      ["no Authorization header", {}],
      ["an empty Authorization header", { authorization: "" }],
      ["Basic credentials", { authorization: "Basic dXNlcjpwYXNz" }],
      ["Bearer without a key", { authorization: "Bearer " }],
      ["a key without Bearer", { authorization: "sk_test_abcdefghijklmnopqrstuvwxyz012345" }],
      ["an unknown well-formed test key", { authorization: "Bearer sk_test_abcdefghijklmnopqrstuvwxyz012345" }],
      ["an unknown well-formed live key", { authorization: "Bearer sk_live_abcdefghijklmnopqrstuvwxyz012345" }],
      ["a key of another kind", { authorization: "Bearer pk_test_abcdefghijklmnopqrstuvwxyz012345" }],
      ["the admin token", { authorization: "Bearer adm_test_0123456789abcdefghijklmnopqrstuv" }],
    ];
    for (const [name, h] of headers)
      it(`${name}: every endpoint, both transports`, async () => {
        const calls: [string, string, unknown?][] = [
          ["GET", "/v1/cards"],
          ["POST", "/v1/cards", { amount_cents: 100 }],
          ["GET", "/v1/cards/card_x"],
          ["POST", "/v1/cards/card_x/close"],
          ["GET", "/v1/balance"],
          ["GET", "/v1/policies/default"],
          ["PUT", "/v1/policies/default", { approval_required: true }],
          ["GET", "/v1/approvals"],
          ["POST", "/v1/approvals/appr_x/approve"],
          ["POST", "/v1/approvals/appr_x/reject"],
          ["POST", "/v1/test_helpers/cards/card_x/purchase", { amount_cents: 1 }],
          ["POST", "/trpc/cards.create", { amount_cents: 100 }],
          ["GET", "/trpc/balance.retrieve"],
        ];
        for (const [method, path, body] of calls) {
          const err = expectError(await s.request(method, path, { key: null, headers: h, body }), 401, "unauthorized");
          expect(err.details).toBeUndefined();
        }
      });

    it("an unauthenticated create leaves nothing behind", async () => {
      const before = (await s.query("SELECT COUNT(*) AS n FROM cards"))[0].n;
      expectError(await s.request("POST", "/v1/cards", { key: "sk_test_abcdefghijklmnopqrstuvwxyz012345", body: { amount_cents: 100 } }), 401, "unauthorized");
      expect((await s.query("SELECT COUNT(*) AS n FROM cards"))[0].n).toEqual(before);
    });
  });

  it("the Bearer scheme is case-insensitive (RFC 7235), the key is not", async () => {
    for (const scheme of ["bearer", "BEARER", "Bearer"]) {
      const r = await s.request("GET", "/v1/balance", { key: null, headers: { authorization: `${scheme} ${s.apiKey}` } });
      expect(r.status, scheme).toBe(200);
    }
    const upper = s.apiKey.replace("sk_test_", "SK_TEST_");
    expectError(await s.request("GET", "/v1/balance", { key: null, headers: { authorization: `Bearer ${upper}` } }), 401, "unauthorized");
    const flipped = s.apiKey.slice(0, -1) + (s.apiKey.endsWith("a") ? "b" : "a");
    expectError(await s.request("GET", "/v1/balance", { key: flipped }), 401, "unauthorized");
  });

  describe("messages a person can act on, and HTTP Basic as in Stripe's curl examples (issue 14.8)", () => {
    const basic = (user: string, password = "") => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}` });

    it("HTTP Basic with the key as user name (curl -u sk_test_…:) is accepted, on both transports", async () => {
      expect((await s.request("GET", "/v1/balance", { key: null, headers: basic(s.apiKey) })).status).toBe(200);
      expect((await s.request("POST", "/v1/cards", { key: null, headers: basic(s.apiKey), body: { amount_cents: 100 } })).status).toBe(201);
      expect((await trpc(s).query("balance.retrieve", undefined, { key: null, headers: basic(s.apiKey) })).status).toBe(200);
      // The scheme is case-insensitive; a password is ignored as Stripe does; no colon at all is the user name alone.
      expect((await s.request("GET", "/v1/balance", { key: null, headers: { authorization: basic(s.apiKey).authorization.replace("Basic", "basic") } })).status).toBe(200);
      expect((await s.request("GET", "/v1/balance", { key: null, headers: basic(s.apiKey, "ignored") })).status).toBe(200);
      expect((await s.request("GET", "/v1/balance", { key: null, headers: { authorization: `Basic ${Buffer.from(s.apiKey).toString("base64")}` } })).status).toBe(200);
    });

    it("HTTP Basic with an unknown, revoked or malformed key is 401 like Bearer", async () => {
      expectError(await s.request("GET", "/v1/balance", { key: null, headers: basic("sk_test_abcdefghijklmnopqrstuvwxyz012345") }), 401, "unauthorized");
      expectError(await s.request("GET", "/v1/balance", { key: null, headers: basic("", s.apiKey) }), 401, "unauthorized");
      expectError(await s.request("GET", "/v1/balance", { key: null, headers: { authorization: "Basic !!!" } }), 401, "unauthorized");
    });

    it("the admin token sent to /v1 or /trpc says it is the admin token and where it belongs", async () => {
      for (const headers of [{ authorization: `Bearer ${ADMIN_TOKEN}` }, basic(ADMIN_TOKEN)]) {
        const v1 = expectError(await s.request("GET", "/v1/cards", { key: null, headers }), 401, "unauthorized");
        expect(v1.message).toBe(
          "This is the admin token; it only works on the operator API under /admin/v1. Send an API key (sk_test_… or sk_live_…) to /v1 and /trpc.",
        );
        const viaTrpc = expectError(await trpc(s).query("balance.retrieve", undefined, { key: null, headers }), 401, "unauthorized");
        expect(viaTrpc.message).toBe(v1.message);
      }
    });

    it("/admin/v1: a missing token says missing, an API key says so, a wrong token says invalid", async () => {
      const missing = expectError(await s.request("GET", "/admin/v1/accounts/acct_x", { key: null }), 401, "unauthorized");
      expect(missing.message).toMatch(/^Missing admin token/);
      expect(missing.message).toContain("Authorization: Bearer <ADMIN_TOKEN>");
      const empty = expectError(await s.request("GET", "/admin/v1/accounts/acct_x", { key: null, headers: { authorization: "" } }), 401, "unauthorized");
      expect(empty.message).toMatch(/^Missing admin token/);
      const key = expectError(await s.request("GET", "/admin/v1/accounts/acct_x", { key: s.apiKey }), 401, "unauthorized");
      expect(key.message).toMatch(/^This is an API key; the operator API under \/admin\/v1 needs the admin token/);
      const wrong = expectError(await s.request("GET", "/admin/v1/accounts/acct_x", { key: "adm_wrong_token_0123456789" }), 401, "unauthorized");
      expect(wrong.message).toMatch(/^Invalid admin token/);
    });

    it("/admin/v1 accepts the admin token by HTTP Basic too (curl -u \"$ADMIN_TOKEN:\")", async () => {
      const created = await s.request("POST", "/admin/v1/accounts", { key: null, headers: basic(ADMIN_TOKEN), body: { name: "Basic" } });
      expect(created.status).toBe(201);
      expect((await s.request("GET", `/admin/v1/accounts/${created.body.id}`, { key: null, headers: basic(ADMIN_TOKEN) })).status).toBe(200);
      expectError(await s.request("GET", "/admin/v1/accounts/acct_x", { key: null, headers: basic("adm_wrong") }), 401, "unauthorized");
    });

    it("a missing API key says missing; a malformed one says malformed", async () => {
      const missing = expectError(await s.request("GET", "/v1/balance", { key: null }), 401, "unauthorized");
      expect(missing.message).toMatch(/^Missing API key/);
      const malformed = expectError(await s.request("GET", "/v1/balance", { key: "pk_test_abc" }), 401, "unauthorized");
      expect(malformed.message).toMatch(/^Malformed API key/);
    });
  });

  it("a path with %-escapes is authenticated as the route it reaches (the router decodes them)", async () => {
    // /%761/ reaches /v1/, /%74rpc/ /trpc/, /%61dmin/ /admin/: each asks for its own credential.
    expect((await s.request("GET", "/%761/cards?limit=1")).status).toBe(200);
    expectError(await s.request("GET", "/%761/cards?limit=1", { key: null }), 401, "unauthorized");
    expect((await s.request("GET", "/%74rpc/balance.retrieve")).status).toBe(200);
    expectError(await s.request("GET", "/%74rpc/balance.retrieve", { key: null }), 401, "unauthorized");
    const admin = await fetch(`${s.url}/%61dmin/v1/accounts/${s.accountId}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(admin.status).toBe(200);
    expect((await fetch(`${s.url}/%61dmin/v1/accounts/${s.accountId}`)).status).toBe(401);
    // The event stream trusted the auth step: without it, a 500 for anyone.
    const stream = await fetch(`${s.url}/%761/events/stream`, { headers: { authorization: `Bearer ${s.apiKey}` } });
    expect(stream.status).toBe(200);
    await stream.body!.cancel();
    const anonymous = await fetch(`${s.url}/%761/events/stream`);
    expect(anonymous.status).toBe(401);
    expect((await anonymous.json()).error.code).toBe("unauthorized");
  });

  it("revocation takes effect on the very next request, on both transports", async () => {
    const account = await s.newAccount();
    const created = await s.admin("POST", `/accounts/${account.id}/keys`, { mode: "test" });
    const key = created.body.secret;
    const keep = await account.key();
    expect((await s.request("GET", "/v1/balance", { key })).status).toBe(200);
    expect((await trpc(s).query("balance.retrieve", undefined, { key })).status).toBe(200);
    const revoked = await s.admin("POST", `/keys/${created.body.id}/revoke`);
    expect(revoked.status).toBe(200);
    expectError(await s.request("GET", "/v1/balance", { key }), 401, "unauthorized");
    expectError(await s.request("POST", "/v1/cards", { key, body: { amount_cents: 100 } }), 401, "unauthorized");
    expectError(await trpc(s).query("balance.retrieve", undefined, { key }), 401, "unauthorized");
    // The account's other key still works.
    expect((await s.request("GET", "/v1/balance", { key: keep })).status).toBe(200);
  });

  describe("keys in the query string are refused", () => {
    for (const name of ["api_key", "key", "access_token"])
      it(`?${name}= → 401 whose message says to use the Authorization header, even with a valid header`, async () => {
        const noHeader = expectError(await s.request("GET", `/v1/cards?${name}=${s.apiKey}`, { key: null }), 401, "unauthorized");
        expect(noHeader.message).toMatch(/Authorization/);
        expect(noHeader.message).toMatch(/header/i);
        const withHeader = expectError(await s.request("GET", `/v1/balance?limit=2&${name}=${s.apiKey}`), 401, "unauthorized");
        expect(withHeader.message).toMatch(/Authorization/);
        const post = expectError(await s.request("POST", `/v1/cards?${name}=x`, { body: { amount_cents: 100 } }), 401, "unauthorized");
        expect(post.message).toMatch(/Authorization/);
        const viaTrpc = expectError(await s.request("GET", `/trpc/balance.retrieve?${name}=${s.apiKey}`, { key: null }), 401, "unauthorized");
        expect(viaTrpc.message).toMatch(/Authorization/);
      });

    it("whatever the case of the parameter name (API_KEY, Access_Token, KEY)", async () => {
      for (const name of ["API_KEY", "Access_Token", "KEY"]) {
        const err = expectError(await s.request("GET", `/v1/cards?${name}=${s.apiKey}`), 401, "unauthorized");
        expect(err.message).toMatch(/Authorization/);
      }
    });

    it("other query parameters are fine, names that merely contain a key's prefix too", async () => {
      expect((await s.request("GET", "/v1/cards?limit=1")).status).toBe(200);
      for (const agent of ["week_planner", "sleek_bot", "sysadm_helper", "Sk_Test_agent_with_a_long_name"]) {
        expect((await s.request("GET", `/v1/cards?agent_id=${agent}`)).status).toBe(200);
        expect((await trpc(s).query("cards.list", { agent_id: agent })).status).toBe(200);
      }
    });

    it("a key as the value of any parameter, or inside tRPC's input, is refused", async () => {
      expectError(await s.request("GET", `/v1/cards?agent_id=${s.apiKey}`), 401, "unauthorized");
      expectError(await trpc(s).query("cards.list", { agent_id: s.apiKey }), 401, "unauthorized");
    });
  });

  it("only sha256 of a key is stored: no column holds the secret", async () => {
    const account = await s.newAccount();
    const created = await s.admin("POST", `/accounts/${account.id}/keys`, { mode: "test", name: "stored" });
    const secret: string = created.body.secret;
    expect(secret).toMatch(/^sk_test_[A-Za-z0-9_-]{32,}$/);
    const rows = await s.query("SELECT * FROM api_keys WHERE id = ?", [created.body.id]);
    expect(rows).toHaveLength(1);
    const row = rows[0];
    for (const [column, value] of Object.entries(row)) {
      expect(String(value), `column ${column}`).not.toContain(secret);
      // Not even a long piece of it.
      expect(String(value), `column ${column}`).not.toContain(secret.slice(8, 28));
    }
    expect(row.secret_hash).toBe(createHash("sha256").update(secret).digest("hex"));
    // The whole database holds the secret nowhere else either.
    for (const table of ["accounts", "api_keys", "settings", "idempotency_keys"]) {
      const dump = JSON.stringify(await s.query(`SELECT * FROM ${table}`));
      expect(dump, table).not.toContain(secret);
    }
    // Live keys too.
    const live = await account.key("live");
    expect(live).toMatch(/^sk_live_[A-Za-z0-9_-]{32,}$/);
    expect(JSON.stringify(await s.query("SELECT * FROM api_keys"))).not.toContain(live);
  });

  describe("test/live isolation", () => {
    it("objects made with a test key are invisible to the live key of the same account, and the reverse", async () => {
      const account = await s.newAccount();
      const test = await account.key("test");
      const live = await account.key("live");
      const card = (await s.request("POST", "/v1/cards", { key: test, body: { amount_cents: 600 } })).body;
      const testAppr = (await s.request("POST", "/v1/cards", { key: test, body: { amount_cents: 600, policy_override: { approval_required: true } } }))
        .body.approval_id;
      // A live approval request needs no processor.
      const liveReq = await s.request("POST", "/v1/cards", { key: live, body: { amount_cents: 700, policy_override: { approval_required: true } } });
      expect(liveReq.status).toBe(202);
      const liveAppr = liveReq.body.approval_id;

      expect((await s.request("GET", "/v1/cards", { key: live })).body).toEqual({ data: [], has_more: false });
      expectError(await s.request("GET", `/v1/cards/${card.id}`, { key: live }), 404, "not_found");
      expectError(await s.request("POST", `/v1/cards/${card.id}/close`, { key: live }), 404, "not_found");
      expectError(await s.request("POST", `/v1/approvals/${testAppr}/approve`, { key: live }), 404, "not_found");
      expectError(await s.request("POST", `/v1/approvals/${testAppr}/reject`, { key: live }), 404, "not_found");
      expect((await s.request("GET", "/v1/approvals", { key: live })).body.data.map((a: any) => a.id)).toEqual([liveAppr]);
      expect((await s.request("GET", "/v1/balance", { key: live })).body).toMatchObject({ held_cents: 0, open_cards: 0, pending_approvals: 1 });

      expect((await s.request("GET", "/v1/approvals", { key: test })).body.data.map((a: any) => a.id)).toEqual([testAppr]);
      expectError(await s.request("POST", `/v1/approvals/${liveAppr}/reject`, { key: test }), 404, "not_found");
      expect((await s.request("GET", "/v1/cards", { key: test })).body.data.map((c: any) => c.id)).toEqual([card.id]);
      expect((await s.request("GET", "/v1/balance", { key: test })).body).toMatchObject({ held_cents: 600, open_cards: 1, pending_approvals: 1 });
    });
  });

  describe("live mode without Stripe configured", () => {
    it("create that needs the processor → 503 processor_not_configured, nothing recorded", async () => {
      const account = await s.newAccount();
      const live = await account.key("live");
      const err = expectError(await s.request("POST", "/v1/cards", { key: live, body: { amount_cents: 500 } }), 503, "processor_not_configured");
      expect(err.message).toMatch(/live/);
      expect(await s.query("SELECT id FROM cards WHERE account_id = ?", [account.id])).toEqual([]);
      expect((await s.request("GET", "/v1/balance", { key: live })).body).toMatchObject({ held_cents: 0, open_cards: 0 });
      expectError(await trpc(s).mutation("cards.create", { amount_cents: 500 }, { key: live }), 503, "processor_not_configured");
    });

    it("validation, setup and policy checks still come first in live mode", async () => {
      const account = await s.newAccount({ kyb: false });
      const live = await account.key("live");
      expectError(await s.request("POST", "/v1/cards", { key: live, body: { amount_cents: 0 } }), 400, "validation_error");
      expectError(await s.request("POST", "/v1/cards", { key: live, body: { amount_cents: 500 } }), 403, "setup_required");
    });

    it("approve of a live request → 503, and the request stays PENDING; reject works", async () => {
      const account = await s.newAccount();
      const live = await account.key("live");
      const ask = async () =>
        (await s.request("POST", "/v1/cards", { key: live, body: { amount_cents: 500, policy_override: { approval_required: true } } })).body.approval_id;
      const a = await ask();
      const b = await ask();
      expectError(await s.request("POST", `/v1/approvals/${a}/approve`, { key: live }), 503, "processor_not_configured");
      expect((await s.request("GET", "/v1/approvals", { key: live })).body.data.map((x: any) => [x.id, x.status])).toEqual([
        [b, "PENDING"],
        [a, "PENDING"],
      ]);
      expect((await s.request("POST", `/v1/approvals/${b}/reject`, { key: live })).body).toEqual({ ok: true, status: "REJECTED" });
    });

    it("a live card: list and balance work; get (ephemeral key) and close need the processor → 503", async () => {
      const account = await s.newAccount();
      const test = await account.key("test");
      const live = await account.key("live");
      // A live card as Stripe would have made it: moved into live mode in the database.
      const card = (await s.request("POST", "/v1/cards", { key: test, body: { amount_cents: 1900 } })).body;
      await s.query("UPDATE cards SET mode = 'live' WHERE id = ?", [card.id]);
      expect((await s.request("GET", "/v1/cards", { key: live })).body.data.map((c: any) => [c.id, c.status])).toEqual([[card.id, "OPEN"]]);
      expect((await s.request("GET", "/v1/balance", { key: live })).body).toMatchObject({ held_cents: 1900, open_cards: 1 });
      expectError(await s.request("GET", `/v1/cards/${card.id}`, { key: live }), 503, "processor_not_configured");
      expectError(await s.request("POST", `/v1/cards/${card.id}/close`, { key: live }), 503, "processor_not_configured");
      expect((await s.request("GET", "/v1/cards?status=OPEN", { key: live })).body.data.map((c: any) => c.id)).toEqual([card.id]);
      expectError(await s.request("GET", `/v1/cards/${card.id}`, { key: test }), 404, "not_found");
    });

    it("reads that need no processor work: list, balance, policy get/put, approvals", async () => {
      const live = await (await s.newAccount()).key("live");
      expect((await s.request("GET", "/v1/cards", { key: live })).body).toEqual({ data: [], has_more: false });
      expect((await s.request("GET", "/v1/balance", { key: live })).status).toBe(200);
      expect((await s.request("GET", "/v1/policies/default", { key: live })).body).toEqual({ approval_required: false, max_amount_cents: 50000 });
      expect((await s.request("PUT", "/v1/policies/default", { key: live, body: { max_amount_cents: 100 } })).status).toBe(200);
      expect((await s.request("GET", "/v1/approvals", { key: live })).body).toEqual({ data: [], has_more: false });
      expectError(await s.request("GET", "/v1/cards/card_nope", { key: live }), 404, "not_found");
    });
  });

  describe("roles", () => {
    it("agent keys: 403 forbidden on approve, reject and policy update (both transports); nothing changes", async () => {
      const account = await s.newAccount();
      const full = await account.key("test", "full");
      const agent = await account.key("test", "agent");
      const id = (await s.request("POST", "/v1/cards", { key: agent, body: { amount_cents: 400, policy_override: { approval_required: true } } })).body
        .approval_id;
      expect(id).toMatch(/^appr_/);
      const t = trpc(s);
      for (const r of [
        await s.request("POST", `/v1/approvals/${id}/approve`, { key: agent }),
        await s.request("POST", `/v1/approvals/${id}/reject`, { key: agent, body: { reason: "self" } }),
        await s.request("PUT", "/v1/policies/default", { key: agent, body: { max_amount_cents: 50000, approval_required: false } }),
        await t.mutation("approvals.approve", { id }, { key: agent }),
        await t.mutation("approvals.reject", { id }, { key: agent }),
        await t.mutation("policies.updateDefault", { approval_required: false }, { key: agent }),
      ]) {
        const err = expectError(r, 403, "forbidden");
        expect(err.message).toMatch(/agent/);
      }
      expect((await s.request("GET", "/v1/approvals", { key: full })).body.data.map((a: any) => [a.id, a.status])).toEqual([[id, "PENDING"]]);
      // Approving an unknown id is still forbidden (role before lookup: no probing of ids).
      expectError(await s.request("POST", "/v1/approvals/appr_nope/approve", { key: agent }), 403, "forbidden");
      expect((await s.request("POST", `/v1/approvals/${id}/approve`, { key: full })).status).toBe(201);
    });

    it("agent keys may create, list, get, close cards, read balance and policy, list approvals", async () => {
      const account = await s.newAccount();
      const agent = await account.key("test", "agent");
      const created = await s.request("POST", "/v1/cards", { key: agent, body: { amount_cents: 450, agent_id: "bot" } });
      expect(created.status).toBe(201);
      expectCreatedCard(created.body, { amount: 450, agent_id: "bot" });
      expect((await s.request("GET", "/v1/cards", { key: agent })).body.data.map((c: any) => c.id)).toEqual([created.body.id]);
      const got = await s.request("GET", `/v1/cards/${created.body.id}`, { key: agent });
      expect(got.status).toBe(200);
      expect(got.body.ephemeral_key_secret).toMatch(/^ek_test_/);
      expect((await s.request("GET", "/v1/balance", { key: agent })).body).toMatchObject({ held_cents: 450, open_cards: 1 });
      expect((await s.request("GET", "/v1/policies/default", { key: agent })).body).toEqual({ approval_required: false, max_amount_cents: 50000 });
      expect((await s.request("GET", "/v1/approvals", { key: agent })).status).toBe(200);
      expect((await s.request("POST", `/v1/cards/${created.body.id}/close`, { key: agent })).body).toEqual({ ok: true, status: "CLOSED" });
      // An agent cannot loosen the owner's policy through an override either.
      const full = await account.key();
      await s.request("PUT", "/v1/policies/default", { key: full, body: { approval_required: true, max_amount_cents: 1000 } });
      expect(
        (await s.request("POST", "/v1/cards", { key: agent, body: { amount_cents: 900, policy_override: { approval_required: false, max_amount_cents: 50000 } } }))
          .status,
      ).toBe(202);
      expectError(await s.request("POST", "/v1/cards", { key: agent, body: { amount_cents: 1001 } }), 403, "policy_violation");
    });
  });
});
