import { ipInRanges, normalizeIp, type AddressRange } from "../../shared/ip";

/**
 * The client's address. The direct peer is `CF-Connecting-IP`: Cloudflare sets it on every
 * request and a client cannot forge it; locally Miniflare sets it to the socket's peer (but keeps
 * one a client sent, README "Rate limiting"). Only when that peer is a trusted proxy do the
 * forwarding headers name the client, in spec 8's order: the first address of X-Forwarded-For,
 * else X-Real-IP. A header present but not holding an address falls back to the peer; anyone
 * else's forwarding headers are ignored, or every client could pick its own address. "unknown"
 * when there is no peer address at all.
 *
 * @example
 * clientAddress(new Headers({ "cf-connecting-ip": "127.0.0.1", "x-forwarded-for": "203.0.113.7, 10.0.0.1" }), LOOPBACK_RANGES); // "203.0.113.7"
 */
export function clientAddress(headers: Headers, trustedProxies: readonly AddressRange[]): string {
  const peer = normalizeIp(headers.get("cf-connecting-ip") ?? "") ?? "unknown";
  if (!ipInRanges(peer, trustedProxies)) return peer;
  const forwarded = headers.get("x-forwarded-for");
  if (forwarded !== null) return normalizeIp(forwarded.split(",")[0]!) ?? peer;
  const real = headers.get("x-real-ip");
  if (real !== null) return normalizeIp(real) ?? peer;
  return peer;
}
