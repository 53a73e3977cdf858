import type { Command } from "commander";
import { Cardctl } from "@cardctl/sdk";
import { DEFAULT_BASE_URL, configPath, keyMode, maskKey, profileName, readConfig, requireApiKey, writeConfig } from "../config.js";
import { ctxOf } from "../context.js";
import { UsageError } from "../errors.js";
import { ask } from "../prompt.js";

export function registerAuth(program: Command): void {
  program
    .command("login")
    .description("Store an API key (checked against the server) in the config file, mode 0600")
    .option("--api-key <key>", "the key (sk_test_… or sk_live_…); asked for when omitted")
    .option("--account <id>", "refuse the key unless it belongs to this account (acct_…)")
    .action(async (o: { apiKey?: string; account?: string }, cmd: Command) => {
      const { out, resolved, opts } = ctxOf(cmd);
      const config = readConfig();
      const name = profileName(opts, process.env, config);
      // --api-key is also a (hidden) global option, which commander may assign to the program.
      let key = o.apiKey ?? opts.apiKey ?? process.env.CARDCTL_API_KEY;
      if (!key) key = await ask(`API key for profile "${name}" (sk_test_… / sk_live_…): `, { hidden: true });
      if (!key) throw new UsageError("No API key given.");
      if (keyMode(key) === "unknown") throw new UsageError("An API key starts with sk_test_ or sk_live_.");
      const baseUrl = opts.baseUrl ?? process.env.CARDCTL_BASE_URL ?? config.profiles[name]?.base_url ?? resolved.baseUrl ?? DEFAULT_BASE_URL;
      const stored = baseUrl.replace(/\/+$/, "");
      const client = new Cardctl({ apiKey: key, baseUrl: stored });
      const [current, balance] = await out.spin(`Checking the key against ${baseUrl}`, () => Promise.all([client.apiKeys.current(), client.balance.retrieve()]));
      if (o.account && o.account !== current.account_id)
        throw new UsageError(`This key belongs to account ${current.account_id}, not ${o.account}; nothing was saved.`);
      config.profiles[name] = { ...config.profiles[name], api_key: key, base_url: stored, account_id: current.account_id };
      config.current_profile ??= name;
      const path = writeConfig(config);
      if (out.json) return out.printJson({ profile: name, mode: keyMode(key), account: current.account_id, role: current.role, base_url: baseUrl, config_path: path, balance });
      out.line(
        `${out.style("✓", "green")} Logged in to ${baseUrl} as profile ${out.style(name, "bold")} (${keyMode(key)} mode, account ${current.account_id}, ${current.role} key ${maskKey(key)}).`,
      );
      out.hint(`Saved to ${path} (mode 0600).`);
    });

  program
    .command("logout")
    .description("Forget the stored API key of the profile")
    .action(async (_o: unknown, cmd: Command) => {
      const { out, opts } = ctxOf(cmd);
      const config = readConfig();
      const name = profileName(opts, process.env, config);
      const had = Boolean(config.profiles[name]?.api_key);
      if (config.profiles[name]) delete config.profiles[name]!.api_key;
      writeConfig(config);
      if (out.json) return out.printJson({ profile: name, logged_out: had });
      out.line(had ? `Logged out of profile ${name}.` : `Profile ${name} had no stored key.`);
    });

  program
    .command("whoami")
    .description("Show mode, account, role and base URL of the current key (checks the key)")
    .action(async (_o: unknown, cmd: Command) => {
      const { out, resolved, client } = ctxOf(cmd);
      const key = requireApiKey(resolved);
      // GET /v1/api_keys/current says whose key it is; the spend summary whether the account is set up.
      const [current, balance] = await out.spin("Checking the key", () => Promise.all([client().apiKeys.current(), client().balance.retrieve()]));
      const info = {
        profile: resolved.profileName,
        mode: current.mode,
        account: current.account_id,
        role: current.role,
        key_id: current.id,
        base_url: resolved.baseUrl,
        key: maskKey(key),
        key_source: resolved.apiKeySource,
        setup_complete: balance.setup_complete,
        config_path: configPath(),
      };
      if (out.json) return out.printJson(info);
      const mode = info.mode === "live" ? out.style("live", "red", "bold") : out.style(info.mode, "yellow");
      out.kv([
        ["Profile", info.profile],
        ["Mode", mode],
        ["Account", info.account],
        ["Role", info.role],
        ["Base URL", info.base_url],
        ["Key", `${info.key_id} ${info.key} ${out.style(`(from ${info.key_source})`, "dim")}`],
        ["Setup", info.setup_complete ? out.style("complete", "green") : out.style("incomplete", "yellow")],
      ]);
    });

  const profiles = program.command("profiles").description("List or switch the stored profiles");
  profiles
    .command("list")
    .description("List profiles in the config file")
    .action(async (_o: unknown, cmd: Command) => {
      const { out } = ctxOf(cmd);
      const config = readConfig();
      const current = config.current_profile ?? "default";
      const rows = Object.entries(config.profiles).map(([n, p]) => ({
        name: n,
        current: n === current,
        mode: p.api_key ? keyMode(p.api_key) : null,
        account: p.account_id ?? null,
        key: p.api_key ? maskKey(p.api_key) : null,
        base_url: p.base_url ?? null,
      }));
      if (out.json) return out.printJson({ current_profile: current, data: rows });
      out.table(
        ["", "PROFILE", "MODE", "ACCOUNT", "KEY", "BASE URL"],
        rows.map((r) => [r.current ? "*" : "", r.name, r.mode ?? "-", r.account ?? "-", r.key ?? "-", r.base_url ?? "-"]),
        "No profiles yet. Run `cardctl login`.",
      );
    });
  profiles
    .command("use")
    .argument("<name>", "profile name")
    .description("Make a profile the default")
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const { out } = ctxOf(cmd);
      const config = readConfig();
      if (!config.profiles[name]) throw new UsageError(`No profile named "${name}". Run \`cardctl login --profile ${name}\`.`);
      config.current_profile = name;
      writeConfig(config);
      if (out.json) return out.printJson({ current_profile: name });
      out.line(`Now using profile ${name}.`);
    });
}
