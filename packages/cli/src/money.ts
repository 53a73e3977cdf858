import { UsageError } from "./errors.js";

/**
 * "12.50" / "$12.50" / "12" / "12.5" → cents. At most two decimals; no exponents, signs or
 * thousands separators; positive. Exact: never goes through floating point.
 */
export function parseAmount(input: string, flag = "--amount"): number {
  const s = input.trim().replace(/^\$/, "");
  const m = /^(\d+)(?:\.(\d{1,2}))?$/.exec(s);
  if (!m) throw new UsageError(`${flag} must be an amount in dollars like 12.50 (at most two decimals), got "${input}".`);
  return positive(Number(m[1]) * 100 + Number((m[2] ?? "").padEnd(2, "0")), input, flag, "0.01");
}

export function parseCents(input: string, flag = "--amount-cents"): number {
  if (!/^\d+$/.test(input.trim())) throw new UsageError(`${flag} must be a whole number of cents like 1250, got "${input}".`);
  return positive(Number(input.trim()), input, flag, "1");
}

/** Cents that are a whole positive number JavaScript holds exactly. */
function positive(cents: number, input: string, flag: string, least: string): number {
  if (!Number.isSafeInteger(cents)) throw new UsageError(`${flag} is too large, got "${input}".`);
  if (cents < 1) throw new UsageError(`${flag} must be at least ${least}, got "${input}".`);
  return cents;
}
