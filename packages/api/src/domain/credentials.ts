/**
 * The secret of an Authorization header: `Bearer <secret>`, or HTTP Basic with the secret as the
 * user name and an empty password, as Stripe's curl examples send it (`curl -u sk_test_…:`). The
 * scheme is case-insensitive (RFC 7235); the secret is not. Undefined for anything else.
 */
export function credentialOf(authorization: string | undefined): string | undefined {
  const header = authorization ?? "";
  const bearer = /^bearer\s+(\S+)\s*$/i.exec(header);
  if (bearer) return bearer[1];
  const basic = /^basic\s+([A-Za-z0-9+/]+=*)\s*$/i.exec(header);
  if (!basic) return undefined;
  const decoded = Buffer.from(basic[1]!, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  // Stripe ignores the password; so does this (curl -u key: sends an empty one).
  const user = colon === -1 ? decoded : decoded.slice(0, colon);
  return user && !/\s/.test(user) ? user : undefined;
}
