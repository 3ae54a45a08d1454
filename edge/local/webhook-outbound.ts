import { lookup as dnsLookup } from "node:dns/promises";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { refusedResolution, refusedTarget } from "../webhooks/targets";

/*
 * The local host's outbound fetcher for webhook deliveries, a service binding of the Worker
 * (WEBHOOK_OUTBOUND). workerd has no DNS API, so the Worker can only check a URL as written; a
 * public-looking name may still resolve to 127.0.0.1 or a private network. Here, in Node, the
 * name is resolved once, every address it resolves to is checked (edge/webhooks/targets.ts),
 * and the connection goes to the checked address: the name is not looked up again between check
 * and connect (DNS rebinding). TLS still verifies the certificate against the name.
 */

/** The header by which the Worker says an admin allowed private targets (only the Worker can call this binding). */
export const ALLOW_PRIVATE_HEADER = "x-outbound-allow-private";
/** Headers of this fetcher's own answers: the delivery was refused, or failed before a receiver answered. */
export const REFUSED_HEADER = "x-outbound-refused";
export const FAILED_HEADER = "x-outbound-failed";

export type Resolver = (hostname: string) => Promise<{ address: string; family: number }[]>;

export const systemResolver: Resolver = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/** What became of one delivery: the receiver's status, or why it never got one. */
export type OutboundResult = { status: number } | { refused: string } | { failed: string };

/**
 * Delivers one webhook request: checks the URL, resolves its name once, refuses when any
 * address is private (unless allowed), and sends the request to the first address. 10 s
 * timeout; redirects are not followed.
 *
 * @example
 * const result = await deliverGuarded(new Request("https://hooks.example.com/in", { method: "POST", body: "{}" }));
 */
export async function deliverGuarded(request: Request, resolve: Resolver = systemResolver): Promise<OutboundResult> {
  const allowPrivate = request.headers.get(ALLOW_PRIVATE_HEADER) === "1";
  const refused = refusedTarget(request.url, allowPrivate);
  if (refused) return { refused };
  const url = new URL(request.url);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  let addresses: { address: string; family: number }[];
  try {
    addresses = await resolve(host);
  } catch (error) {
    return { failed: `could not resolve ${host}: ${(error as Error).message}` };
  }
  if (!addresses.length) return { failed: `${host} resolves to no address` };
  const refusedAt = allowPrivate ? null : refusedResolution(host, addresses);
  if (refusedAt) return { refused: refusedAt };
  const target = addresses[0]!;
  // The connection goes to the address checked above, whatever a second lookup would say.
  const pinned: LookupFunction = (_hostname, options, callback) => {
    if ((options as { all?: boolean }).all)
      (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [target]);
    else callback(null, target.address, target.family);
  };
  const headers: Record<string, string> = {};
  request.headers.forEach((value, name) => {
    if (name !== ALLOW_PRIVATE_HEADER && name !== "host") headers[name] = value;
  });
  const body = Buffer.from(await request.arrayBuffer());
  headers["content-length"] = String(body.length);
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise<OutboundResult>((resolvePromise) => {
    const outgoing = send(
      url,
      { method: request.method, headers, lookup: pinned, timeout: 10_000, servername: ipLiteral(host) ? undefined : host },
      (response) => {
        response.resume();
        resolvePromise({ status: response.statusCode ?? 502 });
      },
    );
    outgoing.on("timeout", () => outgoing.destroy(new Error("timed out after 10 s")));
    outgoing.on("error", (error) => resolvePromise({ failed: error.message }));
    outgoing.end(body);
  });
}

const ipLiteral = (host: string) => /^[\d.]+$/.test(host) || host.includes(":");

/**
 * The binding's answer for the Worker: the receiver's status, or 403 with REFUSED_HEADER, or
 * 502 with FAILED_HEADER (edge/webhooks/delivery.ts reads them).
 */
export function outboundAnswer(result: OutboundResult): { status: number; headers: Record<string, string> } {
  if ("refused" in result) return { status: 403, headers: { [REFUSED_HEADER]: encodeURIComponent(result.refused) } };
  if ("failed" in result) return { status: 502, headers: { [FAILED_HEADER]: encodeURIComponent(result.failed) } };
  return { status: result.status, headers: {} };
}
