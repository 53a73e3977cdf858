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
    let out = "";
    for (let v = now, i = 0; i < 8; i++, v = Math.floor(v / 62)) out = ALPHABET[v % 62]! + out;
    stamp = out;
  }
  return stamp;
}

/** An id: the prefix, the time it was made (see timeStamp) and 16 random base62 characters (95 bits). */
export const newId = (prefix: "card" | "appr" | "acct" | "key" | "req" | "hold" | "ic" | "ek" | "auth" | "txn" | "pay" | "re" | "evt" | "we" | "own" | "inv" | "sess") =>
  `${prefix}_${timeStamp()}${randomToken(16)}`;

export const isoTime = (ms: number) => new Date(ms).toISOString();
