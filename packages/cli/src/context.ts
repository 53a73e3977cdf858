import type { Command } from "commander";
import { Cardctl } from "@cardctl/sdk";
import { requireApiKey, resolve, type GlobalOptions, type Resolved } from "./config.js";
import { ApiError, AuthError, ConnectionError } from "./errors.js";
import { Output } from "./output.js";

export const VERSION = "0.1.0";

export interface Ctx {
  opts: GlobalOptions;
  out: Output;
  resolved: Resolved;
  /** The SDK client for the resolved key and base URL; exit 3 when there is no key. */
  client(): Cardctl;
  /** The operator API (/admin/v1), which the SDK does not cover. */
  admin<T = any>(method: string, path: string, body?: unknown): Promise<T>;
  /**
   * API fields (`amount_cents`, `policy_override.max_amount_cents`) the user gave in dollars, with
   * the flag and what was typed: the API's validation messages about them are shown in dollars.
   */
  dollarFlags: Record<string, DollarFlag>;
  /** The amount was typed in cents (--amount-cents): the API's messages keep their cents. */
  centsTyped: boolean;
  /** API fields given by a flag of another name (`types` by --events): the API's validation messages name the flag. */
  flagNames: Record<string, string>;
  /** The flag that repeats this command's request safely (`--idempotency-key`): told, with the key, when its outcome is unknown. */
  retryWith?: string;
}

export interface DollarFlag {
  flag: string;
  input: string;
}

/** The currently running context, for the top-level error handler. */
export let current: Ctx | undefined;

export function ctxOf(cmd: Command): Ctx {
  const opts = cmd.optsWithGlobals() as GlobalOptions;
  const out = new Output(opts);
  const resolved = resolve(opts);
  let client: Cardctl | undefined;
  const ctx: Ctx = {
    opts,
    out,
    resolved,
    client() {
      client ??= new Cardctl({ apiKey: requireApiKey(resolved), baseUrl: resolved.baseUrl });
      return client;
    },
    dollarFlags: {},
    centsTyped: false,
    flagNames: {},
    admin: (method, path, body) => adminRequest(resolved.baseUrl, opts.adminToken ?? process.env.CARDCTL_ADMIN_TOKEN, method, path, body),
  };
  current = ctx;
  return ctx;
}

/** A JSON request; error envelopes become ApiError (same shape as the SDK's CardctlError). */
export async function rawRequest<T>(baseUrl: string, bearer: string, method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${bearer}`, "user-agent": `cardctl-cli/${VERSION}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(baseUrl + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (err) {
    throw new ConnectionError(method, baseUrl + path.split("?")[0], err);
  }
  const text = await res.text();
  let parsed: any;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!res.ok) {
    const e = parsed?.error;
    throw new ApiError(
      res.status,
      typeof e?.code === "string" ? e.code : `http_${res.status}`,
      typeof e?.message === "string" ? e.message : `HTTP ${res.status} ${res.statusText}`,
      e?.details,
      e?.request_id ?? res.headers.get("request-id") ?? undefined,
    );
  }
  return parsed as T;
}

export function adminRequest<T>(baseUrl: string, token: string | undefined, method: string, path: string, body?: unknown): Promise<T> {
  if (!token) throw new AuthError("Operator commands need the admin token: pass --admin-token or set CARDCTL_ADMIN_TOKEN.");
  return rawRequest<T>(baseUrl, token, method, `/admin/v1${path}`, body);
}
