import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../../../apps/server/test/harness.js";
import { run, tempConfigDir } from "./helpers.js";

/** `cardctl policy check`: the dry run of `cards create`; exit 0 issue/approval_required, 1 denied. */
let s: TestServer;
let env: Record<string, string>;

beforeAll(async () => {
  s = await startServer();
  env = { CARDCTL_BASE_URL: s.url, CARDCTL_CONFIG_DIR: tempConfigDir() };
});
afterAll(async () => {
  await s?.close();
});

/** A fresh account (setup as given) with a policy, and a CLI bound to its key. */
async function account(o: { kyb?: boolean; paymentMethod?: string | null; policy?: object } = {}) {
  const acct = await s.newAccount(o);
  const key = await acct.key();
  if (o.policy) expect((await s.request("PUT", "/v1/policies/default", { key, body: o.policy })).status).toBe(200);
  return { key, cli: (args: string[]) => run(["policy", "check", ...args], { env: { ...env, CARDCTL_API_KEY: key } }) };
}

describe("cardctl policy check", () => {
  it("issue: exit 0, the decision and the effective policy in dollars", async () => {
    const { cli, key } = await account({ policy: { max_amount_cents: 2000 } });
    const r = await cli(["--amount", "12.50", "--agent", "shopper-1"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("A card for $12.50 would be issued now.");
    expect(r.stdout).toMatch(/Decision\s+issue/);
    expect(r.stdout).toMatch(/Approval required\s+no/);
    expect(r.stdout).toMatch(/Max per card\s+\$20\.00/);
    expect(r.stdout).not.toContain("Reasons");
    // A dry run: nothing was made.
    expect((await s.request("GET", "/v1/balance", { key })).body).toMatchObject({ held_cents: 0, open_cards: 0, pending_approvals: 0 });
  });

  it("approval_required: exit 0; --require-approval is the override, the policy is named otherwise", async () => {
    const { cli } = await account();
    const r = await cli(["--amount", "5", "--require-approval"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("A card for $5.00 would wait for a human's approval.");
    expect(r.stdout).toMatch(/Approval required\s+yes/);
    expect(r.stdout).toContain("  - approval_required: this request asks for a human's approval (--require-approval).");
    const byPolicy = await (await account({ policy: { approval_required: true } })).cli(["--amount", "5", "--json"]);
    expect(byPolicy.code).toBe(0);
    expect(byPolicy.json()).toEqual({
      decision: "approval_required",
      reasons: [{ code: "approval_required", message: "The default policy requires a human's approval for new cards.", details: { source: "policy" } }],
      effective_policy: { approval_required: true, max_amount_cents: 50000 },
    });
  });

  it("denied over the maximum: exit 1, the maximum in dollars; --json is the API's answer", async () => {
    const { cli } = await account({ policy: { max_amount_cents: 1000 } });
    const r = await cli(["--amount", "12.50"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("A card for $12.50 would be denied.");
    expect(r.stdout).toMatch(/Decision\s+denied/);
    expect(r.stdout).toContain("  - amount_over_max: $12.50 is over the maximum of $10.00 per card.");
    const tighter = await cli(["--amount-cents", "900", "--max", "8.00", "--json"]);
    expect(tighter.code).toBe(1);
    expect(tighter.json()).toMatchObject({
      decision: "denied",
      reasons: [{ code: "amount_over_max", details: { max_amount_cents: 800, requested: 900 } }],
      effective_policy: { approval_required: false, max_amount_cents: 800 },
    });
  });

  it("denied for set-up: exit 1, what is missing and where to finish it", async () => {
    const { cli } = await account({ kyb: false, paymentMethod: null });
    const r = await cli(["--amount", "1"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("  - setup_required: account setup is incomplete (kyb, payment_method missing).");
    expect(r.stdout).toContain("Finish account setup at: http://cardctl.test/setup");
  });

  it("bad flags exit 2; an amount the API refuses is a validation error in dollars (exit 1)", async () => {
    const { cli } = await account();
    expect((await cli([])).code).toBe(2);
    expect((await cli(["--amount", "1.234"])).code).toBe(2);
    expect((await cli(["--amount", "1", "--amount-cents", "100"])).code).toBe(2);
    const big = await cli(["--amount", "600"]);
    expect(big.code).toBe(1);
    expect(big.stderr).toContain('--amount must be an amount in dollars from $0.01 to $500.00, got "600"');
    expect(big.stderr).toContain("code: validation_error (HTTP 400)");
  });
});
