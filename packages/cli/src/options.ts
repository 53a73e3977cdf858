import { UsageError } from "./errors.js";

/** `--limit`: a page size of 1..100, as every list takes. */
export function parseLimit(raw: unknown): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 100) throw new UsageError("--limit must be a whole number from 1 to 100.");
  return n;
}
