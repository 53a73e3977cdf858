import { EVENT_TYPES } from "@cardctl/contract/event-types";
import { UsageError } from "./errors.js";

/** `--limit`: a page size of 1..100, as every list takes. */
export function parseLimit(raw: unknown): number {
  // Digits only: Number() would take 1e1, 0x10 and " 5 " too.
  const n = typeof raw === "string" && /^\d{1,3}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= 100)) throw new UsageError("--limit must be a whole number from 1 to 100.");
  return n;
}

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration option in milliseconds: a whole number with a unit (ms, s, m, h, d), seconds without one. */
export function parseDuration(raw: string, option: string): number {
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(raw.trim());
  if (!m) throw new UsageError(`${option} must be a duration like 90s, 10m, 1h or 2d, got "${raw}".`);
  return Number(m[1]) * UNIT_MS[(m[2] ?? "s") as keyof typeof UNIT_MS];
}

/**
 * `--events a,b`: event types, checked here so a typo is named with its flag (exit 2) rather than
 * as the API's field; "*" alone is every type. At least one is needed.
 */
export function parseEventTypes(raw: string, option: string): string[] {
  const types = raw.split(",").map((t) => t.trim()).filter(Boolean);
  if (types.length === 0) throw new UsageError(`${option} needs at least one event type, or "*" for all.`);
  if (types.length === 1 && types[0] === "*") return types;
  const known: readonly string[] = EVENT_TYPES;
  const unknown = types.filter((t) => !known.includes(t));
  if (unknown.length > 0)
    throw new UsageError(`${option} has unknown event types: ${unknown.join(", ")} ("*" alone is every type). Event types: ${known.join(", ")}.`);
  return types;
}
