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

export const newId = (prefix: "card" | "appr" | "acct" | "key" | "req" | "hold" | "ic" | "ek" | "auth" | "txn" | "pay" | "re" | "evt" | "we" | "own" | "inv" | "sess") =>
  `${prefix}_${randomToken(24)}`;

export const isoTime = (ms: number) => new Date(ms).toISOString();
