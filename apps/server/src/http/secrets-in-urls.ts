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
/** The same shape, without the global flag: `test` keeps no position between calls. */
const IS_KEY_SHAPED = new RegExp(KEY_SHAPE, "i");
const NAMED = new RegExp(`([?&](?:${LOGGED_MASKED})=)[^&#]*`, "gi");

/** The URL as it may be logged: key-shaped values anywhere, and credential-named query values, masked. */
export const redactUrl = (url: string): string => url.replace(NAMED, "$1[redacted]").replace(KEY_SHAPED, "[redacted]");

/** True when the query string carries a credential: by parameter name, or a key-shaped name or value. */
export function queryCarriesCredential(url: string): boolean {
  const at = url.indexOf("?");
  if (at < 0) return false;
  for (const [name, value] of new URLSearchParams(url.slice(at + 1))) {
    if (CREDENTIAL_NAMES.has(name.toLowerCase())) return true;
    if (IS_KEY_SHAPED.test(name) || IS_KEY_SHAPED.test(value)) return true;
  }
  return false;
}
