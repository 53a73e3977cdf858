import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { AuthError, UsageError } from "./errors.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:4000";
export const DEFAULT_PROFILE = "default";

export interface Profile {
  api_key?: string;
  base_url?: string;
  /** The key's account as the API told `login` (or `keys create --save-profile`); shown by `profiles list`. */
  account_id?: string;
}

export interface ConfigFile {
  current_profile?: string;
  profiles: Record<string, Profile>;
}

/** CARDCTL_CONFIG_DIR, else $XDG_CONFIG_HOME/cardctl, else ~/.config/cardctl. */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.CARDCTL_CONFIG_DIR) return env.CARDCTL_CONFIG_DIR;
  const base = env.XDG_CONFIG_HOME || join(homedir(), ".config");
  return join(base, "cardctl");
}

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(configDir(env), "config.json");
}

export function readConfig(env: NodeJS.ProcessEnv = process.env): ConfigFile {
  const path = configPath(env);
  if (!existsSync(path)) return { profiles: {} };
  try {
    const parsed = JSON.parse(readFileSync(path, "utf8")) as Partial<ConfigFile>;
    return { current_profile: parsed.current_profile, profiles: parsed.profiles ?? {} };
  } catch (err) {
    throw new UsageError(`The config file ${path} is not valid JSON (${(err as Error).message}). Fix or delete it.`);
  }
}

/** Written atomically, file mode 0600 inside a 0700 directory: it holds API keys. */
export function writeConfig(config: ConfigFile, env: NodeJS.ProcessEnv = process.env): string {
  const dir = configDir(env);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = configPath(env);
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(config, null, 2) + "\n", { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
  chmodSync(path, 0o600);
  return path;
}

export interface GlobalOptions {
  json?: boolean;
  color?: boolean;
  profile?: string;
  baseUrl?: string;
  apiKey?: string;
  adminToken?: string;
}

export interface Resolved {
  profileName: string;
  profile: Profile;
  apiKey?: string;
  apiKeySource?: "flag" | "env" | "profile";
  baseUrl: string;
  baseUrlSource: "flag" | "env" | "profile" | "default";
}

export function profileName(opts: GlobalOptions, env: NodeJS.ProcessEnv = process.env, config?: ConfigFile): string {
  return opts.profile || env.CARDCTL_PROFILE || (config ?? readConfig(env)).current_profile || DEFAULT_PROFILE;
}

/** Precedence: --api-key / --base-url flags, then CARDCTL_API_KEY / CARDCTL_BASE_URL, then the profile. */
export function resolve(opts: GlobalOptions, env: NodeJS.ProcessEnv = process.env): Resolved {
  const config = readConfig(env);
  const name = profileName(opts, env, config);
  const profile = config.profiles[name] ?? {};
  let apiKey: string | undefined;
  let apiKeySource: Resolved["apiKeySource"];
  if (opts.apiKey) [apiKey, apiKeySource] = [opts.apiKey, "flag"];
  else if (env.CARDCTL_API_KEY) [apiKey, apiKeySource] = [env.CARDCTL_API_KEY, "env"];
  else if (profile.api_key) [apiKey, apiKeySource] = [profile.api_key, "profile"];
  let baseUrl: string;
  let baseUrlSource: Resolved["baseUrlSource"];
  if (opts.baseUrl) [baseUrl, baseUrlSource] = [opts.baseUrl, "flag"];
  else if (env.CARDCTL_BASE_URL) [baseUrl, baseUrlSource] = [env.CARDCTL_BASE_URL, "env"];
  else if (profile.base_url) [baseUrl, baseUrlSource] = [profile.base_url, "profile"];
  else [baseUrl, baseUrlSource] = [DEFAULT_BASE_URL, "default"];
  checkBaseUrl(baseUrl, baseUrlSource, name);
  return { profileName: name, profile, apiKey, apiKeySource, baseUrl: baseUrl.replace(/\/+$/, "").replace(/\/v1$/, ""), baseUrlSource };
}

const BASE_URL_SOURCE = { flag: "--base-url", env: "CARDCTL_BASE_URL", profile: "the base_url of profile", default: "the default base URL" } as const;

/** A base URL must be an http(s) URL without query or fragment: anything else is a usage error (exit 2). */
export function checkBaseUrl(value: string, source: Resolved["baseUrlSource"] = "flag", profile = DEFAULT_PROFILE): void {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (url && (url.protocol === "http:" || url.protocol === "https:") && !url.search && !url.hash && !url.username && !url.password) return;
  const where = source === "profile" ? `${BASE_URL_SOURCE.profile} "${profile}"` : BASE_URL_SOURCE[source];
  throw new UsageError(`${where} must be an http:// or https:// URL like http://127.0.0.1:4000, got "${value}".`);
}

export function requireApiKey(r: Resolved): string {
  if (!r.apiKey) {
    throw new AuthError(
      `No API key for profile "${r.profileName}". Run \`cardctl login${r.profileName === DEFAULT_PROFILE ? "" : ` --profile ${r.profileName}`}\` or set CARDCTL_API_KEY.`,
    );
  }
  return r.apiKey;
}

export function keyMode(key: string): "test" | "live" | "unknown" {
  if (key.startsWith("sk_test_")) return "test";
  if (key.startsWith("sk_live_")) return "live";
  return "unknown";
}

export function maskKey(key: string): string {
  const prefix = key.startsWith("sk_test_") ? "sk_test_" : key.startsWith("sk_live_") ? "sk_live_" : key.slice(0, 3);
  return `${prefix}…${key.slice(-4)}`;
}
