import { ipv6Bytes } from "@cardctl/api";
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
  const b = ipv6Bytes(address);
  return `${[0, 2, 4, 6].map((i) => ((b[i]! << 8) | b[i + 1]!).toString(16)).join(":")}::/64`;
}
