import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/**
 * CSPRNG bytes drawn in 4 kB batches: a request makes several ids, and one randomBytes call per id
 * (a syscall each) cost more than the rest of the id. Every byte is handed out once.
 */
const POOL_SIZE = 4096;
let pool = Buffer.alloc(0);
let offset = 0;

function randomSlice(length: number): Buffer {
  if (offset + length > pool.length) {
    pool = randomBytes(Math.max(POOL_SIZE, length));
    offset = 0;
  }
  offset += length;
  return pool.subarray(offset - length, offset);
}

/** Random base62 string; 62^n is plenty for n >= 20 (rejection-free bias is negligible at 256 % 62). */
export function randomToken(length: number): string {
  const bytes = randomSlice(length);
  let out = "";
  for (let i = 0; i < length; i++) out += ALPHABET[bytes[i]! % 62];
  return out;
}

let stampMs = -1;
let stamp = "";

/**
 * The current millisecond in base62, 8 characters (until the year 8889): ids that start with it are
 * written at the right edge of their unique index, as the auto-increment keys are, instead of on a
 * random page each. A random id dirtied one more index page per row in every commit (whole pages in
 * SQLite's WAL, page splits all over the index in InnoDB).
 */
export function timeStamp(): string {
  const now = Date.now();
  if (now !== stampMs) {
    stampMs = now;
    stamp = timeStampOf(now);
  }
  return stamp;
}

/** A millisecond as timeStamp writes it. */
export function timeStampOf(ms: number): string {
  let out = "";
  for (let v = ms, i = 0; i < 8; i++, v = Math.floor(v / 62)) out = ALPHABET[v % 62]! + out;
  return out;
}

/** When an id of newId was made (its timeStamp read back), or null for a string that is not one. */
export function idTime(id: string): number | null {
  const m = /^[a-z]+_([0-9A-Za-z]{8})[0-9A-Za-z]{16}$/.exec(id);
  if (!m) return null;
  let ms = 0;
  for (const c of m[1]!) ms = ms * 62 + ALPHABET.indexOf(c);
  return ms;
}

/** An id: the prefix, the time it was made (see timeStamp) and 16 random base62 characters (95 bits). */
export const newId = (prefix: "card" | "appr" | "acct" | "key" | "req" | "hold" | "ic" | "ek" | "auth" | "txn" | "pay" | "re" | "evt" | "we" | "own" | "inv" | "sess") =>
  `${prefix}_${timeStamp()}${randomToken(16)}`;

/** The last millisecond of the year 9999: `toISOString` writes later years (and years before 0) with a sign and six digits. */
const LAST_FOUR_DIGIT_MS = 253_402_300_799_999;
/** A UTC day in milliseconds. */
export const DAY_MS = 86_400_000;
const two = (n: number) => (n < 10 ? `0${n}` : `${n}`);
const three = (n: number) => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/**
 * `new Date(ms).toISOString()`, the same characters, by arithmetic: the date from the day number
 * as in H. Hinnant's `civil_from_days` (proleptic Gregorian calendar, eras of 400 years). Views
 * write two or three timestamps per row; Date's own formatter cost ~0.7 µs a call, this ~0.16
 * (BENCHMARKS.md fix 51). Outside 1970–9999, or for a fraction of a millisecond, Date's own.
 */
export function isoTime(ms: number): string {
  if (!(ms >= 0 && ms <= LAST_FOUR_DIGIT_MS && Number.isInteger(ms))) return new Date(ms).toISOString();
  const days = Math.floor(ms / DAY_MS);
  const inDay = ms - days * DAY_MS;
  // Days since 0000-03-01, so that a leap day is the last day of its year.
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor((dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365);
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const monthFromMarch = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * monthFromMarch + 2) / 5) + 1;
  const month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9;
  const year = era * 400 + yearOfEra + (month <= 2 ? 1 : 0);
  const hours = Math.floor(inDay / 3_600_000);
  const minutes = Math.floor((inDay % 3_600_000) / 60_000);
  const seconds = Math.floor((inDay % 60_000) / 1000);
  return `${year}-${two(month)}-${two(day)}T${two(hours)}:${two(minutes)}:${two(seconds)}.${three(inDay % 1000)}Z`;
}
