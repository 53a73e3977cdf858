import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { haveChromium, openDashboard, ownServer, PASSWORD, type Dashboard } from "./browser.js";
import { dbKind, expectError, type TestServer } from "./harness.js";

/**
 * Issue 17, points 1, 3 and 4: the owners' dashboard, served at / (apps/dashboard, built by Vite),
 * driven in Debian's chromium by playwright-core against the real server (test/browser.ts).
 */
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

describe(`the dashboard over plain HTTP (${dbKind})`, () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await ownServer();
  });
  afterAll(() => s?.close());

  it("serves index.html at / and at each page, with a strict CSP, never cached", async () => {
    for (const path of ["/", "/invite", "/sign-in", "/cards", "/policy", "/keys"]) {
      const res = await fetch(`${s.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(res.headers.get("content-security-policy")).toBe(CSP);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("referrer-policy")).toBe("no-referrer");
      expect(res.headers.get("cache-control")).toBe("no-cache");
      expect(res.headers.get("ratelimit-limit")).toBeNull();
      const html = await res.text();
      expect(html).toContain('<div id="root">');
      // Nothing inline (the CSP would block it) and nothing from another site.
      expect(html).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/);
      expect(html).not.toMatch(/<style|\sstyle=/);
      expect(html).not.toMatch(/(src|href)\s*=\s*["']?(https?:)?\/\//i);
    }
  });

  it("serves the hashed assets with their content types, cached for a year; unknown files are 404", async () => {
    const html = await (await fetch(`${s.url}/`)).text();
    const assets = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets.some((a) => a.endsWith(".js"))).toBe(true);
    expect(assets.some((a) => a.endsWith(".css"))).toBe(true);
    for (const asset of assets) {
      const res = await fetch(`${s.url}${asset}`);
      expect(res.status, asset).toBe(200);
      expect(res.headers.get("content-type")).toMatch(asset.endsWith(".js") ? /^text\/javascript|^application\/javascript/ : /^text\/css/);
      expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      const body = await res.text();
      // Type-only import of the router: no server code in the bundle.
      if (asset.endsWith(".js")) expect(body).not.toMatch(/typeorm|better-sqlite3|fastify|createServices/);
    }
    expectError(await s.request("GET", "/assets/nope.js", { key: null }), 404, "not_found");
    const escape = await fetch(`${s.url}/assets/..%2f..%2fpackage.json`);
    expect(escape.status).toBeGreaterThanOrEqual(400);
    expect(await escape.text()).not.toContain("@cardctl/dashboard");
  });

  it("keeps the other routes: /docs, /setup, /health, /v1 and /trpc", async () => {
    expect((await fetch(`${s.url}/docs`)).status).toBe(200);
    expect((await fetch(`${s.url}/health`)).status).toBe(200);
    expect((await s.request("GET", "/v1/balance")).status).toBe(200);
    expectError(await s.request("GET", "/v1/balance", { key: null }), 401, "unauthorized");
    expect((await s.request("GET", "/trpc/balance.retrieve")).status).toBe(200);
  });

  it("the owner's key procedures refuse API keys, even full ones", async () => {
    expectError(await s.request("GET", "/trpc/apiKeys.list"), 403, "forbidden");
    expectError(await s.request("POST", "/trpc/apiKeys.create", { body: { role: "full" } }), 403, "forbidden");
    expectError(await s.request("POST", "/trpc/apiKeys.revoke", { body: { id: "key_x" } }), 403, "forbidden");
  });
});

describe.skipIf(!haveChromium)(`the dashboard in a browser (${dbKind})`, () => {
  let s: TestServer;
  let d: Dashboard;
  let page: Dashboard["page"];
  let account: Awaited<ReturnType<TestServer["newAccount"]>>;
  let fullKey: string;
  let agentKey: string;
  let openCard: { id: string; last_four: string };
  let usedCard: { id: string; last_four: string };
  const shoot = (name: string) => d.shoot(name);
  const api = (method: string, path: string, key: string, body?: unknown) => s.request(method, path, { key, body });
  const item = (text: string) => page.getByRole("listitem").filter({ hasText: text });

  beforeAll(async () => {
    s = await ownServer();
    account = await s.newAccount({ name: "Dashboard Inc" });
    fullKey = await account.key("test", "full");
    agentKey = await account.key("test", "agent");
    // Two cards before approvals are required: one to close, one to spend on.
    openCard = (await api("POST", "/v1/cards", agentKey, { amount_cents: 1500, agent_id: "closer", purpose: "Close me" })).body;
    usedCard = (await api("POST", "/v1/cards", agentKey, { amount_cents: 2000, agent_id: "buyer", purpose: "Paper" })).body;
    const bought = await api("POST", `/v1/test_helpers/cards/${usedCard.id}/purchase`, agentKey, { amount_cents: 1234, merchant: "Paper Shop" });
    expect(bought.status).toBe(200);
    expect((await api("PUT", "/v1/policies/default", fullKey, { approval_required: true })).status).toBe(200);

    d = await openDashboard(s);
    page = d.page;
  });
  afterAll(async () => {
    await d?.close();
    await s?.close();
  });

  it("an invite link sets the password and lands on the approvals inbox", async () => {
    const { invite_url } = (await s.admin("POST", `/accounts/${account.id}/owners`, { email: "owner@dashboard.example" })).body;
    await page.goto(invite_url);
    await shoot("invite");
    await page.getByLabel("New password").fill(PASSWORD);
    await page.getByLabel("Repeat password").fill(`${PASSWORD}?`);
    await page.getByRole("button", { name: "Set password" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toMatch(/differ/);
    await page.getByLabel("Repeat password").fill(PASSWORD);
    await page.getByRole("button", { name: "Set password" }).click();
    await page.getByRole("heading", { name: "Approvals" }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/");
    await page.getByText("Nothing to approve").waitFor();
    await page.getByText("live updates on").waitFor();
    const cookie = (await d.context.cookies()).find((c) => c.name === "cardctl_session")!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Lax" });
    await shoot("inbox-empty");
  });

  it("new requests appear live; one is approved and one rejected with a reason", async () => {
    // Marks this document: a reload would lose it.
    await page.evaluate(() => ((window as unknown as { stayed: boolean }).stayed = true));
    const first = (await api("POST", "/v1/cards", agentKey, { amount_cents: 2500, agent_id: "shopper", purpose: "Books for the team" })).body;
    expect(first.status).toBe("PENDING_APPROVAL");
    await item("Books for the team").waitFor();
    const second = (await api("POST", "/v1/cards", agentKey, { amount_cents: 4200, agent_id: "shopper", purpose: "Espresso machine" })).body;
    await item("Espresso machine").waitFor();
    expect(await page.evaluate(() => (window as unknown as { stayed?: boolean }).stayed)).toBe(true);
    await shoot("inbox");

    await item("Books for the team").getByRole("button", { name: "Approve" }).click();
    await item("Books for the team").waitFor({ state: "detached" });
    const approved = (await api("GET", "/v1/approvals?status=APPROVED", fullKey)).body.data;
    expect(approved.map((a: any) => a.id)).toContain(first.approval_id);

    await item("Espresso machine").getByRole("button", { name: "Reject" }).click();
    await item("Espresso machine").getByLabel("Reason (optional)").fill("Not in the budget");
    await item("Espresso machine").getByRole("button", { name: "Reject" }).click();
    await item("Espresso machine").waitFor({ state: "detached" });
    const rejected = (await api("GET", "/v1/approvals?status=REJECTED", fullKey)).body.data;
    expect(rejected.find((a: any) => a.id === second.approval_id)).toMatchObject({ reason: "Not in the budget" });
    await page.getByText("Nothing to approve").waitFor();
  });

  it("cards: a status filter, a card's authorizations and transactions, and Close card", async () => {
    await page.getByRole("link", { name: "Cards" }).click();
    await page.getByRole("heading", { name: "Cards" }).waitFor();
    const used = page.getByRole("listitem", { name: `Card ending ${usedCard.last_four}` });
    await used.getByRole("button", { name: "Details" }).click();
    await used.getByText("Paper Shop").first().waitFor();
    await used.getByRole("heading", { name: "Transactions" }).waitFor();
    expect(await used.getByRole("button", { name: "Close card" }).count()).toBe(0);
    await shoot("cards");

    const open = page.getByRole("listitem", { name: `Card ending ${openCard.last_four}` });
    await open.getByRole("button", { name: "Details" }).click();
    await open.getByText("No authorizations.").waitFor();
    await open.getByRole("button", { name: "Close card" }).click();
    await open.getByText("CLOSED", { exact: true }).waitFor();
    expect((await api("GET", `/v1/cards/${openCard.id}`, fullKey)).body.status).toBe("CLOSED");

    await page.getByLabel("Status").selectOption("CLOSED");
    await page.getByText("Loading…").waitFor({ state: "detached" });
    expect(await page.getByRole("listitem", { name: /^Card ending/ }).count()).toBe(1);
    await page.getByRole("listitem", { name: `Card ending ${openCard.last_four}` }).waitFor();
    // Open: the card issued by the approval above, not the closed one.
    await page.getByLabel("Status").selectOption("OPEN");
    await page.getByText("Loading…").waitFor({ state: "detached" });
    expect(await page.getByRole("listitem", { name: /^Card ending/ }).count()).toBe(1);
    await page.getByRole("listitem").filter({ hasText: "Books for the team" }).waitFor();
    await page.getByLabel("Status").selectOption("USED");
    await page.getByRole("listitem", { name: `Card ending ${usedCard.last_four}` }).waitFor();
  });

  it("policy: shows and changes approval and the maximum per card", async () => {
    await page.getByRole("link", { name: "Policy" }).click();
    const approval = page.getByLabel("Require my approval for every card");
    await approval.waitFor();
    expect(await approval.isChecked()).toBe(true);
    await shoot("policy");
    await approval.uncheck();
    await page.getByLabel("Maximum per card (USD)").fill("123.45");
    await page.getByRole("button", { name: "Save policy" }).click();
    await page.getByText("Policy saved.").waitFor();
    expect((await api("GET", "/v1/policies/default", fullKey)).body).toEqual({ approval_required: false, max_amount_cents: 12345 });
  });

  it("API keys: the secret is shown once with a Copy button, never stored; a revoked key is refused", async () => {
    await page.getByRole("link", { name: "API keys" }).click();
    await page.getByRole("heading", { name: "API keys" }).waitFor();
    await page.getByLabel("Name").fill("robot");
    await page.getByLabel("Role").selectOption("agent");
    await page.getByRole("button", { name: "Create key" }).click();
    const secretBox = page.getByLabel("Secret of robot");
    await secretBox.waitFor();
    const secret = await secretBox.inputValue();
    expect(secret).toMatch(/^sk_test_/);
    expect((await api("GET", "/v1/balance", secret)).status).toBe(200);
    expect((await api("GET", "/v1/api_keys/current", secret)).body).toMatchObject({ account_id: account.id, role: "agent", mode: "test" });
    await page.getByRole("button", { name: "Copy" }).click();
    await page.getByText("Copied to the clipboard.").waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(secret);
    await shoot("keys-created");

    // Never kept: not in any browser storage, and gone once dismissed or reloaded.
    const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie);
    expect(stored).not.toContain(secret);
    await page.getByRole("button", { name: "Done" }).click();
    expect(await page.content()).not.toContain(secret);
    await page.reload();
    const robot = page.getByRole("listitem", { name: "Key robot" });
    await robot.waitFor();
    expect(await page.content()).not.toContain(secret);
    await shoot("keys");

    await robot.getByRole("button", { name: "Revoke" }).click();
    await robot.getByText("revoked", { exact: true }).waitFor();
    expectError(await api("GET", "/v1/balance", secret), 401, "unauthorized");
  });

  it("another account's cards never show, and its card cannot be closed with this session", async () => {
    const other = await s.newAccount({ name: "Someone else" });
    const otherKey = await other.key("test", "full");
    const theirs = (await api("POST", "/v1/cards", otherKey, { amount_cents: 999, agent_id: "stranger", purpose: "Not yours" })).body;
    await page.getByRole("link", { name: "Cards" }).click();
    await page.getByRole("heading", { name: "Cards" }).waitFor();
    await page.getByLabel("Status").selectOption("");
    await page.getByRole("listitem", { name: `Card ending ${usedCard.last_four}` }).waitFor();
    expect(await page.content()).not.toContain("Not yours");
    // The page's own session, calling the API directly: the card does not exist for it.
    const attempt = await page.evaluate(async (id) => {
      const session = await (await fetch("/auth/session")).json();
      const res = await fetch("/trpc/cards.close", {
        method: "POST",
        headers: { "content-type": "application/json", "x-csrf-token": session.csrf_token },
        body: JSON.stringify({ id }),
      });
      return { status: res.status, body: await res.json() };
    }, theirs.id);
    expect(attempt).toMatchObject({ status: 404, body: { error: { code: "not_found" } } });
    expect((await api("GET", `/v1/cards/${theirs.id}`, otherKey)).body.status).toBe("OPEN");
  });

  it("a change with the session cookie from another origin, or without the CSRF token, is refused", async () => {
    const cookie = (await d.context.cookies()).find((c) => c.name === "cardctl_session")!;
    const headers = { cookie: `cardctl_session=${cookie.value}` };
    const body = { role: "full" };
    expectError(await s.request("POST", "/trpc/apiKeys.create", { key: null, body, headers: { ...headers, origin: "https://evil.example" } }), 403, "csrf_failed");
    expectError(await s.request("POST", "/trpc/apiKeys.create", { key: null, body, headers: { ...headers, origin: s.url } }), 403, "csrf_failed");
    // A cross-site form post from a page on another origin (the browser adds the cookie only if SameSite allowed it).
    const evil = await d.context.newPage();
    await evil.route("http://evil.example/", (route) =>
      route.fulfill({
        contentType: "text/html",
        body: `<form method="post" action="${s.url}/trpc/policies.updateDefault"><input name="approval_required" value="true"></form><script>document.forms[0].submit()</script>`,
      }),
    );
    const answer = evil.waitForResponse((r) => r.url().startsWith(`${s.url}/trpc/`));
    await evil.goto("http://evil.example/");
    expect((await answer).status()).toBeGreaterThanOrEqual(400);
    await evil.close();
    expect((await api("GET", "/v1/policies/default", fullKey)).body.approval_required).toBe(false);
    expect((await api("GET", "/v1/api_keys/current", fullKey)).status).toBe(200);
  });

  it("sign out ends the session and leads to sign-in; signing in again works", async () => {
    const before = (await d.context.cookies()).find((c) => c.name === "cardctl_session")!;
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in to cardctl" }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/sign-in");
    expectError(await s.request("GET", "/auth/session", { key: null, headers: { cookie: `cardctl_session=${before.value}` } }), 401, "unauthorized");
    await page.goto(`${s.url}/cards`);
    await page.getByRole("heading", { name: "Sign in to cardctl" }).waitFor();
    await shoot("sign-in");

    await page.getByLabel("Email").fill("owner@dashboard.example");
    await page.getByLabel("Password").fill("wrong password");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").waitFor();
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Approvals" }).waitFor();
  });

  it("loaded nothing the CSP blocked and threw no error", () => {
    expect(d.problems).toEqual([]);
  });
});
