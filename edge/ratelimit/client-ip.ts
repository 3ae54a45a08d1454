import { ipInRanges, LOOPBACK_RANGES, normalizeIp, type AddressRange } from "../../shared/ip";

/**
 * The direct peer: `CF-Connecting-IP`, which Cloudflare sets on every request and a client
 * cannot forge; locally the client front (edge/local/client-front.ts) sets it from the TCP peer
 * and drops one a client sent. "unknown" when there is none.
 *
 * @example
 * directPeer(new Headers({ "cf-connecting-ip": "::ffff:127.0.0.1" })); // "127.0.0.1"
 */
export function directPeer(headers: Headers): string {
  return normalizeIp(headers.get("cf-connecting-ip") ?? "") ?? "unknown";
}

/**
 * The client's address: the direct peer (see directPeer). Only when that peer is a trusted proxy do the
 * forwarding headers name the client, in this order: the first address of X-Forwarded-For,
 * else X-Real-IP. A header present but not holding an address falls back to the peer; anyone
 * else's forwarding headers are ignored, or every client could pick its own address. "unknown"
 * when there is no peer address at all.
 *
 * @example
 * clientAddress(new Headers({ "cf-connecting-ip": "127.0.0.1", "x-forwarded-for": "203.0.113.7, 10.0.0.1" }), LOOPBACK_RANGES); // "203.0.113.7"
 */
export function clientAddress(headers: Headers, trustedProxies: readonly AddressRange[]): string {
  return resolveClient(headers, trustedProxies).address;
}

/**
 * The client's address as clientAddress finds it, and whether a trusted proxy forwarded the
 * request (a forwarding header from a trusted peer, even one naming no address; false: the
 * client is the socket's peer itself).
 *
 * @example
 * resolveClient(new Headers({ "cf-connecting-ip": "127.0.0.1", "x-real-ip": "127.0.0.1" }), LOOPBACK_RANGES); // { address: "127.0.0.1", forwarded: true }
 */
export function resolveClient(headers: Headers, trustedProxies: readonly AddressRange[]): { address: string; forwarded: boolean } {
  const peer = directPeer(headers);
  if (!ipInRanges(peer, trustedProxies)) return { address: peer, forwarded: false };
  const header = headers.get("x-forwarded-for")?.split(",")[0] ?? headers.get("x-real-ip");
  if (header === null || header === undefined) return { address: peer, forwarded: false };
  // Forwarded even when the header names no address: a proxy that appends passes on whatever
  // its client put first, so a garbled header must not make the client look like the proxy.
  return { address: normalizeIp(header) ?? peer, forwarded: true };
}

/**
 * Whether the request comes from this machine itself: its socket peer is loopback and no trusted
 * proxy's forwarding header named another client (a proxy on this machine forwards everyone, so
 * a forwarded "127.0.0.1" proves nothing).
 *
 * @example
 * fromGenuineLoopback(new Headers({ "cf-connecting-ip": "127.0.0.1" }), LOOPBACK_RANGES); // true
 * fromGenuineLoopback(new Headers({ "cf-connecting-ip": "127.0.0.1", "x-forwarded-for": "127.0.0.1" }), LOOPBACK_RANGES); // false
 */
export function fromGenuineLoopback(headers: Headers, trustedProxies: readonly AddressRange[]): boolean {
  return !resolveClient(headers, trustedProxies).forwarded && ipInRanges(directPeer(headers), LOOPBACK_RANGES);
}
