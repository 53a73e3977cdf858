import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Random base62 string; 62^n is plenty for n >= 20 (rejection-free bias is negligible at 256 % 62). */
export function randomToken(length: number): string {
  const bytes = randomBytes(length);
  let out = "";
  for (let i = 0; i < length; i++) out += ALPHABET[bytes[i]! % 62];
  return out;
}

export const newId = (prefix: "card" | "appr" | "acct" | "key" | "req" | "hold" | "ic" | "ek") =>
  `${prefix}_${randomToken(24)}`;

export const isoTime = (ms: number) => new Date(ms).toISOString();
