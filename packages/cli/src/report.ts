import type { DollarFlag } from "./context.js";
import { AuthError, ConnectionError, UsageError, exitCodeFor, isApiError } from "./errors.js";
import { formatMoney } from "@cardctl/sdk";
import { durationsInWords, type Output } from "./output.js";

export interface ReportContext {
  baseUrl?: string | undefined;
  /** API fields the user gave in dollars (see Ctx.dollarFlags). */
  dollarFlags?: Record<string, DollarFlag> | undefined;
  /** The amount was typed in cents (see Ctx.centsTyped). */
  centsTyped?: boolean | undefined;
  /** API fields given by a flag of another name (see Ctx.flagNames). */
  flagNames?: Record<string, string> | undefined;
  /** The flag that repeats the command's request safely (see Ctx.retryWith). */
  retryWith?: string | undefined;
}

const CONNECTION_CODES = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|UND_ERR/;

/** The lowest-level cause of a failed fetch: "connect ECONNREFUSED 127.0.0.1:9", "getaddrinfo ENOTFOUND x". */
function causeText(err: unknown): string {
  let e = err as { cause?: unknown; message?: string; code?: string } | undefined;
  for (let i = 0; i < 5 && e?.cause; i++) e = e.cause as typeof e;
  return e?.message || e?.code || String(err);
}

/**
 * The request that got no response, as a full URL with its method: from our ConnectionError, or
 * from the SDK's connection_error ("Could not reach <base> (GET /v1/balance): …").
 */
function unreachable(err: unknown, baseUrl: string | undefined): { method?: string; url: string; cause: string } | undefined {
  if (err instanceof ConnectionError) return { method: err.method, url: err.url, cause: causeText(err) };
  if (isApiError(err) && err.status === undefined && err.code === "connection_error") {
    const m = /^Could not reach (\S+) \((\w+) (\/\S*)\): (.*)$/s.exec(err.message);
    // The SDK names the path under /v1 ("/balance"); its requests all go to <base>/v1/….
    if (m) return { method: m[2], url: `${m[1]!.replace(/\/v1$/, "")}/v1${m[3]!.replace(/^\/v1(?=\/)/, "").split("?")[0]}`, cause: m[4]!.trim() };
    return { url: baseUrl ?? "the server", cause: causeText(err) };
  }
  const e = err as Error & { cause?: { code?: string } };
  if (e instanceof Error && (CONNECTION_CODES.test(e.cause?.code ?? "") || /fetch failed/i.test(e.message)))
    return { url: baseUrl ?? "the server", cause: causeText(err) };
  return undefined;
}

/**
 * An API error as the user should read it: durations in words; amounts in dollars as the CLI
 * shows them ("60000 cents" → "$600.00") unless only cents were typed (--amount-cents); and when
 * the amount was typed in dollars (--amount 600), the API's validation of it ("amount_cents must be
 * … from 1 to 50000") as the flag and dollars ("--amount must be from $0.01 to $500.00, got "600"").
 */
export function humanize(
  code: string,
  message: string,
  details: Record<string, unknown>,
  dollarFlags: Record<string, DollarFlag> = {},
  flagNames: Record<string, string> = {},
  centsTyped = false,
) {
  let msg = durationsInWords(message);
  let issues = Array.isArray(details.issues) ? (details.issues as Array<{ path?: unknown; message?: string }>) : [];
  const inDollars = Object.keys(dollarFlags).length > 0;
  if (inDollars && code === "validation_error" && issues.length) {
    let changed = false;
    issues = issues.map((i) => {
      const path = Array.isArray(i.path) ? i.path.join(".") : String(i.path ?? "");
      const flag = dollarFlags[path];
      if (!flag) return i;
      changed = true;
      const range = /from (\d+) to (\d+)/.exec(i.message ?? "");
      const text = range
        ? `${flag.flag} must be an amount in dollars from ${formatMoney(Math.max(1, Number(range[1])))} to ${formatMoney(Number(range[2]))}, got "${flag.input}"`
        : `${flag.flag} "${flag.input}" is not valid: ${i.message ?? ""}`;
      return { path: flag.flag, message: text };
    });
    if (changed) msg = `Invalid request: ${issues.map((i) => i.message).join("; ")}.`;
  }
  if (inDollars || !centsTyped) msg = msg.replace(/\b(\d+) cents\b/g, (_m, n: string) => formatMoney(Number(n)));
  if (code === "validation_error")
    for (const [path, flag] of Object.entries(flagNames)) {
      // "Invalid request: types has …" → "Invalid request: --events has …", in the message and each issue.
      const named = new RegExp(`(^|: |; )${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?=[ :])`, "g");
      msg = msg.replace(named, `$1${flag}`);
      issues = issues.map((i) => (String(i.path) === path ? { path: flag, message: i.message?.replace(named, `$1${flag}`) } : i));
    }
  return { message: msg, issues };
}

/**
 * The Idempotency-Key of a request whose outcome is unknown (no answer, a 5xx, or the server still
 * at work on it), when the command can send it again (`retryWith`): repeating the command with it
 * gets the first request's answer instead of doing the work twice (a second card).
 */
function unknownOutcomeKey(err: unknown, retryWith: string | undefined): string | undefined {
  const e = err as { idempotencyKey?: unknown; status?: number; code?: string };
  if (!retryWith || typeof e?.idempotencyKey !== "string") return undefined;
  return e.status === undefined || e.status >= 500 || e.code === "idempotency_key_in_use" ? e.idempotencyKey : undefined;
}

/**
 * Prints an error: code, message, request id and what to do next on stderr; with --json also the
 * API's error envelope on stdout. Returns the exit code.
 */
export function reportError(err: unknown, out: Output, ctx: ReportContext = {}): number {
  const code = exitCodeFor(err);
  const red = (s: string) => out.errStyle(s, "red", "bold");
  const dim = (s: string) => out.errStyle(s, "dim");

  if (err instanceof UsageError || err instanceof AuthError) {
    if (out.json) out.printJson({ error: { code: err instanceof UsageError ? "usage_error" : "not_logged_in", message: err.message } });
    out.err(`${red("Error:")} ${err.message}`);
    return code;
  }

  const key = unknownOutcomeKey(err, ctx.retryWith);
  const retryHint = () => {
    if (key) out.err(`  It may have been done: run the same command again with ${ctx.retryWith} ${key} to get its answer, not do it twice.`);
  };
  const down = unreachable(err, ctx.baseUrl);
  if (down) {
    const msg = `Could not reach ${down.url}${down.method ? ` (${down.method})` : ""}: ${down.cause}. Check --base-url / CARDCTL_BASE_URL and that the server is running.`;
    if (out.json) out.printJson({ error: { code: "connection_error", message: msg, ...(key ? { idempotency_key: key } : {}) } });
    out.err(`${red("Error:")} ${msg}`);
    retryHint();
    return code;
  }

  if (isApiError(err)) {
    const details = (err.details ?? {}) as Record<string, unknown>;
    if (out.json) {
      out.printJson({
        error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}), request_id: err.requestId, ...(key ? { idempotency_key: key } : {}) },
      });
    }
    const human = humanize(err.code, err.message, details, ctx.dollarFlags, ctx.flagNames, ctx.centsTyped);
    out.err(`${red("Error:")} ${human.message}`);
    out.err(dim(`  code: ${err.code}${err.status ? ` (HTTP ${err.status})` : ""}${err.requestId ? `  request id: ${err.requestId}` : ""}`));
    // --max of `cards create` (policy_override) may be what set the maximum, not the policy.
    const ownMax = ctx.dollarFlags?.["policy_override.max_amount_cents"]?.flag;
    for (const hint of hints(err.code, { ...details, issues: human.issues }, err.status, err.message, ownMax)) out.err(`  ${hint}`);
    retryHint();
    return code;
  }

  const e = err as Error;
  const msg = durationsInWords(e instanceof Error ? e.message : String(err));
  if (out.json) out.printJson({ error: { code: "error", message: msg } });
  out.err(`${red("Error:")} ${msg}`);
  if (process.env.CARDCTL_DEBUG && e instanceof Error && e.stack) out.err(dim(e.stack));
  return code;
}

/** What to do next about an error code (also used for the reasons of `policy check`). */
export function hints(code: string, d: Record<string, unknown>, status?: number, message = "", ownMaxFlag?: string): string[] {
  switch (code) {
    case "setup_required": {
      const missing = Array.isArray(d.missing) ? (d.missing as string[]) : [];
      const names: Record<string, string> = {
        kyb: "business verification (kyb)",
        payment_method: "a saved payment method",
        cardholder: "the cardholder the processor issues cards to (`cardctl accounts set-cardholder`)",
      };
      const out: string[] = [];
      if (missing.length) out.push(`Missing: ${missing.map((m) => names[m] ?? m).join(", ")}.`);
      if (typeof d.setup_url === "string") out.push(`Finish account setup at: ${d.setup_url}`);
      return out;
    }
    case "policy_violation": {
      const max = typeof d.max_amount_cents === "number" ? d.max_amount_cents : undefined;
      const req = typeof d.requested === "number" ? d.requested : undefined;
      if (max === undefined) return [];
      return [
        `The policy maximum per card is ${formatMoney(max)}${req !== undefined ? ` (requested ${formatMoney(req)})` : ""}.`,
        ownMaxFlag
          ? `Ask for at most ${formatMoney(max)}: this request's ${ownMaxFlag} may have set it (it only lowers the policy's maximum); raise or drop ${ownMaxFlag}.`
          : `Ask for at most ${formatMoney(max)}, or raise it with \`cardctl policy set --max <amount>\` (a full key is needed).`,
      ];
    }
    case "unauthorized":
      return ["The key is invalid or revoked. Run `cardctl login` with a valid key, or check --api-key / CARDCTL_API_KEY (operator commands: --admin-token / CARDCTL_ADMIN_TOKEN)."];
    case "forbidden":
      // One code for the key's role and for its mode (test helpers): the message tells which.
      if (message.includes("'agent' role")) return ["This key may not do that (an 'agent' key cannot approve, reject or change the policy). Use a 'full' key."];
      if (message.startsWith("Test helpers")) return ["Use a test-mode key (sk_test_…): test helpers play the card network, which live mode has for real."];
      return [];
    case "rate_limited":
      return ["Too many requests for this key; wait until the rate-limit window resets and try again."];
    case "approval_not_pending":
      return typeof d.status === "string" ? [`The approval is already ${d.status}.`] : [];
    case "validation_error": {
      // The message already has every issue; one per line helps only when there are several.
      const issues = Array.isArray(d.issues) ? (d.issues as Array<{ path?: unknown; message?: string }>) : [];
      if (issues.length < 2) return [];
      return issues.map((i) => {
        const path = Array.isArray(i.path) ? i.path.join(".") : String(i.path ?? "");
        const text = i.message ?? "";
        return `- ${text.startsWith(path) ? text : `${path}: ${text}`}`;
      });
    }
    case "payment_method_declined":
      return ["The account's payment method refused the hold; nothing was held. The account's owner must update it (dashboard Setup page)."];
    case "processor_not_configured":
      return ["Live mode needs Stripe configured on the server (STRIPE_LIVE_SECRET_KEY)."];
    case "not_found":
      return status === 404 ? ["Check the id; objects of another account or mode are not visible with this key."] : [];
    default:
      return [];
  }
}
