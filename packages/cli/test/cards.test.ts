import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../../../apps/server/test/harness.js";
import { run, tempConfigDir } from "./helpers.js";

let s: TestServer;
let env: Record<string, string>;
const cli = (args: string[], extra: Record<string, string | undefined> = {}) => run(args, { env: { ...env, ...extra } });

beforeAll(async () => {
  s = await startServer();
  env = { CARDCTL_BASE_URL: s.url, CARDCTL_API_KEY: s.apiKey, CARDCTL_CONFIG_DIR: tempConfigDir() };
});
afterAll(async () => {
  await s?.close();
});

describe("cards", () => {
  let cardId: string;

  it("creates a card: table output with $ amounts", async () => {
    const r = await cli(["cards", "create", "--amount", "12.50", "--agent", "shopper-1", "--purpose", "API credits"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Card issued");
    expect(r.stdout).toMatch(/ID\s+card_\w+/);
    expect(r.stdout).toMatch(/Limit\s+\$12\.50/);
    expect(r.stdout).toMatch(/Status\s+OPEN/);
    expect(r.stdout).toMatch(/Agent\s+shopper-1/);
    expect(r.stdout).not.toMatch(/\x1b\[/); // not a TTY: no colour
    cardId = /card_\w+/.exec(r.stdout)![0];
  });

  it("creates a card with --json: the API's JSON", async () => {
    const r = await cli(["cards", "create", "--amount-cents", "1999", "--agent", "shopper-2", "--json"]);
    expect(r.code).toBe(0);
    const card = r.json();
    expect(card).toMatchObject({ status: "OPEN", spending_limit_cents: 1999, remaining_cents: 1999, agent_id: "shopper-2" });
    expect(card.id).toMatch(/^card_/);
    expect(card.last_four).toMatch(/^\d{4}$/);
  });

  it("--idempotency-key: a retry answers with the same card; an empty key is a usage error, not a request without one", async () => {
    const apiKey = await (await s.newAccount()).key();
    const own = (args: string[]) => cli(args, { CARDCTL_API_KEY: apiKey });
    const key = `order-${Date.now()}`;
    const first = await own(["cards", "create", "--amount-cents", "777", "--idempotency-key", key, "--json"]);
    const again = await own(["cards", "create", "--amount-cents", "777", "--idempotency-key", key, "--json"]);
    expect(first.code).toBe(0);
    expect(again.json().id).toBe(first.json().id);
    const empty = await own(["cards", "create", "--amount-cents", "777", "--idempotency-key", ""]);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain("--idempotency-key must be 1 to 199 characters (it is empty");
    expect(await own(["cards", "create", "--amount-cents", "777", "--idempotency-key", "k".repeat(200)])).toMatchObject({ code: 2 });
    expect((await s.request("GET", "/v1/cards", { key: apiKey })).body.data).toHaveLength(1);
  });

  it("lists cards as a table and as JSON; filters, limit and --all", async () => {
    // A wide terminal ($COLUMNS when stdout is not a terminal): every column; at 80 see polish.test.ts.
    const t = await cli(["cards", "list"], { COLUMNS: "200" });
    expect(t.code).toBe(0);
    const lines = t.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^ID\s+STATUS\s+AMOUNT\s+REMAINING\s+CARD\s+AGENT\s+PURPOSE\s+CREATED$/);
    expect(lines).toHaveLength(3);
    expect(t.stdout).toMatch(new RegExp(`${cardId}\\s+OPEN\\s+\\$12\\.50\\s+\\$12\\.50\\s+•••• \\d{4}\\s+shopper-1\\s+API credits\\s+just now`));
    // the header and the rows line up
    const col = lines[0]!.indexOf("STATUS");
    expect(lines[1]!.slice(col, col + 4)).toBe("OPEN");

    const j = await cli(["cards", "list", "--json"]);
    expect(j.json()).toMatchObject({ has_more: false });
    expect(j.json().data.map((c: any) => c.amount_cents)).toEqual([1999, 1250]);

    const one = await cli(["cards", "list", "--limit", "1", "--json"]);
    expect(one.json().data).toHaveLength(1);
    expect(one.json().has_more).toBe(true);
    const page = await cli(["cards", "list", "--limit", "1"]);
    // a hint, not data: on stderr (polish.test.ts)
    expect(page.stderr).toContain("More cards exist");

    const all = await cli(["cards", "list", "--limit", "1", "--all", "--json"]);
    expect(all.json().data).toHaveLength(2);

    const agent = await cli(["cards", "list", "--agent", "shopper-2", "--json"]);
    expect(agent.json().data.map((c: any) => c.agent_id)).toEqual(["shopper-2"]);

    const none = await cli(["cards", "list", "--status", "used"]);
    expect(none.code).toBe(0);
    expect(none.stdout.trim()).toBe("No cards.");
  });

  it("gets a card; the ephemeral key secret only in --json", async () => {
    const t = await cli(["cards", "get", cardId]);
    expect(t.code).toBe(0);
    expect(t.stdout).toMatch(new RegExp(`ID\\s+${cardId}`));
    expect(t.stdout).toMatch(/Purpose\s+API credits/);
    expect(t.stdout).toMatch(/Processor id\s+\S+/);
    const j = await cli(["cards", "get", cardId, "--json"]);
    const card = j.json();
    expect(card).toMatchObject({ id: cardId, amount_cents: 1250, status: "OPEN", closed_at: null });
    expect(typeof card.ephemeral_key_secret).toBe("string");
    expect(t.stdout).not.toContain(card.ephemeral_key_secret);
  });

  it("test purchase makes the card USED", async () => {
    const c = (await cli(["cards", "create", "--amount", "10", "--json"])).json();
    const r = await cli(["test", "purchase", c.id, "--amount", "4.00", "--merchant", "Coffee"]);
    expect(r.code).toBe(0);
    // The card shows its authorization and its settlement.
    const shown = await cli(["cards", "get", c.id]);
    expect(shown.stdout).toMatch(/Spent\s+\$4\.00/);
    expect(shown.stdout).toMatch(/Authorizations[\s\S]*auth_\w+\s+\$4\.00\s+approved\s+closed\s+Coffee/);
    expect(shown.stdout).toMatch(/Transactions[\s\S]*txn_\w+\s+capture\s+\$4\.00\s+Coffee/);
    const j = (await cli(["cards", "get", c.id, "--json"])).json();
    expect(j.authorizations).toMatchObject([{ amount_cents: 400, approved: true }]);
    expect(j.transactions).toMatchObject([{ type: "capture", amount_cents: 400 }]);
    expect(r.stdout).toContain("Purchase of $4.00 approved");
    expect(r.stdout).toMatch(/Status\s+USED/);
    const again = await cli(["test", "purchase", c.id, "--amount", "1.00", "--json"]);
    expect(again.code).toBe(1);
    expect(again.json()).toMatchObject({ approved: false });
  });

  it("close asks for confirmation: refused without --yes when not a terminal (exit 2)", async () => {
    const r = await cli(["cards", "close", cardId]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--yes");
    expect((await cli(["cards", "get", cardId, "--json"])).json().status).toBe("OPEN");

    const y = await cli(["cards", "close", cardId, "--yes"]);
    expect(y.code).toBe(0);
    expect(y.stdout).toContain(`Card ${cardId} is CLOSED`);
    const j = await cli(["cards", "close", cardId, "-y", "--json"]);
    expect(j.json()).toEqual({ ok: true, status: "CLOSED" });
    expect((await cli(["cards", "get", cardId, "--json"])).json().status).toBe("CLOSED");
  });
});

describe("balance and policy", () => {
  it("balance: table and JSON", async () => {
    const t = await cli(["balance"]);
    expect(t.code).toBe(0);
    expect(t.stdout).toMatch(/Held\s+\$\d+\.\d\d/);
    expect(t.stdout).toMatch(/Max per card\s+\$500\.00/);
    expect(t.stdout).toMatch(/Setup complete\s+yes/);
    expect(t.stdout).toMatch(/Uncollected\s+\$0\.00/);
    const j = (await cli(["balance", "--json"])).json();
    expect(Object.keys(j).sort()).toEqual(
      ["approval_required", "held_cents", "max_per_card_cents", "open_cards", "pending_approvals", "setup_complete", "uncollected_cents"].sort(),
    );
  });

  it("policy get / set", async () => {
    const g = await cli(["policy", "get"]);
    expect(g.stdout).toMatch(/Approval required\s+no/);
    expect(g.stdout).toMatch(/Max per card\s+\$500\.00/);
    const set = await cli(["policy", "set", "--max", "250.00", "--approval-required", "--json"]);
    expect(set.code).toBe(0);
    expect(set.json()).toEqual({ approval_required: true, max_amount_cents: 25000 });
    const t = await cli(["policy", "set", "--no-approval-required", "--max", "500"]);
    expect(t.stdout).toContain("Default policy updated");
    expect(t.stdout).toMatch(/Approval required\s+no/);
    expect((await cli(["policy", "get", "--json"])).json()).toEqual({ approval_required: false, max_amount_cents: 50000 });
    const none = await cli(["policy", "set"]);
    expect(none.code).toBe(2);
    // The spelling of `cards create --require-approval` works here too.
    expect((await cli(["policy", "set", "--require-approval", "--json"])).json()).toEqual({ approval_required: true, max_amount_cents: 50000 });
    expect((await cli(["policy", "set", "--no-require-approval", "--json"])).json()).toEqual({ approval_required: false, max_amount_cents: 50000 });
  });
});

describe("approvals", () => {
  it("create → pending; list; approve; reject; approve twice is an API error", async () => {
    const p = await cli(["cards", "create", "--amount", "7.25", "--agent", "bot", "--purpose", "needs a human", "--require-approval"]);
    expect(p.code).toBe(0);
    expect(p.stdout).toContain("PENDING_APPROVAL");
    const id1 = /appr_\w+/.exec(p.stdout)![0];
    const p2 = (await cli(["cards", "create", "--amount", "3", "--require-approval", "--json"])).json();
    expect(p2).toMatchObject({ status: "PENDING_APPROVAL" });
    const id2 = p2.approval_id as string;

    const list = await cli(["approvals", "list"], { COLUMNS: "200" });
    expect(list.stdout.split("\n")[0]).toMatch(/^ID\s+STATUS\s+AMOUNT\s+AGENT\s+PURPOSE\s+CREATED\s+EXPIRES/);
    expect(list.stdout).toMatch(new RegExp(`${id1}\\s+PENDING\\s+\\$7\\.25\\s+bot\\s+needs a human\\s+just now\\s+in (23 h|1 day)`));
    const lj = (await cli(["approvals", "list", "--json"])).json();
    expect(lj.data.map((a: any) => a.id)).toEqual([id2, id1]);

    const a = await cli(["approvals", "approve", id1]);
    expect(a.code).toBe(0);
    expect(a.stdout).toContain(`Approved ${id1}`);
    expect(a.stdout).toMatch(/Limit\s+\$7\.25/);

    const r = await cli(["approvals", "reject", id2, "--reason", "too much", "--json"]);
    expect(r.json()).toEqual({ ok: true, status: "REJECTED" });
    const rejected = (await cli(["approvals", "list", "--status", "rejected", "--json"])).json();
    expect(rejected.data[0]).toMatchObject({ id: id2, reason: "too much" });
    const got = await cli(["approvals", "get", id2]);
    expect(got.code, got.stderr).toBe(0);
    expect(got.stdout).toMatch(new RegExp(`ID\\s+${id2}`));
    expect(got.stdout).toMatch(/Status\s+REJECTED/);
    expect(got.stdout).toMatch(/Amount\s+\$3\.00/);
    expect(got.stdout).toMatch(/Reason\s+too much/);
    expect((await cli(["approvals", "get", id1, "--json"])).json()).toMatchObject({ id: id1, status: "APPROVED", card_id: expect.stringMatching(/^card_/) });
    expect((await cli(["approvals", "get", "appr_nope"])).code).toBe(1);

    const again = await cli(["approvals", "approve", id1]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("approval_not_pending");
    expect(again.stderr).toContain("The approval is already APPROVED");
    expect(again.stderr).toMatch(/request id: req_\w+/);
  });

  it("cards create --wait waits for the decision and prints the card", async () => {
    const child = run(["cards", "create", "--amount", "2.00", "--require-approval", "--wait", "--json"], { env });
    let approval: any;
    for (let i = 0; i < 100 && !approval; i++) {
      await new Promise((r) => setTimeout(r, 100));
      approval = (await s.request("GET", "/v1/approvals")).body.data.find((x: any) => x.amount_cents === 200);
    }
    expect(approval).toBeTruthy();
    expect((await s.request("POST", `/v1/approvals/${approval.id}/approve`)).status).toBe(201);
    const r = await child;
    expect(r.code).toBe(0);
    expect(r.json()).toMatchObject({ status: "OPEN", amount_cents: 200, id: approval.card_id ?? expect.stringMatching(/^card_/) });
  });

  it("cards create --wait on a rejection exits 1", async () => {
    const child = run(["cards", "create", "--amount", "2.50", "--require-approval", "--wait"], { env });
    let approval: any;
    for (let i = 0; i < 100 && !approval; i++) {
      await new Promise((r) => setTimeout(r, 100));
      approval = (await s.request("GET", "/v1/approvals")).body.data.find((x: any) => x.amount_cents === 250);
    }
    expect((await s.request("POST", `/v1/approvals/${approval.id}/reject`, { body: { reason: "no" } })).status).toBe(200);
    const r = await child;
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("PENDING_APPROVAL");
    expect(r.stderr.toLowerCase()).toContain("rejected");
  });
});

describe("errors and exit codes", () => {
  it("policy_violation shows the maximum", async () => {
    const r = await cli(["cards", "create", "--amount", "12.50", "--max", "10.00"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("code: policy_violation (HTTP 403)");
    expect(r.stderr).toContain("The policy maximum per card is $10.00 (requested $12.50)");
    // The maximum came from this request's own --max: raising the policy would change nothing.
    expect(r.stderr).toContain("this request's --max may have set it");
    expect(r.stderr).not.toContain("cardctl policy set");
    expect(r.stderr).toMatch(/request id: req_\w+/);
    const j = await cli(["cards", "create", "--amount", "12.50", "--max", "10.00", "--json"]);
    expect(j.code).toBe(1);
    expect(j.json().error).toMatchObject({ code: "policy_violation", details: { max_amount_cents: 1000, requested: 1250 } });
  });

  it("the API's amounts are in dollars when none was typed in cents (approvals approve), in cents when typed so", async () => {
    const key = await (await s.newAccount()).key();
    const pending = await s.request("POST", "/v1/cards", { key, body: { amount_cents: 2000, policy_override: { approval_required: true } } });
    expect(pending.status).toBe(202);
    // The maximum was lowered while the request waited: approving it is refused.
    await s.request("PUT", "/v1/policies/default", { key, body: { max_amount_cents: 1000 } });
    const r = await cli(["approvals", "approve", pending.body.approval_id], { CARDCTL_API_KEY: key });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("Error: The amount $20.00 exceeds the policy maximum of $10.00.");
    expect(r.stderr).not.toContain("cents");
    const typed = await cli(["cards", "create", "--amount-cents", "2500"], { CARDCTL_API_KEY: key });
    expect(typed.stderr).toContain("Error: The amount 2500 cents exceeds the policy maximum of 1000 cents.");
  });

  it("setup_required shows what is missing and the setup_url", async () => {
    const acct = await s.newAccount({ kyb: false, paymentMethod: null });
    const key = await acct.key();
    const r = await cli(["cards", "create", "--amount", "5"], { CARDCTL_API_KEY: key });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("code: setup_required");
    expect(r.stderr).toContain("Missing: business verification (kyb), a saved payment method.");
    expect(r.stderr).toMatch(/Finish account setup at: http:\/\/cardctl\.test\/\S+/);
  });

  it("payment_method_declined says nothing was held and who must fix it", async () => {
    const acct = await s.newAccount({ paymentMethod: "pm_card_decline" });
    const r = await cli(["cards", "create", "--amount", "5"], { CARDCTL_API_KEY: await acct.key() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("code: payment_method_declined (HTTP 402)");
    expect(r.stderr).toContain("The account's payment method refused the hold; nothing was held.");
  });

  it("API errors exit 1 with code, message and request id", async () => {
    const r = await cli(["cards", "get", "card_doesnotexist"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("code: not_found (HTTP 404)");
    expect(r.stderr).toMatch(/request id: req_\w+/);
    const j = await cli(["cards", "get", "card_doesnotexist", "--json"]);
    expect(j.json().error).toMatchObject({ code: "not_found" });
    expect(j.json().error.request_id).toMatch(/^req_/);
  });

  it("an agent key cannot approve (403 forbidden, exit 1)", async () => {
    const acct = await s.newAccount();
    const agentKey = await acct.key("test", "agent");
    const r = await cli(["approvals", "approve", "appr_whatever"], { CARDCTL_API_KEY: agentKey });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("code: forbidden");
    expect(r.stderr).toContain("Use a 'full' key.");
  });

  it("a test helper with a live key: forbidden, and the hint is about the key's mode, not its role", async () => {
    const liveKey = await (await s.newAccount()).key("live", "full");
    const r = await cli(["test", "purchase", "card_whatever", "--amount", "1"], { CARDCTL_API_KEY: liveKey });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("Test helpers work only with sk_test_ keys");
    expect(r.stderr).toContain("Use a test-mode key (sk_test_…)");
    expect(r.stderr).not.toContain("'full' key");
  });

  it("approvals list shows 20 and says how to see the rest: --limit and --all", async () => {
    const acct = await s.newAccount();
    const key = await acct.key();
    await s.request("PUT", "/v1/policies/default", { key, body: { approval_required: true } });
    for (let i = 0; i < 23; i++) expect((await s.request("POST", "/v1/cards", { key, body: { amount_cents: 100 + i } })).status).toBe(202);
    const first = await cli(["approvals", "list"], { CARDCTL_API_KEY: key });
    expect(first.stdout.match(/appr_\w+/g)).toHaveLength(20);
    expect(first.stderr).toContain("More approvals exist: use --all or a larger --limit.");
    expect((await cli(["approvals", "list", "--limit", "21", "--json"], { CARDCTL_API_KEY: key })).json().data).toHaveLength(21);
    const all = (await cli(["approvals", "list", "--all", "--json"], { CARDCTL_API_KEY: key })).json();
    expect(all).toMatchObject({ has_more: false });
    expect(new Set(all.data.map((a: any) => a.id)).size).toBe(23);
    expect((await cli(["approvals", "list", "--limit", "0"], { CARDCTL_API_KEY: key })).code).toBe(2);
  });

  it("authentication errors exit 3", async () => {
    const bad = await cli(["balance"], { CARDCTL_API_KEY: "sk_test_notarealkeynotarealkeynotarealkey" });
    expect(bad.code).toBe(3);
    expect(bad.stderr).toContain("unauthorized");
    const none = await cli(["balance"], { CARDCTL_API_KEY: undefined });
    expect(none.code).toBe(3);
    expect(none.stderr).toContain("cardctl login");
  });

  it("usage errors exit 2", async () => {
    for (const args of [
      ["cards", "create", "--amount", "12.505"],
      ["cards", "create", "--amount", "abc"],
      ["cards", "create", "--amount", "0"],
      ["cards", "create", "--amount", "1e3"],
      ["cards", "create", "--amount", "1", "--amount-cents", "100"],
      ["cards", "create"],
      ["cards", "list", "--status", "bogus"],
      ["cards", "list", "--limit", "101"],
      ["cards", "get"],
      ["cards", "frobnicate"],
      ["nonsense"],
      ["balance", "--bogus-flag"],
      ["completion", "fish"],
    ]) {
      const r = await cli(args);
      expect(r.code, args.join(" ") + "\n" + r.stderr).toBe(2);
      expect(r.stderr).not.toBe("");
    }
  });

  it("a server that cannot be reached exits 1 with a hint", async () => {
    const r = await cli(["balance"], { CARDCTL_BASE_URL: "http://127.0.0.1:9" });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("Could not reach http://127.0.0.1:9");
  });

  it("a create whose outcome is unknown tells the key to repeat it with; repeated with it, it makes one card", async () => {
    const r = await cli(["cards", "create", "--amount", "3.10", "--json"], { CARDCTL_BASE_URL: "http://127.0.0.1:9" });
    expect(r.code).toBe(1);
    const key = JSON.parse(r.stdout).error.idempotency_key as string;
    expect(key).toMatch(/^sdk_/);
    expect(r.stderr).toContain(`run the same command again with --idempotency-key ${key}`);
    const first = await cli(["cards", "create", "--amount", "3.10", "--idempotency-key", key, "--json"]);
    const again = await cli(["cards", "create", "--amount", "3.10", "--idempotency-key", key, "--json"]);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(again.stdout).id).toBe(JSON.parse(first.stdout).id);
    // A definite refusal is no unknown outcome: no key to repeat it with.
    const refused = await cli(["cards", "create", "--amount", "600"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).not.toContain("--idempotency-key");
  });
});

describe("output", () => {
  it("colours only when forced and never with NO_COLOR", async () => {
    const forced = await cli(["cards", "list", "--status", "open"], { FORCE_COLOR: "1" });
    expect(forced.stdout).toMatch(/\x1b\[32mOPEN\x1b\[39m/);
    const no = await cli(["cards", "list", "--status", "open"], { FORCE_COLOR: "1", NO_COLOR: "1" });
    expect(no.stdout).not.toMatch(/\x1b\[/);
    const flag = await cli(["cards", "list", "--no-color"], { FORCE_COLOR: "1" });
    expect(flag.stdout).not.toMatch(/\x1b\[/);
  });

  it("help and version exit 0; a missing command exits 2 with the help", async () => {
    const h = await cli(["--help"]);
    expect(h.code).toBe(0);
    expect(h.stdout).toContain("Exit codes: 0 success, 1 API error, 2 usage error, 3 authentication error");
    const v = await cli(["--version"]);
    expect(v.code).toBe(0);
    expect(v.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
    const sub = await cli(["cards", "create", "--help"]);
    expect(sub.code).toBe(0);
    expect(sub.stdout).toContain("--amount-cents");
    // Without the command it needs, the help goes to stderr and the exit code says usage error.
    for (const args of [[], ["cards"]]) {
      const missing = await cli(args);
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain("Usage: cardctl");
    }
  });

  it("completion bash|zsh prints valid scripts", async () => {
    const b = await cli(["completion", "bash"]);
    expect(b.code).toBe(0);
    expect(b.stdout).toContain("complete -F _cardctl cardctl");
    expect(b.stdout).toContain('"approvals") words="list get approve reject watch');
    const z = await cli(["completion", "zsh"]);
    expect(z.stdout.startsWith("#compdef cardctl")).toBe(true);
    const { spawnSync } = await import("node:child_process");
    const check = spawnSync("bash", ["-n"], { input: b.stdout });
    expect(check.status, check.stderr?.toString()).toBe(0);
  });
});
