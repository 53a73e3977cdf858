import { promises as dns } from "node:dns";
import { BlockList, isIP } from "node:net";

/**
 * Addresses a webhook may not reach unless WEBHOOK_ALLOW_PRIVATE is set (SSRF): unspecified,
 * loopback, private, shared (CGNAT), link-local (cloud metadata at 169.254.169.254), unique-local,
 * multicast, reserved and documentation ranges; in IPv6 also the IETF protocol assignments
 * (2001::/23: Teredo, benchmarking), local-use NAT64 (64:ff9b:1::/48, which a translator may map
 * to any IPv4 address) and SRv6 segment ids.
 */
const blocked = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["127.0.0.0", 8], ["169.254.0.0", 16], ["172.16.0.0", 12],
  ["192.0.0.0", 24], ["192.0.2.0", 24], ["192.168.0.0", 16], ["198.18.0.0", 15], ["198.51.100.0", 24],
  ["203.0.113.0", 24], ["224.0.0.0", 4], ["240.0.0.0", 4],
] as const)
  blocked.addSubnet(net, prefix, "ipv4");
for (const [net, prefix] of [
  ["::", 128], ["::1", 128], ["64:ff9b:1::", 48], ["100::", 64], ["2001::", 23], ["2001:db8::", 32], ["3fff::", 20], ["5f00::", 16],
  ["fc00::", 7], ["fe80::", 10], ["fec0::", 10], ["ff00::", 8],
] as const)
  blocked.addSubnet(net, prefix, "ipv6");

/** The 16 bytes of an IPv6 address (`::` and a trailing dotted quad included). */
export function ipv6Bytes(address: string): number[] {
  let text = address.toLowerCase().replace(/%.*$/, "");
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = text.slice(0, quad.index) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const groups = tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill("0"), ...right];
  return groups.flatMap((g) => {
    const n = parseInt(g || "0", 16);
    return [n >> 8, n & 0xff];
  });
}

/**
 * The IPv4 address an IPv6 one carries (mapped ::ffff:0:0/96, translated ::ffff:0:0:0/96,
 * compatible ::/96, NAT64 64:ff9b::/96, 6to4 2002::/16), if any.
 */
function embeddedIpv4(address: string): string | null {
  const b = ipv6Bytes(address);
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const v4 = (at: number) => b.slice(at, at + 4).join(".");
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4(12);
  if (zeros(0, 8) && b[8] === 0xff && b[9] === 0xff && zeros(10, 12)) return v4(12);
  if (zeros(0, 12) && !zeros(12, 16) && !(zeros(12, 15) && b[15] === 1)) return v4(12);
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) return v4(12);
  if (b[0] === 0x20 && b[1] === 0x02) return v4(2);
  return null;
}

/** True when an IP address is public unicast, so a webhook may be sent to it. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !blocked.check(address, "ipv4");
  if (family !== 6) return false;
  const v4 = embeddedIpv4(address);
  if (v4 !== null) return !blocked.check(v4, "ipv4");
  return !blocked.check(address, "ipv6");
}

/** A host a webhook may not be sent to; the message says why (it ends up in a delivery's last_error or a 400). */
export class AddressRefused extends Error {}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** DNS answers that say the name is not there (or no DNS server listens): the system's own lookup may still know it. */
const NOT_IN_DNS = new Set(["ENOTFOUND", "ENODATA", "ENONAME", "ECONNREFUSED", "ESERVFAIL", "EREFUSED"]);

/**
 * A host's addresses from DNS, by c-ares (node's Resolver): its own sockets, a deadline of its own,
 * cancelled at it. Not getaddrinfo (`dns.lookup`), which runs on libuv's thread pool, of which DNS
 * may take two threads for the whole process: two names whose DNS never answers would stall every
 * other lookup (other endpoints, the database's, Stripe's) for as long as they hang. Null: DNS does
 * not know the name (a name of /etc/hosts, say), for the system's lookup to answer.
 */
async function fromDns(host: string, timeoutMs: number): Promise<ResolvedAddress[] | null> {
  const resolver = new dns.Resolver({ timeout: timeoutMs, tries: 1 });
  // The servers of node's default resolver (the system's, unless a program set others).
  resolver.setServers(dns.getServers());
  const timer = setTimeout(() => resolver.cancel(), timeoutMs);
  try {
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
    const found: ResolvedAddress[] = [
      ...(v4.status === "fulfilled" ? v4.value.map((address) => ({ address, family: 4 as const })) : []),
      ...(v6.status === "fulfilled" ? v6.value.map((address) => ({ address, family: 6 as const })) : []),
    ];
    if (found.length > 0) return found;
    const codes = [v4, v6].map((r) => (r.status === "rejected" ? String((r.reason as { code?: string }).code) : "ENODATA"));
    if (codes.every((code) => NOT_IN_DNS.has(code))) return null;
    const late = codes.includes("ETIMEOUT") || codes.includes("ECANCELLED");
    throw new AddressRefused(`host ${host} could not be resolved (${late ? `no answer within ${timeoutMs} ms` : codes.find((code) => !NOT_IN_DNS.has(code))})`);
  } finally {
    clearTimeout(timer);
  }
}

/** A name DNS does not know, through the system's lookup (/etc/hosts, mDNS), within the deadline. */
async function fromSystem(host: string, timeoutMs: number): Promise<ResolvedAddress[]> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const found = dns.lookup(host, { all: true, verbatim: true }) as Promise<ResolvedAddress[]>;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new AddressRefused(`host ${host} could not be resolved (no answer within ${timeoutMs} ms)`)), timeoutMs);
    });
    const addresses = await Promise.race([found, late]);
    if (addresses.length === 0) throw new AddressRefused(`host ${host} does not resolve`);
    return addresses;
  } catch (err) {
    if (err instanceof AddressRefused) throw err;
    const code = (err as { code?: string }).code;
    throw new AddressRefused(code === "ENOTFOUND" ? `host ${host} does not resolve` : `host ${host} could not be resolved (${code ?? "error"})`);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * How long a host's lookup (its answer, or its failure) is shared: by an attempt's check and its
 * connection's lookup, and by attempts to the same host close together, so a host whose DNS hangs
 * costs one lookup at a time, not one per attempt in flight.
 */
const SHARED_MS = 5_000;
const MAX_SHARED = 1_000;
const shared = new Map<string, { at: number; addresses: Promise<ResolvedAddress[]> }>();

function addressesOf(host: string, timeoutMs: number): Promise<ResolvedAddress[]> {
  const now = Date.now();
  const known = shared.get(host);
  if (known && now - known.at < SHARED_MS) return known.addresses;
  if (shared.size >= MAX_SHARED) for (const [name, entry] of shared) if (now - entry.at >= SHARED_MS) shared.delete(name);
  const deadline = now + timeoutMs;
  const addresses = fromDns(host, timeoutMs).then((found) => found ?? fromSystem(host, Math.max(deadline - Date.now(), 1)));
  addresses.catch(() => undefined); // a failure is for each caller to see; none left unhandled
  shared.set(host, { at: now, addresses });
  return addresses;
}

/**
 * The addresses of a URL's host (an IP literal as itself), checked: when `allowPrivate` is false,
 * any address that is not public refuses the whole host (a name with one private address among
 * public ones could be steered to it). Connect only to what this returns (no second lookup, so
 * DNS rebinding between check and connect cannot happen). A lookup without an answer within
 * `timeoutMs` refuses the host as one that does not resolve.
 */
export async function resolveWebhookHost(hostname: string, allowPrivate: boolean, timeoutMs: number): Promise<ResolvedAddress[]> {
  const host = hostname.replace(/^\[(.*)\]$/, "$1");
  const literal = isIP(host);
  const addresses: ResolvedAddress[] = literal ? [{ address: host, family: literal as 4 | 6 }] : await addressesOf(host, timeoutMs);
  if (!allowPrivate) {
    const refused = addresses.find((a) => !isPublicAddress(a.address));
    // A name's address is not told: a key holder could map the server's internal network by it.
    if (refused)
      throw new AddressRefused(
        `${literal ? `address ${refused.address},` : `host ${host} resolves to`} a loopback, private, link-local or otherwise non-public address (allowed only when the server sets WEBHOOK_ALLOW_PRIVATE)`,
      );
  }
  return addresses;
}
