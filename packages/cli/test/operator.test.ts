import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

    const ok = await run(["cards", "create", "--amount", "5", "--json"], { env: { ...env, CARDCTL_API_KEY: secret } });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.json().status).toBe("OPEN");

    const removed = await run(["accounts", "set-payment-method", acct.id, "--remove", "--json"], { env });
    expect(removed.json().payment_method).toBeNull();
    expect((await run(["accounts", "set-payment-method", acct.id], { env })).code).toBe(2);
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
