import { spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../../../apps/server/test/harness.js";
import { BIN, run, tempConfigDir } from "./helpers.js";

/** Issue 14.9: the CLI's polish, compared with gh and the Stripe CLI. Output is not a TTY: 80 columns. */
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

/** A port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

describe("amounts typed in dollars come back in dollars", () => {
  it("--amount over the API's maximum: the flag and dollars, not amount_cents and cents", async () => {
    const r = await cli(["cards", "create", "--amount", "600"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('Error: Invalid request: --amount must be an amount in dollars from $0.01 to $500.00, got "600".');
    expect(r.stderr).not.toContain("amount_cents");
    expect(r.stderr).toContain("code: validation_error (HTTP 400)");
    // --json keeps the API's own error
    const j = await cli(["cards", "create", "--amount", "600", "--json"]);
    expect(j.json().error.details.issues).toEqual([{ path: "amount_cents", message: "amount_cents must be an integer number of cents from 1 to 50000" }]);
  });

  it("--max of policy set, too; that of cards create only tightens, so one above the policy's has no effect", async () => {
    const r = await cli(["cards", "create", "--amount", "5", "--max", "1000", "--json"]);
    expect(r.code).toBe(0);
    expect(r.json()).toMatchObject({ status: "OPEN", spending_limit_cents: 500 });
    const p = await cli(["policy", "set", "--max", "750.50"]);
    expect(p.code).toBe(1);
    expect(p.stderr).toContain('Error: Invalid request: --max must be an amount in dollars from $0.01 to $500.00, got "750.50".');
  });

  it("a policy violation's message is in dollars when the amount was typed in dollars; in cents with --amount-cents", async () => {
    const r = await cli(["cards", "create", "--amount", "12.50", "--max", "10"]);
    expect(r.stderr).toContain("Error: The amount $12.50 exceeds the policy maximum of $10.00.");
    const j = await cli(["cards", "create", "--amount", "12.50", "--max", "10", "--json"]);
    expect(j.json().error.message).toBe("The amount 1250 cents exceeds the policy maximum of 1000 cents.");
  });

  it("--amount-cents out of range: the API's sentence as it is", async () => {
    const r = await cli(["cards", "create", "--amount-cents", "60000"]);
    expect(r.stderr).toContain("Error: Invalid request: amount_cents must be an integer number of cents from 1 to 50000.");
  });
});

describe("hints on stderr, data on stdout", () => {
  it("'More cards exist' goes to stderr; stdout is the table alone", async () => {
    await s.request("POST", "/v1/cards", { body: { amount_cents: 100 } });
    await s.request("POST", "/v1/cards", { body: { amount_cents: 200 } });
    const r = await cli(["cards", "list", "--limit", "1"]);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain("More cards exist");
    expect(r.stderr).toContain("More cards exist: use --all or a larger --limit.");
    expect(r.stdout.trim().split("\n")).toHaveLength(2);
  });

  it("the 'Approve with' hint of a pending request goes to stderr", async () => {
    const r = await cli(["cards", "create", "--amount", "3", "--require-approval"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("PENDING_APPROVAL");
    expect(r.stdout).not.toContain("Approve with");
    expect(r.stderr).toMatch(/Approve with: cardctl approvals approve appr_\w+/);
  });
});

describe("tables fit the terminal (80 columns when not a terminal)", () => {
  const long = "A very long purpose that explains in great detail what this card will be used for by the agent";

  it("cards list: every line fits in 80 columns; the purpose is cut with …", async () => {
    await s.request("POST", "/v1/cards", { body: { amount_cents: 4321, agent_id: "agent-with-a-long-name-here", purpose: long } });
    const r = await cli(["cards", "list"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(80);
    expect(lines[0]).toMatch(/^ID\s+STATUS\s+AMOUNT\s+AGENT\s+PURPOSE\s+CREATED$/);
    const row = lines.find((l) => l.includes("$43.21"))!;
    expect(row).toMatch(/ A very ?…/);
    expect(row).not.toContain(long);
    // the columns still line up
    const col = lines[0]!.indexOf("CREATED");
    expect(row.slice(col)).toMatch(/^just now/);
    // --json has it whole
    const j = await cli(["cards", "list", "--json"]);
    expect(j.json().data.find((c: any) => c.amount_cents === 4321).purpose).toBe(long);
  });

  it("$COLUMNS sets the width when stdout is not a terminal", async () => {
    const wide = await cli(["cards", "list"], { COLUMNS: "250" });
    expect(wide.stdout).toContain(long);
    expect(wide.stdout.split("\n")[0]).toMatch(/^ID\s+STATUS\s+AMOUNT\s+REMAINING\s+CARD\s+AGENT\s+PURPOSE\s+CREATED$/);
    const narrow = await cli(["cards", "list"], { COLUMNS: "100" });
    for (const line of narrow.stdout.trimEnd().split("\n")) expect(line.length, line).toBeLessThanOrEqual(100);
  });

  it("approvals list fits too", async () => {
    await s.request("POST", "/v1/cards", { body: { amount_cents: 999, purpose: long, policy_override: { approval_required: true } } });
    const r = await cli(["approvals", "list"]);
    expect(r.code).toBe(0);
    for (const line of r.stdout.trimEnd().split("\n")) expect(line.length, line).toBeLessThanOrEqual(80);
    expect(r.stdout).toContain("…");
  });
});

describe("help, flags and completion", () => {
  it("subcommand help lists the global flags", async () => {
    const h = await cli(["cards", "list", "--help"]);
    expect(h.code).toBe(0);
    expect(h.stdout).toContain("Global Options:");
    for (const flag of ["--json", "--profile <name>", "--base-url <url>", "--admin-token <token>", "--no-color"]) expect(h.stdout).toContain(flag);
    expect(h.stdout).not.toContain("--api-key"); // hidden stays hidden
    for (const line of h.stdout.split("\n")) expect(line.length, line).toBeLessThanOrEqual(80);
  });

  it("--base-url that is not an http(s) URL is a usage error (exit 2), from the flag or the environment", async () => {
    for (const bad of ["notaurl", "localhost:4000", "ftp://example.com", "http://x/?a=1"]) {
      const r = await cli(["balance", "--base-url", bad]);
      expect(r.code, bad).toBe(2);
      expect(r.stderr).toContain(`Error: --base-url must be an http:// or https:// URL like http://127.0.0.1:4000, got "${bad}".`);
    }
    const e = await cli(["balance"], { CARDCTL_BASE_URL: "127.0.0.1:4000" });
    expect(e.code).toBe(2);
    expect(e.stderr).toContain('CARDCTL_BASE_URL must be an http:// or https:// URL like http://127.0.0.1:4000, got "127.0.0.1:4000"');
    const j = await cli(["balance", "--base-url", "nope", "--json"]);
    expect(j.json().error.code).toBe("usage_error");
    // What commander itself refuses (a missing required option, an unknown flag) is an envelope on stdout too.
    const missing = await cli(["accounts", "create", "--json"]);
    expect(missing.code).toBe(2);
    expect(missing.json().error).toEqual({ code: "usage_error", message: "required option '--name <name>' not specified" });
    const unknown = await cli(["balance", "--frobnicate", "--json"]);
    expect(unknown.code).toBe(2);
    expect(unknown.json().error.code).toBe("usage_error");
  });

  it("connection errors name the full URL of the request, /v1/… or /admin/v1/…", async () => {
    const port = await closedPort();
    const base = `http://127.0.0.1:${port}`;
    const r = await cli(["cards", "list", "--base-url", base]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`Error: Could not reach ${base}/v1/cards (GET): `);
    expect(r.stderr).toContain("ECONNREFUSED");
    const b = await cli(["balance", "--base-url", `${base}/`]);
    expect(b.stderr).toContain(`Could not reach ${base}/v1/balance (GET)`);
    const a = await cli(["keys", "list", "--account", "acct_x", "--base-url", base, "--admin-token", "t"]);
    expect(a.stderr).toContain(`Could not reach ${base}/admin/v1/accounts/acct_x/keys (GET)`);
    const j = await cli(["cards", "list", "--base-url", base, "--json"]);
    expect(j.json().error).toMatchObject({ code: "connection_error" });
    expect(j.json().error.message).toContain(`${base}/v1/cards`);
  });

  it("durations in words: a --wait timeout says '1.5 s' / '15 min', not milliseconds", async () => {
    const r = await cli(["cards", "create", "--amount", "2", "--require-approval", "--wait", "--timeout", "1500ms"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/No decision on appr_\w+ within 1\.5 s; it is still pending\./);
    expect(r.stderr).not.toMatch(/\d+ ms/);
  });

  it("shell completion does not offer hidden flags", async () => {
    const b = await cli(["completion", "bash"]);
    expect(b.code).toBe(0);
    const root = b.stdout.split("\n").find((l) => l.startsWith('    "") words='))!;
    expect(root).toContain("--base-url");
    expect(root).not.toContain("--api-key");
    // login's own (visible) --api-key is still offered
    expect(b.stdout.split("\n").find((l) => l.startsWith('    "login") words='))).toContain("--api-key");
    const check = spawnSync("bash", ["-n"], { input: b.stdout });
    expect(check.status, check.stderr?.toString()).toBe(0);
  });
});

describe("pipes", () => {
  it("a reader that stops early (| head, | true) ends the command quietly with its own exit code", () => {
    // No server here: spawnSync blocks this process, which serves the suite's API.
    const script = `"${process.execPath}" "${BIN}" completion bash | true; echo "cardctl exited \${PIPESTATUS[0]}" >&2`;
    const r = spawnSync("bash", ["-c", script], { env: { ...process.env, ...env }, encoding: "utf8" });
    expect(r.stderr).not.toContain("EPIPE");
    expect(r.stderr).toContain("cardctl exited 0");
  });
});

describe("what agents wrote reaches the terminal escaped", () => {
  // A purpose that would draw a fake row, hide what follows and retitle the window; an agent id that moves the cursor.
  const purpose = "legit\nappr_FAKE  PENDING  $0.01  x\x1b[8mhidden\x1b[0m\r\u202eevil";
  const agent = "ag\x1b[2A\x1b]0;pwned\x07";
  /** Every escape sequence in the output is one of the CLI's own styles. */
  const onlyOwnStyles = (text: string) => expect(text.match(/\x1b(\[[0-9;]*m)?/g)?.filter((seq) => !/^\x1b\[(1|2|7|22|27|3[1-6]|39|90)m$/.test(seq)) ?? []).toEqual([]);

  it("approvals list, cards get and events list: one row each, control characters shown as escapes, the CLI's own colours kept", async () => {
    const created = await s.request("POST", "/v1/cards", { body: { amount_cents: 444, agent_id: agent, purpose, policy_override: { approval_required: true } } });
    expect(created.status).toBe(202);
    const approvals = await cli(["approvals", "list"], { COLUMNS: "400", FORCE_COLOR: "1" });
    expect(approvals.code).toBe(0);
    onlyOwnStyles(approvals.stdout);
    expect(approvals.stdout).not.toMatch(/[\r\x07\u202e]/);
    expect(approvals.stdout.split("\n").filter((line) => line.includes("appr_FAKE"))).toHaveLength(1);
    expect(approvals.stdout).toContain("legit\\nappr_FAKE");
    expect(approvals.stdout).toContain("\\u001b[8mhidden");
    const issued = await s.request("POST", "/v1/cards", { body: { amount_cents: 445, agent_id: agent, purpose } });
    const card = await cli(["cards", "get", issued.body.id], { FORCE_COLOR: "1" });
    expect(card.code).toBe(0);
    onlyOwnStyles(card.stdout);
    expect(card.stdout).toContain("ag\\u001b[2A\\u001b]0;pwned\\u0007");
    const events = await cli(["events", "list", "--limit", "5"], { COLUMNS: "400", FORCE_COLOR: "1" });
    expect(events.code).toBe(0);
    onlyOwnStyles(events.stdout);
    expect(events.stdout).not.toContain("\x07");
    // --json has the text as it is, JSON-escaped.
    expect((await cli(["cards", "get", issued.body.id, "--json"])).json().purpose).toBe(purpose);
  });
});
