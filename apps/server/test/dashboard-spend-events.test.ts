import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { haveChromium, openDashboard, ownServer, PASSWORD, type Dashboard } from "./browser.js";
import { dbKind, expectError, startServer, type TestServer } from "./harness.js";

/**
 * Issue 17: the dashboard's Spend page (the spend summary and a chart of daily spend, from the
 * tRPC-only `spend.daily`) and Events page (the account's events with a type filter, each event's
 * data, "Load more"), black-box through the real server and, for the pages, Debian's chromium.
 */
const DAY = 86_400_000;
const ORIGIN = "http://cardctl.test"; // startServer's PUBLIC_URL

/** Cents as the dashboard writes them (src/format.ts). */
const dollars = (cents: number) => (cents / 100).toLocaleString("en-US", { style: "currency", currency: "USD" });

type Daily = { date: string; spent_cents: number; transactions: number }[];

describe(`spend.daily, the daily spend of the owner's session (${dbKind})`, () => {
  let s: TestServer;
  let account: Awaited<ReturnType<TestServer["newAccount"]>>;
  let key: string;
  let session: { cookie: string };
  beforeAll(async () => {
    s = await startServer();
    account = await s.newAccount({ name: "Spender" });
    key = await account.key("test", "full");
    const token = (await s.admin("POST", `/accounts/${account.id}/owners`, { email: "spender@example.com" })).body.invite_url.split("#")[1];
    const accepted = await s.request("POST", "/auth/invites/accept", { key: null, headers: { origin: ORIGIN }, body: { token, password: PASSWORD } });
    expect(accepted.status).toBe(200);
    session = { cookie: /^(cardctl_session=[^;]+)/.exec(accepted.headers.get("set-cookie") ?? "")![1]! };
  });
  afterAll(() => s?.close());

  /** GET /trpc/spend.daily on the session (as the dashboard asks it), with `input` when given. */
  const daily = (input?: unknown, headers: Record<string, string> = {}) =>
    s.request("GET", `/trpc/spend.daily${input === undefined ? "" : `?input=${encodeURIComponent(JSON.stringify(input))}`}`, {
      key: null,
      headers: { ...session, ...headers },
    });
  const api = (method: string, path: string, body?: unknown) => s.request(method, path, { key, body });
  /** A transaction row written straight to the database, at a time the API cannot choose. */
  const insert = (o: { accountId?: string; mode?: string; cardId: string; type: "capture" | "refund"; cents: number; at: number }) =>
    s.query("INSERT INTO transactions (id, account_id, mode, card_id, type, amount_cents, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)", [
      `txn_t${Math.random().toString(36).slice(2, 14)}`,
      o.accountId ?? account.id,
      o.mode ?? "test",
      o.cardId,
      o.type,
      o.cents,
      o.at,
    ]);

  it("answers the last 30 UTC days oldest first, zero days included, captures less refunds, scoped to account and mode", async () => {
    // Today, through the API: a purchase of $25.00 and a refund of $4.00 of it.
    const card = (await api("POST", "/v1/cards", { amount_cents: 3000, agent_id: "spender" })).body;
    expect((await api("POST", `/v1/test_helpers/cards/${card.id}/purchase`, { amount_cents: 2500, merchant: "Bookshop" })).status).toBe(200);
    const [capture] = (await api("GET", `/v1/transactions?card_id=${card.id}`)).body.data;
    expect(capture).toMatchObject({ type: "capture", amount_cents: 2500 });
    expect((await api("POST", `/v1/test_helpers/transactions/${capture.id}/refund`, { amount_cents: 400 })).status).toBe(201);

    const before = await daily();
    expect(before.status).toBe(200);
    const today = (before.body.result.data as Daily).at(-1)!.date;
    const todayStart = Date.parse(`${today}T00:00:00Z`);
    expect(Date.now() - todayStart).toBeGreaterThanOrEqual(0);
    expect(Date.now() - todayStart).toBeLessThan(DAY);
    const first = todayStart - 29 * DAY;

    // Earlier days, as the database would have them: three days ago a capture and a refund; the
    // first day's midnight exactly (in), the millisecond before it (out); another mode and account (out).
    await insert({ cardId: card.id, type: "capture", cents: 1000, at: todayStart - 3 * DAY + 3600_000 });
    await insert({ cardId: card.id, type: "refund", cents: 300, at: todayStart - 3 * DAY + 7200_000 });
    await insert({ cardId: card.id, type: "capture", cents: 111, at: first });
    await insert({ cardId: card.id, type: "capture", cents: 9999, at: first - 1 });
    await insert({ cardId: card.id, type: "capture", cents: 5000, at: todayStart + 1, mode: "live" });
    const other = await s.newAccount({ name: "Someone else" });
    await insert({ accountId: other.id, cardId: card.id, type: "capture", cents: 7777, at: todayStart + 1 });

    const r = await daily({ days: 30 });
    expect(r.status).toBe(200);
    const days = r.body.result.data as Daily;
    expect(days).toHaveLength(30);
    days.forEach((d, i) => expect(d.date).toBe(new Date(first + i * DAY).toISOString().slice(0, 10)));
    const expected = new Map([
      [0, { spent_cents: 111, transactions: 1 }],
      [26, { spent_cents: 700, transactions: 2 }],
      [29, { spent_cents: 2100, transactions: 2 }],
    ]);
    days.forEach((d, i) => expect({ spent_cents: d.spent_cents, transactions: d.transactions }, d.date).toEqual(expected.get(i) ?? { spent_cents: 0, transactions: 0 }));
    // No input is the same 30 days.
    expect((await daily()).body.result.data).toEqual(days);

    // The session's mode: live has only its own row.
    const live = (await daily({ days: 30 }, { "cardctl-mode": "live" })).body.result.data as Daily;
    expect(live.filter((d) => d.transactions > 0)).toEqual([{ date: today, spent_cents: 5000, transactions: 1 }]);

    // 1..90 days.
    expect((await daily({ days: 1 })).body.result.data).toEqual([{ date: today, spent_cents: 2100, transactions: 2 }]);
    const ninety = (await daily({ days: 90 })).body.result.data as Daily;
    expect(ninety).toHaveLength(90);
    expect(ninety.slice(60)).toEqual(days);
    expect(ninety.find((d) => d.date === new Date(first - DAY).toISOString().slice(0, 10))).toMatchObject({ spent_cents: 9999, transactions: 1 });
    for (const bad of [{ days: 0 }, { days: 91 }, { days: 2.5 }, { days: "30" }, { days: 30, extra: 1 }]) expectError(await daily(bad), 400, "validation_error");
  });

  it("refuses API keys, even full ones, and needs a session", async () => {
    expectError(await api("GET", "/trpc/spend.daily"), 403, "forbidden");
    expectError(await s.request("GET", "/trpc/spend.daily", { key: await account.key("test", "agent") }), 403, "forbidden");
    expectError(await s.request("GET", "/trpc/spend.daily", { key: null }), 401, "unauthorized");
    // Not part of the REST API.
    expectError(await api("GET", "/v1/spend/daily"), 404, "not_found");
  });
});

describe.skipIf(!haveChromium)(`the Spend and Events pages in a browser (${dbKind})`, () => {
  let s: TestServer;
  let d: Dashboard;
  let page: Dashboard["page"];
  let account: Awaited<ReturnType<TestServer["newAccount"]>>;
  let fullKey: string;
  let agentKey: string;
  let firstCard: { id: string };
  const api = (method: string, path: string, key: string, body?: unknown) => s.request(method, path, { key, body });
  /** A value of the page's label/value pairs (the spend summary, today's and the period's totals). */
  const fact = (term: string) => page.locator(".facts > div").filter({ has: page.locator("dt", { hasText: new RegExp(`^${term}$`) }) }).locator("dd");
  const events = () => page.getByRole("listitem", { name: /^Event / });
  /** Every event of the account, newest first, through the REST API. */
  async function allEvents(type?: string) {
    const out: { id: string; type: string; data: { object: Record<string, unknown> } }[] = [];
    for (let after = ""; ; ) {
      const r = await api("GET", `/v1/events?limit=100${type ? `&type=${type}` : ""}${after ? `&starting_after=${after}` : ""}`, fullKey);
      out.push(...r.body.data);
      if (!r.body.has_more) return out;
      after = out.at(-1)!.id;
    }
  }

  beforeAll(async () => {
    s = await ownServer();
    account = await s.newAccount({ name: "Spend and events" });
    fullKey = await account.key("test", "full");
    agentKey = await account.key("test", "agent");
    // More events than a page (20): 24 small cards (card.created each), then purchases on two of them.
    const cards: { id: string }[] = [];
    for (let i = 0; i < 24; i++) cards.push((await api("POST", "/v1/cards", agentKey, { amount_cents: 5000, agent_id: `agent-${i}` })).body);
    firstCard = cards[0]!;
    expect((await api("POST", `/v1/test_helpers/cards/${cards[1]!.id}/purchase`, agentKey, { amount_cents: 1234, merchant: "Paper Shop" })).body.approved).toBe(true);
    expect((await api("POST", `/v1/test_helpers/cards/${cards[2]!.id}/purchase`, agentKey, { amount_cents: 2500, merchant: "Coffee Roasters" })).body.approved).toBe(true);
    const [coffee] = (await api("GET", `/v1/transactions?card_id=${cards[2]!.id}`, fullKey)).body.data;
    expect((await api("POST", `/v1/test_helpers/transactions/${coffee.id}/refund`, agentKey, { amount_cents: 500 })).status).toBe(201);
    // A pending approval, for the summary.
    expect((await api("PUT", "/v1/policies/default", fullKey, { approval_required: true, max_amount_cents: 20000 })).status).toBe(200);
    expect((await api("POST", "/v1/cards", agentKey, { amount_cents: 700, agent_id: "asker", purpose: "Needs a yes" })).body.status).toBe("PENDING_APPROVAL");

    d = await openDashboard(s);
    page = d.page;
    await d.signInByInvite(account.id, "owner@spend.example");
  });
  afterAll(async () => {
    await d?.close();
    await s?.close();
  });

  it("serves both pages", async () => {
    for (const path of ["/spend", "/events"]) {
      const res = await fetch(`${s.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(await res.text()).toContain('<div id="root">');
    }
  });

  it("Spend: the summary matches GET /v1/balance; today's and the period's totals; the chart and its table", async () => {
    await page.getByRole("link", { name: "Spend" }).click();
    await page.getByRole("heading", { name: "Spend", level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/spend");
    expect(await page.title()).toBe("Spend · cardctl");
    const b = (await api("GET", "/v1/balance", fullKey)).body;
    expect(b).toMatchObject({ open_cards: 22, pending_approvals: 1, max_per_card_cents: 20000, approval_required: true, setup_complete: true, uncollected_cents: 0 });
    const summary: [string, string][] = [
      ["Held on open cards", dollars(b.held_cents)],
      ["Open cards", String(b.open_cards)],
      ["Pending approvals", String(b.pending_approvals)],
      ["Uncollected", dollars(b.uncollected_cents)],
      ["Maximum per card", dollars(b.max_per_card_cents)],
      ["Approval required", "Yes"],
      ["Setup complete", "Yes"],
    ];
    for (const [term, value] of summary) await expect.poll(() => fact(term).textContent(), { message: term }).toBe(value);

    // $12.34 + $25.00 - $5.00, in three transactions, all today.
    await expect.poll(() => fact("Today").textContent()).toBe("$32.34");
    expect(await fact("Last 30 days").textContent()).toBe("$32.34 (3 transactions)");
    const chart = page.getByRole("img", { name: /^Daily spend/ });
    expect(await chart.getAttribute("aria-label")).toMatch(/\$32\.34 in all, most on .+ \(\$32\.34\); today \$32\.34\.$/);
    expect(await chart.locator("rect").count()).toBe(1);

    await page.getByText("Daily spend as a table").click();
    const rows = page.getByRole("table").getByRole("row");
    await expect.poll(() => rows.count()).toBe(31);
    const cells = (i: number) => rows.nth(i).getByRole("cell").allTextContents();
    expect(await cells(30)).toEqual(["$32.34", "3"]);
    for (let i = 1; i < 30; i++) expect(await cells(i)).toEqual(["$0.00", "0"]);
    await d.shoot("spend");

    // Live: a purchase elsewhere shows without a reload.
    await page.evaluate(() => ((window as unknown as { stayed: boolean }).stayed = true));
    const [pending] = (await api("GET", "/v1/approvals?status=PENDING", fullKey)).body.data;
    const issued = (await api("POST", `/v1/approvals/${pending.id}/approve`, fullKey)).body;
    expect((await api("POST", `/v1/test_helpers/cards/${issued.id}/purchase`, agentKey, { amount_cents: 666, merchant: "Late Shop" })).body.approved).toBe(true);
    await expect.poll(() => fact("Today").textContent()).toBe("$39.00");
    await expect.poll(() => fact("Pending approvals").textContent()).toBe("0");
    expect(await fact("Last 30 days").textContent()).toBe("$39.00 (4 transactions)");
    expect(await page.evaluate(() => (window as unknown as { stayed?: boolean }).stayed)).toBe(true);
    const after = (await api("GET", "/v1/balance", fullKey)).body;
    await expect.poll(() => fact("Held on open cards").textContent()).toBe(dollars(after.held_cents));
  });

  it("Events: newest first, 20 at a time with Load more, the newest matching the API", async () => {
    await page.getByRole("link", { name: "Events" }).click();
    await page.getByRole("heading", { name: "Events", level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/events");
    const all = await allEvents();
    expect(all.length).toBeGreaterThan(20);
    await expect.poll(() => events().count()).toBe(20);
    for (let i = 0; i < 20; i++) expect(await events().nth(i).getAttribute("aria-label"), `item ${i}`).toBe(`Event ${all[i]!.type}`);
    // The oldest event, the first card's creation, is not on the first page.
    expect(await page.getByText(firstCard.id).count()).toBe(0);
    await d.shoot("events");

    const more = page.getByRole("button", { name: "Load more" });
    for (let shown = 20; shown < all.length; ) {
      await more.click();
      shown = Math.min(shown + 20, all.length);
      await expect.poll(() => events().count()).toBe(shown);
    }
    await more.waitFor({ state: "detached" });
    await page.getByText(firstCard.id).waitFor();
    const labels = await events().evaluateAll((items) => items.map((li) => li.getAttribute("aria-label")));
    expect(labels).toEqual(all.map((e) => `Event ${e.type}`));
  });

  it("Events: the type filter, an event's data, the empty state, and new events live", async () => {
    const refunds = (await allEvents("transaction.created")).filter((e) => e.data.object.type === "refund");
    expect(refunds).toHaveLength(1);
    await page.getByLabel("Type").selectOption("transaction.created");
    await page.getByText("Loading…").waitFor({ state: "detached" });
    const txns = await allEvents("transaction.created");
    expect(txns).toHaveLength(4);
    await expect.poll(() => events().count()).toBe(4);
    expect(await page.getByRole("listitem", { name: "Event transaction.created" }).count()).toBe(4);
    expect(await page.getByRole("button", { name: "Load more" }).count()).toBe(0);

    // The newest: the purchase at the Late Shop; its data is the transaction as the API shows it.
    const newest = events().first();
    await newest.getByRole("button", { name: "Show data" }).click();
    const data = newest.getByLabel(`Data of ${txns[0]!.id}`);
    await data.waitFor();
    expect(JSON.parse((await data.textContent())!)).toEqual(txns[0]!.data.object);
    expect(txns[0]!.data.object).toMatchObject({ type: "capture", amount_cents: 666, merchant_name: "Late Shop" });
    expect(await newest.getByRole("button", { name: "Hide data" }).getAttribute("aria-expanded")).toBe("true");
    await d.shoot("events-data");
    await newest.getByRole("button", { name: "Hide data" }).click();
    await data.waitFor({ state: "detached" });

    await page.getByLabel("Type").selectOption("webhook_endpoint.disabled");
    await page.getByText("No events of this type.").waitFor();

    await page.getByLabel("Type").selectOption("card.created");
    await expect.poll(async () => events().count()).toBe(20);
    await page.getByRole("button", { name: "Load more" }).waitFor();
    expect((await api("PUT", "/v1/policies/default", fullKey, { approval_required: false })).status).toBe(200);
    const fresh = (await api("POST", "/v1/cards", fullKey, { amount_cents: 900, agent_id: "latecomer" })).body;
    expect(fresh.status).toBe("OPEN");
    await events().first().getByText(fresh.id).waitFor();
    expect(await events().first().getAttribute("aria-label")).toBe("Event card.created");
  });

  it("Events: a burst of events shows as it streams, without a read of the list per event (an owner's requests are rate limited)", async () => {
    await page.getByLabel("Type").selectOption("");
    await page.getByText("Loading…").waitFor({ state: "detached" });
    const reads: string[] = [];
    // A read of the list starts at its first page (the later pages of the refetch that showing the
    // filter's cached list started may still be coming, and are read again once).
    const seen = (r: { url(): string }) => void (r.url().includes("/trpc/events.list") && !r.url().includes("starting_after") && reads.push(r.url()));
    page.on("request", seen);
    const made: string[] = [];
    for (let i = 0; i < 12; i++) made.push((await api("POST", "/v1/cards", fullKey, { amount_cents: 100 + i, agent_id: "burst" })).body.id);
    const shown = async () => (await events().allTextContents()).join(" ");
    const missing = async () => {
      const text = await shown();
      return made.filter((id) => !text.includes(id));
    };
    await expect.poll(missing, { timeout: 10_000 }).toEqual([]);
    page.off("request", seen);
    // At most the read again of one still under way when the burst began (one per event before).
    expect(reads.length).toBeLessThanOrEqual(2);
  });

  it("loaded nothing the CSP blocked and threw no error", () => {
    expect(d.problems).toEqual([]);
  });
});
