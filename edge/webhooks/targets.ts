import ipaddr from "ipaddr.js";

/*
 * Where outbound webhooks may go (SSRF): not to this machine or a private network unless an
 * admin allows it (PUT /api/admin/webhooks). The URL is checked as given, in the Worker: local
 * names, a trailing dot (`localhost.` is localhost), and literal addresses, IPv4 in any form the
 * URL parser accepts and IPv6 including the ranges that embed or reach IPv4 (NAT64 64:ff9b::/96
 * and 64:ff9b:1::/48, 6to4 2002::/16, Teredo, IPv4-mapped and IPv4-compatible ::a.b.c.d). An
 * address is allowed only when ipaddr.js calls its range "unicast" (and, for IPv6, it is global
 * unicast, 2000::/3). Names are resolved where resolving is possible: the local host delivers
 * through a Node fetcher that resolves once, checks every address with `refusedAddress` and
 * connects to the checked one (edge/local/webhook-outbound.ts). A deployed Worker cannot resolve
 * names; its fetches leave through Cloudflare's network, which cannot reach a private one.
 */

/** The most webhook targets one job may name in --webhook_config. */
export const MAX_WEBHOOK_TARGETS = 5;
/** The shortest --webhook_reporting_interval (seconds): progress is sent at most this often. */
export const MIN_REPORTING_INTERVAL_SECONDS = 5;

const ALLOW_HINT = "an admin can allow private targets (PUT /api/admin/webhooks)";
const GLOBAL_UNICAST = ipaddr.IPv6.parse("2000::");

/**
 * Why an IP address may not receive webhooks (loopback, private, reserved, or an IPv6 form that
 * reaches IPv4), or null for a public unicast address. Not an address at all: refused too.
 *
 * @example
 * refusedAddress("64:ff9b::7f00:1"); // "64:ff9b::7f00:1 is in the rfc6052 range ..."
 */
export function refusedAddress(address: string, hint: string = ALLOW_HINT): string | null {
  if (!ipaddr.isValid(address)) return `${address} is not an IP address`;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  const range = parsed.range();
  // IPv6 names its range: which of the many (NAT64, 6to4, Teredo, ...) is not obvious from the address.
  if (range !== "unicast")
    return `${address} is a loopback, private or reserved address${parsed.kind() === "ipv6" ? ` (${range})` : ""}; ${hint}`;
  if (parsed.kind() === "ipv6") {
    const v6 = parsed as ipaddr.IPv6;
    if (v6.parts.slice(0, 6).every((part) => part === 0))
      return `${address} is an IPv4-compatible address (::/96), a loopback, private or reserved range; ${hint}`;
    if (!v6.match(GLOBAL_UNICAST, 3))
      return `${address} is not a global unicast IPv6 address (2000::/3): a private or reserved range; ${hint}`;
  }
  return null;
}

/** Why a webhook URL is refused, or null when it may be called (names are resolved later, where that is possible). */
export function refusedTarget(raw: string, allowPrivate: boolean): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return "not a URL";
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return "only http and https URLs are called";
  if (url.username || url.password) return "credentials in the URL are not allowed";
  if (allowPrivate) return null;
  return refusedHost(url.hostname);
}

/** Who may let a provider's outbound settings (api_base_url, proxy_url) reach private hosts, for the refusals. */
export const PROVIDER_PRIVATE_HINT = 'an admin allows private targets for this provider with "allow_private_targets": true';

/**
 * Why a name's resolved addresses may not be reached: the first that is loopback, private,
 * link-local, a metadata or a reserved address, worded with the name; null when all are public.
 * Used where the name is resolved (the local host's webhook and provider fetchers).
 *
 * @example
 * refusedResolution("rebound.example", [{ address: "127.0.0.1" }]); // "rebound.example resolves to 127.0.0.1: ..."
 */
export function refusedResolution(host: string, addresses: { address: string }[], hint: string = ALLOW_HINT): string | null {
  for (const { address } of addresses) {
    const problem = refusedAddress(address, hint);
    if (problem) return `${host} resolves to ${address}: ${problem}`;
  }
  return null;
}

/**
 * Why a URL's host may not be called unless private targets are allowed (a local name, a
 * trailing dot, a loopback, private or reserved address), or null. `hint` says who can allow
 * them; the provider settings reuse this with their own (edge/cloud/provider-settings.ts).
 *
 * @example
 * refusedHost("169.254.169.254"); // "169.254.169.254 is a loopback, private or reserved address; ..."
 */
export function refusedHost(hostname: string, hint: string = ALLOW_HINT): string | null {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, "");
  // A trailing dot names the same host (`localhost.`, `10.0.0.1.` is not even an address then).
  if (host.endsWith(".")) return `${host} ends with a dot: write the name without it`;
  if (
    host === "localhost" ||
    host.endsWith(".localhost") ||
    host.endsWith(".local") ||
    host.endsWith(".internal") ||
    host.endsWith(".home.arpa") ||
    (!host.includes(".") && !host.includes(":"))
  ) {
    return `${host} is a local name; ${hint}`;
  }
  if (ipaddr.isValid(host)) return refusedAddress(host, hint);
  // A name that only looks like an address (the URL parser already normalised 0x7f.1 and 2130706433).
  if (/^[\d.]+$/.test(host)) return `${host} is not a valid address`;
  return null;
}

/**
 * The problems of a job's webhook options beyond their shape: at most MAX_WEBHOOK_TARGETS
 * targets, a reporting interval of at least MIN_REPORTING_INTERVAL_SECONDS. `targets`: the
 * number of --webhook_config entries.
 *
 * @example
 * webhookLimitProblems(6, 1); // two problems, one per option
 */
export function webhookLimitProblems(targets: number, interval: unknown): { field: string; message: string }[] {
  const problems: { field: string; message: string }[] = [];
  if (targets > MAX_WEBHOOK_TARGETS)
    problems.push({ field: "--webhook_config", message: `at most ${MAX_WEBHOOK_TARGETS} webhook targets per job; this names ${targets}` });
  if (typeof interval === "number" && interval < MIN_REPORTING_INTERVAL_SECONDS)
    problems.push({ field: "--webhook_reporting_interval", message: `must be at least ${MIN_REPORTING_INTERVAL_SECONDS} (seconds)` });
  return problems;
}
