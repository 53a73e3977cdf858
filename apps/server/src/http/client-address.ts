import { isIPv6 } from "node:net";

/**
 * The client as limits count it: an IPv4 address, or an IPv6 address's /64 (one subscriber's
 * network: a host picks any address in it, so counting whole addresses would let it walk past
 * every per-address limit). An IPv4 address written as IPv6 (::ffff:a.b.c.d) counts as itself.
 */
export function clientAddress(ip: string): string {
  const address = ip.replace(/%.*$/, "").toLowerCase();
  if (!isIPv6(address)) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (mapped) return mapped[1]!;
  const [head, tail] = address.split("::") as [string, string | undefined];
  const groups = head ? head.split(":") : [];
  if (tail !== undefined) {
    const rest = tail ? tail.split(":") : [];
    // An IPv4 ending (a.b.c.d) is two groups; it lies past the first four anyway.
    const size = rest.reduce((n, g) => n + (g.includes(".") ? 2 : 1), 0);
    groups.push(...Array<string>(8 - groups.length - size).fill("0"), ...rest);
  }
  return `${groups.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(":")}::/64`;
}
