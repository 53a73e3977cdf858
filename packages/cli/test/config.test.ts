import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../../../apps/server/test/harness.js";
import { run, tempConfigDir } from "./helpers.js";

let s: TestServer;
beforeAll(async () => {
  s = await startServer();
});
afterAll(async () => {
  await s?.close();
});

const mode = (path: string) => statSync(path).mode & 0o777;

describe("login, profiles and overrides", () => {
  it("login checks the key and stores it with mode 0600; later commands use it", async () => {
    const dir = tempConfigDir();
    const env = { CARDCTL_CONFIG_DIR: dir };
    const r = await run(["login", "--api-key", s.apiKey, "--base-url", s.url], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("Logged in to");
    expect(r.stdout).toContain("profile default (test mode");
    expect(r.stdout).not.toContain(s.apiKey);
    const file = join(dir, "config.json");
    expect(mode(file)).toBe(0o600);
    const cfg = JSON.parse(readFileSync(file, "utf8"));
    expect(cfg).toEqual({ current_profile: "default", profiles: { default: { api_key: s.apiKey, base_url: s.url, account_id: expect.stringMatching(/^acct_/) } } });

    const b = await run(["balance", "--json"], { env });
    expect(b.code).toBe(0);
    expect(b.json().setup_complete).toBe(true);

    const w = await run(["whoami", "--json"], { env });
    // The account, role and key id come from GET /v1/api_keys/current.
    const current = (await s.request("GET", "/v1/api_keys/current")).body;
    expect(w.json()).toMatchObject({ profile: "default", mode: "test", role: "full", base_url: s.url, key_source: "profile", account: current.account_id, key_id: current.id });
    const wt = await run(["whoami"], { env });
    expect(wt.stdout).toMatch(/Mode\s+test/);
    expect(wt.stdout).toMatch(/Role\s+full/);
    expect(wt.stdout).toMatch(new RegExp(`Account\\s+${current.account_id}`));
    expect(wt.stdout).toMatch(new RegExp(`Key\\s+${current.id} sk_test_…`));
    expect(wt.stdout).toContain(`Base URL  ${s.url}`);

    const out = await run(["logout"], { env });
    expect(out.code).toBe(0);
    expect(mode(file)).toBe(0o600);
    expect((await run(["balance"], { env })).code).toBe(3);
  });

  it("login reads the key from stdin when it is not a terminal; a bad key is refused (exit 3, nothing stored)", async () => {
    const dir = tempConfigDir();
    const ok = await run(["login", "--base-url", s.url], { env: { CARDCTL_CONFIG_DIR: dir }, input: `${s.apiKey}\n` });
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")).profiles.default.api_key).toBe(s.apiKey);

    const dir2 = tempConfigDir();
    const bad = await run(["login", "--api-key", "sk_test_wrongwrongwrongwrongwrongwrong12", "--base-url", s.url], {
      env: { CARDCTL_CONFIG_DIR: dir2 },
    });
    expect(bad.code).toBe(3);
    expect(bad.stderr).toContain("unauthorized");
    expect(bad.stderr).toContain("check --api-key / CARDCTL_API_KEY (operator commands: --admin-token / CARDCTL_ADMIN_TOKEN)");
    expect(existsSync(join(dir2, "config.json"))).toBe(false);
    const notAKey = await run(["login", "--api-key", "hello", "--base-url", s.url], { env: { CARDCTL_CONFIG_DIR: dir2 } });
    expect(notAKey.code).toBe(2);
    // Nothing piped in (stdin closed at once): a usage error, as no key given is.
    const none = await run(["login", "--base-url", s.url], { env: { CARDCTL_CONFIG_DIR: dir2 }, input: "" });
    expect(none.code, none.stderr).toBe(2);
    expect(none.stderr).toContain("No input (stdin closed).");
  });

  it("profiles: --profile, CARDCTL_PROFILE, profiles use / list", async () => {
    const dir = tempConfigDir();
    const env = { CARDCTL_CONFIG_DIR: dir };
    const acct = await s.newAccount({ name: "Other" });
    const agentKey = await acct.key("test", "agent");
    expect((await run(["login", "--api-key", s.apiKey, "--base-url", s.url], { env })).code).toBe(0);
    const wrongAccount = await run(["login", "--profile", "bot", "--api-key", agentKey, "--base-url", s.url, "--account", "acct_other"], { env });
    expect(wrongAccount.code).toBe(2);
    expect(wrongAccount.stderr).toContain(`This key belongs to account ${acct.id}, not acct_other; nothing was saved.`);
    const bot = await run(["login", "--profile", "bot", "--api-key", agentKey, "--base-url", s.url, "--account", acct.id, "--json"], { env });
    expect(bot.json()).toMatchObject({ profile: "bot", mode: "test", account: acct.id, role: "agent" });
    expect(mode(join(dir, "config.json"))).toBe(0o600);

    expect((await run(["whoami", "--json"], { env })).json()).toMatchObject({ profile: "default", role: "full" });
    expect((await run(["whoami", "--profile", "bot", "--json"], { env })).json()).toMatchObject({
      profile: "bot",
      role: "agent",
      account: acct.id,
    });
    expect((await run(["whoami", "--json"], { env: { ...env, CARDCTL_PROFILE: "bot" } })).json().profile).toBe("bot");

    const list = await run(["profiles", "list"], { env });
    expect(list.stdout).toMatch(/^\*\s+default\s+test\s+acct_\w+\s+sk_test_…/m);
    expect(list.stdout).toMatch(new RegExp(`^\\s+bot\\s+test\\s+${acct.id}\\s`, "m"));
    expect((await run(["profiles", "use", "bot"], { env })).code).toBe(0);
    expect((await run(["whoami", "--json"], { env })).json().profile).toBe("bot");
    // the agent profile cannot change the policy
    const denied = await run(["policy", "set", "--max", "1.00"], { env });
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain("forbidden");
    expect((await run(["profiles", "use", "nope"], { env })).code).toBe(2);
  });

  it("CARDCTL_API_KEY / CARDCTL_BASE_URL override the profile; --base-url overrides both", async () => {
    const dir = tempConfigDir();
    const env = { CARDCTL_CONFIG_DIR: dir };
    expect((await run(["login", "--api-key", s.apiKey, "--base-url", s.url], { env })).code).toBe(0);

    const badKey = await run(["balance"], { env: { ...env, CARDCTL_API_KEY: "sk_test_revokedrevokedrevokedrevoked00" } });
    expect(badKey.code).toBe(3);
    const w = await run(["whoami", "--json"], { env: { ...env, CARDCTL_API_KEY: s.apiKey } });
    expect(w.json().key_source).toBe("env");

    const badUrl = await run(["balance"], { env: { ...env, CARDCTL_BASE_URL: "http://127.0.0.1:9" } });
    expect(badUrl.code).toBe(1);
    expect(badUrl.stderr).toContain("127.0.0.1:9");
    const fixed = await run(["balance", "--base-url", s.url, "--json"], { env: { ...env, CARDCTL_BASE_URL: "http://127.0.0.1:9" } });
    expect(fixed.code).toBe(0);
    expect(fixed.json()).toHaveProperty("held_cents");
  });

  it("honours XDG_CONFIG_HOME", async () => {
    const xdg = tempConfigDir();
    const r = await run(["login", "--api-key", s.apiKey, "--base-url", s.url], { env: { XDG_CONFIG_HOME: xdg } });
    expect(r.code).toBe(0);
    expect(mode(join(xdg, "cardctl", "config.json"))).toBe(0o600);
    expect(mode(join(xdg, "cardctl"))).toBe(0o700);
  });

  it("a live key shows live mode", async () => {
    const acct = await s.newAccount();
    const live = await acct.key("live");
    const w = await run(["whoami", "--json"], { env: { CARDCTL_CONFIG_DIR: tempConfigDir(), CARDCTL_API_KEY: live, CARDCTL_BASE_URL: s.url } });
    expect(w.code, w.stderr).toBe(0);
    expect(w.json()).toMatchObject({ mode: "live", role: "full" });
  });
});
