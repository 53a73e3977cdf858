/**
 * Secrets that end up in URLs: a client puts its key in a query parameter (or a path segment) by
 * mistake. Such URLs are refused (auth.ts) and never logged in clear.
 */

/** Query parameters that carry credentials by name, whatever their value. */
const CREDENTIAL_NAMES = new Set(["api_key", "apikey", "api-key", "key", "access_token", "token", "secret", "authorization", "bearer", "auth", "password"]);

/** Query parameters logged as [redacted] that are not refused (the ephemeral key's nonce). */
const LOGGED_MASKED = [...CREDENTIAL_NAMES, "nonce"].map((n) => n.replace(/[-_]/g, "[-_]")).join("|");

/** `_`, raw or percent-encoded. */
const U = "(?:_|%5[Ff])";
/** Our secrets' shapes: API keys, admin tokens, ephemeral keys, webhook signing secrets. */
const KEY_SHAPE = `(?:sk${U}(?:test|live)${U}|adm${U}|ek${U}|whsec${U})[A-Za-z0-9%_-]+`;
const KEY_SHAPED = new RegExp(KEY_SHAPE, "gi");
/**
 * A value that holds one of our secrets, to refuse: the prefix as we write it, at the start of a
 * word, with a secret's length after it (`week_planner` or `sysadm_helper` are names, not keys).
 */
const HOLDS_KEY = /(?<![A-Za-z0-9])(?:sk_(?:test|live)_|adm_|ek_|whsec_)[A-Za-z0-9_+/=-]{16,}/;
const NAMED = new RegExp(`([?&](?:${LOGGED_MASKED})=)[^&#]*`, "gi");

/** The URL as it may be logged: key-shaped values anywhere (loosely: masking a name costs nothing), and credential-named query values, masked. */
export const redactUrl = (url: string): string => url.replace(NAMED, "$1[redacted]").replace(KEY_SHAPED, "[redacted]");

/** True when the query string carries a credential: by parameter name, or a name or value holding a key. */
export function queryCarriesCredential(url: string): boolean {
  const at = url.indexOf("?");
  if (at < 0) return false;
  for (const [name, value] of new URLSearchParams(url.slice(at + 1))) {
    if (CREDENTIAL_NAMES.has(name.toLowerCase())) return true;
    if (HOLDS_KEY.test(name) || HOLDS_KEY.test(value)) return true;
  }
  return false;
}
