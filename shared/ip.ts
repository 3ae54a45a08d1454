import ipaddr from "ipaddr.js";
import { remembered } from "./remembered";

/*
 * Client addresses and address ranges (trusted proxies, webhook allowlists). ipaddr.js does the
 * parsing and prefix matching for IPv4 and IPv6; this adds what both callers need: IPv4-mapped
 * IPv6 addresses (::ffff:10.0.0.1) treated as the IPv4 address, and an entry's error naming it.
 */

export type AddressRange = [ipaddr.IPv4 | ipaddr.IPv6, number];

type Parsed = { text: string; address: ipaddr.IPv4 | ipaddr.IPv6 } | null;

/*
 * Addresses parsed, by their text as given: a request's peer is read several times (its rate
 * limit, the loopback checks) and a few clients send most requests, so a text is parsed once;
 * parsing was about 5 % of a request's CPU in workerd (profiled under `npm run bench:scheduler`).
 * No address is longer than 64 characters.
 */
const parsedIp = remembered(
  (text): Parsed => {
    const trimmed = text.trim().replace(/^\[(.*)\]$/, "$1");
    if (!ipaddr.isValid(trimmed)) return null;
    const address = ipaddr.process(trimmed);
    return { text: address.toString(), address };
  },
  { maxKeyLength: 64 },
);

/** An address in its canonical text form (IPv4-mapped IPv6 as IPv4), or null when not an address. */
export function normalizeIp(text: string): string | null {
  return parsedIp(text)?.text ?? null;
}

/**
 * One allowlist or proxy-list entry: a CIDR range (`10.0.0.0/8`, `2001:db8::/32`) or a single
 * address (`203.0.113.7`, taken as /32 or /128). Throws an Error naming the entry when invalid.
 */
export function parseRange(entry: string): AddressRange {
  const text = entry.trim();
  if (text.includes("/")) {
    try {
      const [address, bits] = ipaddr.parseCIDR(text);
      if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96)
        return [(address as ipaddr.IPv6).toIPv4Address(), bits - 96];
      return [address, bits];
    } catch {
      throw new Error(`"${entry}" is not a valid CIDR range (like 10.0.0.0/8 or 2001:db8::/32)`);
    }
  }
  if (!ipaddr.isValid(text)) throw new Error(`"${entry}" is not a valid IP address or CIDR range`);
  const address = ipaddr.process(text);
  return [address, address.kind() === "ipv4" ? 32 : 128];
}

/** Whether `ip` lies in any of `ranges` (an unparseable ip never does). */
export function ipInRanges(ip: string, ranges: readonly AddressRange[]): boolean {
  const address = parsedIp(ip)?.address;
  return address !== undefined && ranges.some(([base, bits]) => base.kind() === address.kind() && address.match(base, bits));
}

/** Loopback: 127.0.0.0/8 and ::1. */
export const LOOPBACK_RANGES: readonly AddressRange[] = [parseRange("127.0.0.0/8"), parseRange("::1")];

/**
 * Whether a URL's host names this machine: `localhost`, or an address in LOOPBACK_RANGES (a URL's
 * IPv6 host in brackets too). The one place where plain http:// is allowed to carry a credential.
 *
 * @example
 * isLoopbackHost(new URL("http://[::1]:8001").hostname); // true
 * isLoopbackHost("train.example.com"); // false
 */
export function isLoopbackHost(hostname: string): boolean {
  return hostname.toLowerCase() === "localhost" || ipInRanges(hostname.replace(/^\[(.*)\]$/, "$1"), LOOPBACK_RANGES);
}

/**
 * The key a client's rate limits are counted under: an IPv4 address as it is, an IPv6 address
 * by its /64 network (one subscriber's usual allocation, so rotating through it gains nothing).
 * Anything else (no address known) as given.
 *
 * @example
 * rateLimitKey("2001:db8:1:2:aaaa::5"); // "2001:db8:1:2::/64"
 * rateLimitKey("203.0.113.7"); // "203.0.113.7"
 */
export function rateLimitKey(ip: string): string {
  const parsed = parsedIp(ip);
  if (parsed === null) return ip;
  if (parsed.address.kind() === "ipv4") return parsed.text;
  const network = ipaddr.IPv6.networkAddressFromCIDR(`${parsed.text}/64`);
  return `${network.toString()}/64`;
}
