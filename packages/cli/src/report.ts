import { AuthError, UsageError, exitCodeFor, isApiError } from "./errors.js";
import { formatMoney } from "./money.js";
import type { Output } from "./output.js";

/**
 * Prints an error: code, message, request id and what to do next on stderr; with --json also the
 * API's error envelope on stdout. Returns the exit code.
 */
export function reportError(err: unknown, out: Output, ctx: { baseUrl?: string } = {}): number {
  const code = exitCodeFor(err);
  const red = (s: string) => out.errStyle(s, "red", "bold");
  const dim = (s: string) => out.errStyle(s, "dim");

  if (err instanceof UsageError || err instanceof AuthError) {
    if (out.json) out.printJson({ error: { code: err instanceof UsageError ? "usage_error" : "not_logged_in", message: err.message } });
    out.err(`${red("Error:")} ${err.message}`);
    return code;
  }

  if (isApiError(err)) {
    const details = (err.details ?? {}) as Record<string, unknown>;
    if (out.json) {
      out.printJson({ error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}), request_id: err.requestId } });
    }
    out.err(`${red("Error:")} ${err.message}`);
    out.err(dim(`  code: ${err.code}${err.status ? ` (HTTP ${err.status})` : ""}${err.requestId ? `  request id: ${err.requestId}` : ""}`));
    for (const hint of hints(err.code, details, err.status)) out.err(`  ${hint}`);
    return code;
  }

  const e = err as Error & { cause?: { code?: string; message?: string } };
  const cause = e?.cause?.code ?? "";
  if (/ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ECONNRESET/.test(cause) || /fetch failed/i.test(e?.message ?? "")) {
    const msg = `Could not reach ${ctx.baseUrl ?? "the server"} (${cause || e.message}). Check --base-url / CARDCTL_BASE_URL and that the server is running.`;
    if (out.json) out.printJson({ error: { code: "connection_error", message: msg } });
    out.err(`${red("Error:")} ${msg}`);
    return code;
  }
  const msg = e instanceof Error ? e.message : String(err);
  if (out.json) out.printJson({ error: { code: "error", message: msg } });
  out.err(`${red("Error:")} ${msg}`);
  if (process.env.CARDCTL_DEBUG && e instanceof Error && e.stack) out.err(dim(e.stack));
  return code;
}

function hints(code: string, d: Record<string, unknown>, status?: number): string[] {
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
        `Ask for at most ${formatMoney(max)}, or raise it with \`cardctl policy set --max <amount>\` (a full key is needed).`,
      ];
    }
    case "unauthorized":
      return ["The key is invalid or revoked. Run `cardctl login` with a valid key, or check CARDCTL_API_KEY / --admin-token."];
    case "forbidden":
      return ["This key may not do that (an 'agent' key cannot approve, reject or change the policy). Use a 'full' key."];
    case "rate_limited":
      return ["Too many requests for this key; wait until the rate-limit window resets and try again."];
    case "approval_not_pending":
      return typeof d.status === "string" ? [`The approval is already ${d.status}.`] : [];
    case "validation_error": {
      const issues = Array.isArray(d.issues) ? (d.issues as Array<{ path?: unknown; message?: string }>) : [];
      return issues.map((i) => `${Array.isArray(i.path) ? i.path.join(".") : String(i.path ?? "")}: ${i.message ?? ""}`);
    }
    case "processor_not_configured":
      return ["Live mode needs Stripe configured on the server (STRIPE_LIVE_SECRET_KEY)."];
    case "not_found":
      return status === 404 ? ["Check the id; objects of another account or mode are not visible with this key."] : [];
    default:
      return [];
  }
}
