import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";
import { ISO, trpc } from "./helpers.js";

/**
 * Issue 17, point 2: owners of accounts (DESIGN 3.9). The operator invites an email; the link sets
 * a password and signs in; a session lives in an HttpOnly cookie and authenticates /trpc for the
 * dashboard; changes need the dashboard's Origin and the session's CSRF token; an owner sees only
 * their account; sign-in is limited per email and per IP; sign-out ends the session everywhere.
 */
const ORIGIN = "http://cardctl.test"; // the harness's PUBLIC_URL
const PASSWORD = "correct horse battery";

describe(`owners and dashboard sessions (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startServer();
  });
  afterAll(() => s.close());

  /** A request as the dashboard page sends it: from our origin, with the session cookie and CSRF token when given. */
  const page = (session?: { cookie: string; csrf?: string }, origin: string | null = ORIGIN) => ({
    key: null,
    headers: {
      ...(origin ? { origin } : {}),
      ...(session ? { cookie: session.cookie } : {}),
      ...(session?.csrf ? { "x-csrf-token": session.csrf } : {}),
    },
  });
  const cookieOf = (setCookie: string | null) => /^(cardctl_session=[^;]+)/.exec(setCookie ?? "")?.[1] ?? "";

  async function invite(accountId: string, email: string) {
    const r = await s.admin("POST", `/accounts/${accountId}/owners`, { email });
    expect(r.status).toBe(201);
    return r.body as { id: string; account_id: string; email: string; invite_url: string; invite_expires_at: string };
  }
  /** A new account with an owner who accepted the invite: their session. */
  async function ownerOf(email: string) {
    const account = await s.newAccount({ name: `Owned by ${email}` });
    const { invite_url } = await invite(account.id, email);
    const token = invite_url.split("#")[1]!;
    const r = await s.request("POST", "/auth/invites/accept", { ...page(), body: { token, password: PASSWORD } });
    expect(r.status).toBe(200);
    return { account, cookie: cookieOf(r.headers.get("set-cookie")), csrf: r.body.csrf_token as string, owner: r.body.owner };
  }

  it("invites through the operator API: a one-time link in the fragment, valid 24 h", async () => {
    const account = await s.newAccount({ name: "Invites" });
    const r = await invite(account.id, "  Alice@Example.COM ");
    // DESIGN 3.3: {id: "own_…", email, invite_url, invite_expires_at}, and the account it owns.
    expect(Object.keys(r).sort()).toEqual(["account_id", "email", "id", "invite_expires_at", "invite_url"]);
    expect(r).toMatchObject({ id: expect.stringMatching(/^own_/), account_id: account.id, email: "alice@example.com" });
    expect(r.invite_url).toMatch(/^http:\/\/cardctl\.test\/invite#inv_[A-Za-z0-9]{40}$/);
    expect(Date.parse(r.invite_expires_at) - Date.now()).toBeGreaterThan(23.9 * 3600_000);
    expect(r.invite_expires_at).toMatch(ISO);
    // Invited again: the same owner, a new link.
    expect((await invite(account.id, "alice@example.com")).id).toBe(r.id);
    expectError(await s.admin("POST", `/accounts/${account.id}/owners`, { email: "not an email" }), 400, "validation_error");
    expectError(await s.admin("POST", "/accounts/acct_nope/owners", { email: "bob@example.com" }), 404, "not_found");
    const other = await s.newAccount({ name: "Other" });
    expectError(await s.admin("POST", `/accounts/${other.id}/owners`, { email: "alice@example.com" }), 409, "owner_exists");
    expectError(await s.request("POST", `/admin/v1/accounts/${account.id}/owners`, { body: { email: "x@example.com" } }), 401, "unauthorized");
  });

  it("an invite sets the password once and signs in with an HttpOnly, SameSite=Lax session cookie", async () => {
    const account = await s.newAccount({ name: "Accept" });
    const token = (await invite(account.id, "carol@example.com")).invite_url.split("#")[1]!;
    expectError(await s.request("POST", "/auth/invites/accept", { ...page(), body: { token, password: "short" } }), 400, "validation_error");
    expectError(await s.request("POST", "/auth/invites/accept", { ...page(undefined, null), body: { token, password: PASSWORD } }), 403, "csrf_failed");
    const r = await s.request("POST", "/auth/invites/accept", { ...page(), body: { token, password: PASSWORD } });
    expect(r.status).toBe(200);
    expect(r.body.owner).toMatchObject({ email: "carol@example.com", account_id: account.id, id: expect.stringMatching(/^own_/) });
    expect(r.body.csrf_token).toMatch(/^[A-Za-z0-9]{32}$/);
    const setCookie = r.headers.get("set-cookie")!;
    expect(setCookie).toMatch(/^cardctl_session=[A-Za-z0-9]{43}; Path=\/; HttpOnly; SameSite=Lax$/);
    expectError(await s.request("POST", "/auth/invites/accept", { ...page(), body: { token, password: PASSWORD } }), 400, "invite_invalid");
    const session = await s.request("GET", "/auth/session", page({ cookie: cookieOf(setCookie) }));
    expect(session.status).toBe(200);
    expect(session.body).toEqual(r.body);
    expectError(await s.request("GET", "/auth/session", page()), 401, "unauthorized");
    // A new invite of the same email resets the password, and only the newest link works.
    const older = (await invite(account.id, "carol@example.com")).invite_url.split("#")[1]!;
    const newer = (await invite(account.id, "carol@example.com")).invite_url.split("#")[1]!;
    expectError(await s.request("POST", "/auth/invites/accept", { ...page(), body: { token: older, password: PASSWORD } }), 400, "invite_invalid");
    expect((await s.request("POST", "/auth/invites/accept", { ...page(), body: { token: newer, password: `${PASSWORD}!` } })).status).toBe(200);
  });

  it("the session authenticates /trpc for its own account only; never /v1", async () => {
    const a = await ownerOf("dana@example.com");
    const b = await s.newAccount({ name: "Someone else" });
    const bKey = await b.key();
    const bCard = (await s.request("POST", "/v1/cards", { key: bKey, body: { amount_cents: 500 } })).body;
    const t = trpc(s);
    const balance = await t.query("balance.retrieve", undefined, page(a));
    expect(balance.status).toBe(200);
    expect(balance.body.result.data).toMatchObject({ open_cards: 0, setup_complete: true });
    const cards = await t.query("cards.list", {}, page(a));
    expect(cards.body.result.data.data).toEqual([]);
    expect((await t.query("cards.get", { id: bCard.id }, page(a))).status).toBe(404);
    expectError(await s.request("GET", "/v1/balance", page(a)), 401, "unauthorized");
    expect((await t.query("balance.retrieve", undefined, page({ cookie: "cardctl_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }))).status).toBe(401);
  });

  it("a change needs the dashboard's Origin and the session's CSRF token", async () => {
    const a = await ownerOf("erin@example.com");
    const t = trpc(s);
    const body = { approval_required: true, max_amount_cents: 2000 };
    expect((await t.mutation("policies.updateDefault", body, page({ cookie: a.cookie }))).status).toBe(403);
    expect((await t.mutation("policies.updateDefault", body, page({ cookie: a.cookie, csrf: "wrong" }))).status).toBe(403);
    expect((await t.mutation("policies.updateDefault", body, page(a, "https://evil.example"))).status).toBe(403);
    expect((await t.mutation("policies.updateDefault", body, page(a, null))).status).toBe(403);
    const ok = await t.mutation("policies.updateDefault", body, page(a));
    expect(ok.status).toBe(200);
    expect(ok.body.result.data).toEqual(body);
    // The owner's change is an event with the owner as actor.
    const events = await s.request("GET", "/v1/events?type=policy.updated", { key: await a.account.key() });
    expect(events.body.data[0]).toMatchObject({ type: "policy.updated", actor: { type: "owner", id: a.owner.id }, data: { object: body } });
    // An owner acts with full rights: approving works (an agent key could not).
    const agent = await a.account.key("test", "agent");
    const pending = await s.request("POST", "/v1/cards", { key: agent, body: { amount_cents: 700 } });
    expect(pending.status).toBe(202);
    const approved = await t.mutation("approvals.approve", { id: pending.body.approval_id }, page(a));
    expect(approved.status).toBe(201);
    expect(approved.body.result.data).toMatchObject({ status: "OPEN", spending_limit_cents: 700 });
  });

  it("invitations of one email at once leave one working link, the newest", async () => {
    const account = await s.newAccount({ name: "Many invites" });
    const links = await Promise.all(Array.from({ length: 6 }, () => invite(account.id, "many-invites@example.com")));
    const open = await s.query("SELECT token_hash FROM owner_invites WHERE email = ? AND used_at IS NULL", ["many-invites@example.com"]);
    expect(open).toHaveLength(1);
    const hashOf = (url: string) => createHash("sha256").update(url.split("#")[1]!).digest("hex");
    expect(links.map((l) => hashOf(l.invite_url))).toContain(open[0].token_hash);
  });

  it("a CSRF token is compared whole: a wrong one, a prefix or a longer one is refused", async () => {
    const a = await ownerOf("csrf-check@example.com");
    for (const csrf of ["nope", a.csrf.slice(0, -1), `${a.csrf}x`])
      expectError(await s.request("POST", "/auth/sign-out", page({ cookie: a.cookie, csrf })), 403, "csrf_failed");
    expect((await s.request("GET", "/auth/session", page(a))).status).toBe(200);
  });

  it("signs in with email and password; 5 failures in a row block the email for 15 minutes", async () => {
    const a = await ownerOf("frank@example.com");
    const signIn = (email: string, password: string) => s.request("POST", "/auth/sign-in", { ...page(), body: { email, password } });
    const ok = await signIn("FRANK@example.com", PASSWORD);
    expect(ok.status).toBe(200);
    expect(ok.body.owner).toMatchObject({ id: a.owner.id, account_id: a.account.id });
    expect(cookieOf(ok.headers.get("set-cookie"))).not.toBe(a.cookie);
    expectError(await signIn("frank@example.com", "wrong password"), 401, "invalid_credentials");
    expectError(await signIn("nobody@example.com", PASSWORD), 401, "invalid_credentials");
    expectError(await s.request("POST", "/auth/sign-in", { ...page(undefined, null), body: { email: "frank@example.com", password: PASSWORD } }), 403, "csrf_failed");
    for (let i = 0; i < 4; i++) expectError(await signIn("frank@example.com", `wrong ${i}`), 401, "invalid_credentials");
    const blocked = await signIn("frank@example.com", PASSWORD);
    expectError(blocked, 429, "rate_limited");
    expect(blocked.body.error.details.retry_after_seconds).toBeGreaterThan(14 * 60);
    // The sessions already open are not affected.
    expect((await s.request("GET", "/auth/session", page(a))).status).toBe(200);
  });

  it("signing out revokes the session everywhere; an idle session ends after 12 h", async () => {
    const a = await ownerOf("gina@example.com");
    expectError(await s.request("POST", "/auth/sign-out", page({ cookie: a.cookie })), 403, "csrf_failed");
    const out = await s.request("POST", "/auth/sign-out", page(a));
    expect(out.status).toBe(204);
    expect(out.headers.get("set-cookie")).toMatch(/^cardctl_session=;/);
    expectError(await s.request("GET", "/auth/session", page(a)), 401, "unauthorized");
    expect((await trpc(s).query("balance.retrieve", undefined, page(a))).status).toBe(401);

    const b = await ownerOf("hal@example.com");
    await s.query("UPDATE owner_sessions SET expires_at = ? WHERE owner_id = ?", [Date.now() - 1, b.owner.id]);
    expectError(await s.request("GET", "/auth/session", page(b)), 401, "unauthorized");

    // However busy, a session ends 7 days after sign-in: using it no longer keeps it alive then.
    const c = await ownerOf("hugo@example.com");
    const sixDaysAgo = Date.now() - 6.9 * 24 * 3600_000;
    await s.query("UPDATE owner_sessions SET created_at = ?, expires_at = ? WHERE owner_id = ?", [sixDaysAgo, Date.now() + 60_000, c.owner.id]);
    const seen = await s.request("GET", "/auth/session", page(c));
    expect(seen.status).toBe(200);
    const [row] = await s.query("SELECT expires_at FROM owner_sessions WHERE owner_id = ?", [c.owner.id]);
    expect(Number(row!.expires_at)).toBe(sixDaysAgo + 7 * 24 * 3600_000);
  });

  it("creating an API key refuses an Idempotency-Key: its stored answer would keep the secret", async () => {
    const a = await ownerOf("jude@example.com");
    const withKey = await s.request("POST", "/trpc/apiKeys.create", { ...page(a), headers: { ...page(a).headers, "idempotency-key": "key-1" }, body: { role: "agent" } });
    const err = expectError(withKey, 400, "validation_error");
    expect(err.details.issues).toEqual([{ path: "Idempotency-Key", message: expect.stringContaining("never stored") }]);
    // However the path is spelled.
    const encoded = await s.request("POST", "/trpc/apiKeys%2Ecreate", { ...page(a), headers: { ...page(a).headers, "idempotency-key": "key-1" }, body: { role: "agent" } });
    expectError(encoded, 400, "validation_error");
    expect(await s.query("SELECT idem_key FROM idempotency_keys WHERE idem_key = ?", ["key-1"])).toEqual([]);
    const made = await s.request("POST", "/trpc/apiKeys.create", { ...page(a), body: { role: "agent" } });
    expect(made.status).toBe(200);
    const secret = made.body.result.data.secret as string;
    expect(secret).toMatch(/^sk_test_/);
    expect(await s.query("SELECT response_body FROM idempotency_keys WHERE response_body LIKE ?", [`%${secret}%`])).toEqual([]);
  });

  it("a password reset (an invite again) ends the owner's sessions and voids the old password at once", async () => {
    const a = await ownerOf("iris@example.com");
    const signedIn = await s.request("POST", "/auth/sign-in", { ...page(), body: { email: "iris@example.com", password: PASSWORD } });
    expect(signedIn.status).toBe(200);
    const other = { cookie: cookieOf(signedIn.headers.get("set-cookie")), csrf: signedIn.body.csrf_token as string };
    expect((await s.request("GET", "/auth/session", page(other))).status).toBe(200);

    const token = (await invite(a.account.id, "iris@example.com")).invite_url.split("#")[1]!;
    // The reset shuts everything out at once, before the link is used: sessions and the old password.
    for (const old of [a, other]) expectError(await s.request("GET", "/auth/session", page(old)), 401, "unauthorized");
    expectError(await s.request("POST", "/auth/sign-in", { ...page(), body: { email: "iris@example.com", password: PASSWORD } }), 401, "invalid_credentials");
    const reset = await s.request("POST", "/auth/invites/accept", { ...page(), body: { token, password: `${PASSWORD} again` } });
    expect(reset.status).toBe(200);
    for (const old of [a, other]) expectError(await s.request("GET", "/auth/session", page(old)), 401, "unauthorized");
    const fresh = { cookie: cookieOf(reset.headers.get("set-cookie")), csrf: reset.body.csrf_token as string };
    expect((await s.request("GET", "/auth/session", page(fresh))).body.owner.email).toBe("iris@example.com");
  });
});

describe(`owner sign-in limits and cookies (${dbKind})`, () => {
  it("limits sign-in attempts per client IP: 20 per 15 minutes", async () => {
    const s = await startServer();
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 21; i++)
        statuses.push((await s.request("POST", "/auth/sign-in", { key: null, headers: { origin: ORIGIN }, body: { email: `ip${i}@example.com`, password: "whatever" } })).status);
      expect(statuses.slice(0, 20)).toEqual(Array(20).fill(401));
      expect(statuses[20]).toBe(429);
    } finally {
      await s.close();
    }
  });

  it("counts an IPv6 client by its /64: addresses of one network share the per-address limits", async () => {
    const s = await startServer({ TRUST_PROXY: "127.0.0.1" });
    try {
      const from = (ip: string, email: string) =>
        s.request("POST", "/auth/sign-in", { key: null, headers: { origin: ORIGIN, "x-forwarded-for": ip }, body: { email, password: "whatever" } });
      // The email's count per address: five guesses from five addresses of 2001:db8:1:2::/64, then blocked there.
      for (let i = 1; i <= 5; i++) expectError(await from(`2001:db8:1:2::${i}`, "v6@example.com"), 401, "invalid_credentials");
      expectError(await from("2001:db8:1:2:ffff::6", "v6@example.com"), 429, "rate_limited");
      expectError(await from("2001:db8:1:3::1", "v6@example.com"), 401, "invalid_credentials");
      // The sign-in requests per client: 20 per 15 minutes for the /64, counted with the ones above.
      const statuses: number[] = [];
      for (let i = 0; i < 15; i++) statuses.push((await from(`2001:db8:1:2:${i.toString(16)}::1`, `v6-${i}@example.com`)).status);
      expect(statuses.slice(0, 14)).toEqual(Array(14).fill(401));
      expect(statuses[14]).toBe(429);
    } finally {
      await s.close();
    }
  });

  it("another address's failures never lock the owner out of theirs, a block is not made longer by attempts during it nor outlives its end, and guessing spread over many addresses blocks the email for all", async () => {
    const s = await startServer({ TRUST_PROXY: "127.0.0.1" });
    try {
      const account = await s.newAccount({ name: "Ivy's" });
      const token = (await s.admin("POST", `/accounts/${account.id}/owners`, { email: "ivy@example.com" })).body.invite_url.split("#")[1];
      expect((await s.request("POST", "/auth/invites/accept", { key: null, headers: { origin: ORIGIN }, body: { token, password: PASSWORD } })).status).toBe(200);
      const from = (ip: string, password: string, email = "ivy@example.com") =>
        s.request("POST", "/auth/sign-in", { key: null, headers: { origin: ORIGIN, "x-forwarded-for": ip }, body: { email, password } });
      for (let i = 0; i < 5; i++) expectError(await from("203.0.113.7", `guess ${i}`), 401, "invalid_credentials");
      const blocked = expectError(await from("203.0.113.7", PASSWORD), 429, "rate_limited");
      const blockRows = async () => (await s.query("SELECT blocked_until FROM sign_in_failures WHERE blocked_until IS NOT NULL")).map((r) => Number(r.blocked_until));
      const [until] = await blockRows();
      for (let i = 0; i < 3; i++) expectError(await from("203.0.113.7", `guess again ${i}`), 429, "rate_limited");
      expect(await blockRows()).toEqual([until]);
      expect(blocked.details.retry_after_seconds).toBeGreaterThan(14 * 60);
      // The owner, from their own address, with their password.
      expect((await from("198.51.100.20", PASSWORD)).status).toBe(200);
      // Once the block has ended, the count starts again: a guess is one failure, not a new block.
      await s.query("UPDATE sign_in_failures SET blocked_until = ? WHERE blocked_until IS NOT NULL", [Date.now() - 1]);
      expectError(await from("203.0.113.7", "one more guess"), 401, "invalid_credentials");
      expect((await from("203.0.113.7", PASSWORD)).status).toBe(200);

      // 50 failures spread over 10 addresses (5 each): then the email is blocked from everywhere.
      for (let n = 0; n < 10; n++) for (let i = 0; i < 5; i++) expectError(await from(`192.0.2.${n + 1}`, `spread ${i}`), 401, "invalid_credentials");
      expectError(await from("198.51.100.20", PASSWORD), 429, "rate_limited");
      expectError(await from("198.51.100.99", PASSWORD), 429, "rate_limited");
    } finally {
      await s.close();
    }
  });

  it("20 sign-ins at once for one email: at most 5 passwords are checked, the others are refused 429", async () => {
    const s = await startServer(); // a fresh per-IP budget: 20 sign-ins
    try {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => s.request("POST", "/auth/sign-in", { key: null, headers: { origin: ORIGIN }, body: { email: "many@example.com", password: `guess ${i}` } })),
      );
      const statuses = answers.map((r) => r.status);
      expect(statuses.filter((x) => x === 401).length).toBeLessThanOrEqual(5);
      expect(statuses.filter((x) => x === 429)).toHaveLength(20 - statuses.filter((x) => x === 401).length);
    } finally {
      await s.close();
    }
  });

  it("an email no owner has is blocked after 5 failures just as an owner's is: the answers tell nobody which emails exist", async () => {
    const s = await startServer(); // a fresh per-IP budget: 14 sign-ins here
    try {
      const account = await s.newAccount({ name: "Hank's" });
      const token = (await s.admin("POST", `/accounts/${account.id}/owners`, { email: "hank@example.com" })).body.invite_url.split("#")[1];
      expect((await s.request("POST", "/auth/invites/accept", { key: null, headers: { origin: ORIGIN }, body: { token, password: PASSWORD } })).status).toBe(200);
      const signIn = (email: string, password: string) => s.request("POST", "/auth/sign-in", { key: null, headers: { origin: ORIGIN }, body: { email, password } });
      const answers = async (email: string) => {
        const seen = [];
        for (let i = 0; i < 6; i++) {
          const res = await signIn(email, `wrong ${i}`);
          seen.push([res.status, res.body.error.code]);
        }
        return seen;
      };
      const known = await answers("hank@example.com");
      expect(known).toEqual([...Array(5).fill([401, "invalid_credentials"]), [429, "rate_limited"]]);
      expect(await answers("nobody-here@example.com")).toEqual(known);
      // Emails are counted by their hash (with the client's address, and in all), not stored.
      const rows = await s.query("SELECT email_hash FROM sign_in_failures");
      expect(rows).toHaveLength(4);
      for (const row of rows) expect(row.email_hash).toMatch(/^[0-9a-f]{64}$/);
      // A block ends, and the count starts again; the owner signs in.
      await s.query("UPDATE sign_in_failures SET blocked_until = ?, updated_at = ?", [Date.now() - 1, Date.now() - 16 * 60 * 1000]);
      expectError(await signIn("hank@example.com", "wrong again"), 401, "invalid_credentials");
      expect((await signIn("hank@example.com", PASSWORD)).status).toBe(200);
      // The maintenance pass forgets failures older than a block.
      await s.app.services.maintenance.run();
      expect(await s.query("SELECT email_hash FROM sign_in_failures")).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it("over https the cookie is Secure and __Host- (no other host can set or shadow it), and it is the session", async () => {
    const origin = "https://cards.example.com";
    const s = await startServer({ PUBLIC_URL: origin });
    try {
      const account = await s.newAccount({ name: "Secure" });
      const token = (await s.admin("POST", `/accounts/${account.id}/owners`, { email: "ivy@example.com" })).body.invite_url.split("#")[1];
      const r = await s.request("POST", "/auth/invites/accept", { key: null, headers: { origin }, body: { token, password: PASSWORD } });
      expect(r.status).toBe(200);
      const setCookie = r.headers.get("set-cookie")!;
      expect(setCookie).toMatch(/^__Host-cardctl_session=[A-Za-z0-9]+; /);
      expect(setCookie).toMatch(/; Secure/);
      expect(setCookie).toMatch(/; Path=\//);
      expect(setCookie).not.toMatch(/Domain=/i);
      const cookie = setCookie.split(";")[0]!;
      expect((await s.request("GET", "/auth/session", { key: null, headers: { cookie } })).status).toBe(200);
      expect((await s.request("GET", "/trpc/balance.retrieve", { key: null, headers: { cookie } })).status).toBe(200);
      // The name without the prefix is not this server's cookie over https.
      const unprefixed = cookie.replace("__Host-", "");
      expect((await s.request("GET", "/auth/session", { key: null, headers: { cookie: unprefixed } })).status).toBe(401);
      const out = await s.request("POST", "/auth/sign-out", {
        key: null,
        headers: { cookie, origin, "x-csrf-token": r.body.csrf_token },
      });
      expect(out.status).toBe(204);
      expect(out.headers.get("set-cookie")).toMatch(/^__Host-cardctl_session=; .*Secure/);
    } finally {
      await s.close();
    }
  });
});
