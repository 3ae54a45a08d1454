import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import { constants } from "node:fs";
import { Readable } from "node:stream";
import type { ReadableStream as NodeReadableStream } from "node:stream/web";
import { Agent, ProxyAgent, request as undiciRequest, type Dispatcher } from "undici";
import type { LookupFunction } from "node:net";
import { OUTBOUND_HEADERS, TIMEOUT_REASON } from "../cloud/outbound";
import ipaddr from "ipaddr.js";
import { PROVIDER_PRIVATE_HINT as PRIVATE_HINT, refusedHost, refusedResolution } from "../webhooks/targets";
import { systemResolver, type Resolver } from "./webhook-outbound";

/*
 * The local host's side of the PROVIDER_OUTBOUND binding: it makes the Worker's provider calls
 * from Node, where a proxy and a CA bundle can apply (a Worker has neither). The Worker hands
 * the provider's settings over in x-outbound-* headers (edge/cloud/outbound.ts); the host's
 * environment supplies the defaults (HTTPS_PROXY, HTTP_PROXY, NO_PROXY, SERVICE_CA_BUNDLE,
 * SERVICE_SSL_VERIFY). Bodies stream through in both directions; nothing is buffered.
 *
 * The Worker checks api_base_url and proxy_url as written (it cannot resolve names); here every
 * name is resolved as it is connected to and refused when any address is loopback, private,
 * link-local or a metadata address, unless the provider allows private targets: the check and
 * the connection use the same answer, so a name cannot be rebound between them.
 */

/** Why a host (a name or an address literal) may not be reached, or null; `resolve` answers for names. */
async function refusedDestination(hostname: string, resolve: Resolver): Promise<string | null> {
  const written = refusedHost(hostname, PRIVATE_HINT);
  if (written) return written;
  const host = hostname.replace(/^\[|\]$/g, "");
  return ipaddr.isValid(host) ? null : refusedResolution(host, await resolve(host), PRIVATE_HINT);
}

/** Names left to the connection's own lookup (guardedLookup), which checks what it connects to. */
const atConnect: Resolver = async () => [];

/** A socket lookup that refuses private addresses (the connection then fails with the reason). */
function guardedLookup(resolve: Resolver): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const refused = refusedResolution(hostname, addresses, PRIVATE_HINT);
        if (refused) return callback(new Error(refused), "", 4);
        if (!addresses.length) return callback(new Error(`${hostname} resolves to no address`), "", 4);
        if ((options as { all?: boolean }).all)
          (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (error: Error) => callback(error, "", 4),
    );
  };
}

/** The host's defaults for provider calls, from its environment (edge/local/host-environment.ts reads them). */
export interface OutboundDefaults {
  /** HTTPS_PROXY: the proxy for https:// providers (null: none). */
  httpsProxy: string | null;
  /** HTTP_PROXY: the proxy for http:// providers. */
  httpProxy: string | null;
  /** NO_PROXY: hosts (and their subdomains; `*`: all) reached directly. */
  noProxy: string[];
  /** SERVICE_CA_BUNDLE: a PEM file of extra trusted certificates, for providers with no bundle of their own. */
  caBundle: string | null;
  /** SERVICE_SSL_VERIFY: false turns certificate verification off for every provider. */
  sslVerify: boolean;
}

/** No proxy, no extra CA, verification on. */
export const NO_OUTBOUND_DEFAULTS: OutboundDefaults = { httpsProxy: null, httpProxy: null, noProxy: [], caBundle: null, sslVerify: true };

/** Headers of one hop only, or this layer's own: never passed on (RFC 9110 7.6.1). */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer", "upgrade", "host"]);
const OWN = new Set<string>(Object.values(OUTBOUND_HEADERS));
const RESPONSE_DROPPED = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "trailer", "upgrade"]);

/** Whether NO_PROXY sends `hostname` direct: `*`, the host itself, or a domain it is under. */
function bypassesProxy(hostname: string, noProxy: string[]): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return noProxy.some((entry) => {
    const name = entry
      .replace(/:\d+$/, "")
      .replace(/^\*?\./, "")
      .toLowerCase();
    return entry === "*" || host === name || host.endsWith(`.${name}`);
  });
}

// A dispatcher keeps its connections open for reuse; one per distinct (proxy, CA, verify, resolver).
const dispatchers = new Map<string, Dispatcher>();
const MAX_DISPATCHERS = 16;
/** Each resolver a guarded dispatcher was made with, numbered: one made with another resolver is never reused. */
const resolverIds = new WeakMap<Resolver, number>();
let resolversSeen = 0;

function dispatcherFor(proxy: string | null, ca: Buffer | null, verify: boolean, guard: Resolver | null): Dispatcher {
  if (guard && !resolverIds.has(guard)) resolverIds.set(guard, ++resolversSeen);
  const guardId = guard ? resolverIds.get(guard)! : null;
  const key = JSON.stringify([proxy, ca ? createHash("sha256").update(ca).digest("hex") : null, verify, guardId]);
  const known = dispatchers.get(key);
  if (known) return known;
  const tls = { ...(ca ? { ca } : {}), rejectUnauthorized: verify };
  // proxyTunnel false: plain-http providers get absolute-form requests, as HTTP proxies expect; https ones still CONNECT.
  const made = proxy
    ? new ProxyAgent({ uri: proxy, requestTls: tls, proxyTunnel: false })
    : new Agent({ connect: { ...tls, ...(guard ? { lookup: guardedLookup(guard) } : {}) } });
  if (dispatchers.size >= MAX_DISPATCHERS) {
    const [oldestKey, oldest] = dispatchers.entries().next().value!;
    dispatchers.delete(oldestKey);
    void oldest.close().catch(() => {});
  }
  dispatchers.set(key, made);
  return made;
}

/** The host gave up: no answer from the provider. The Worker turns this into a ProviderError. */
function failed(reason: string): Response {
  return new Response(null, { status: 502, headers: { [OUTBOUND_HEADERS.failed]: encodeURIComponent(reason) } });
}

/** Why a call failed, for the Worker's error: the cause's code and message (e.g. DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate). */
function reasonOf(error: unknown): string {
  const e = error as NodeJS.ErrnoException & { cause?: unknown };
  const inner = (e.cause ?? e) as NodeJS.ErrnoException;
  const message = inner.message || String(inner);
  return inner.code && !message.includes(inner.code) ? `${inner.code}: ${message}` : message;
}

/**
 * Makes one provider call for the Worker: applies the x-outbound-* settings over the host's
 * defaults (the provider's proxy and CA win; verification is off when either says so), streams
 * the request body on, and answers the provider's response as it comes (status, headers,
 * streamed body). When no answer came (unreachable, TLS refused, timed out, the CA bundle
 * unreadable) it answers 502 with x-outbound-failed naming the reason.
 *
 * @example
 * const response = await forwardProviderRequest(request, readOutboundDefaults(process.env));
 */
export async function forwardProviderRequest(
  request: Request,
  defaults: OutboundDefaults,
  resolve: Resolver = systemResolver,
): Promise<Response> {
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    return failed(`not a URL: ${request.url}`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return failed(`only http and https URLs are fetched, not ${url.protocol}`);
  const get = (name: string) => request.headers.get(name) || null;
  const verify = get(OUTBOUND_HEADERS.sslVerify) !== "0" && defaults.sslVerify;
  const caPath = get(OUTBOUND_HEADERS.caBundle) ?? defaults.caBundle;
  const proxy =
    get(OUTBOUND_HEADERS.proxy) ??
    (bypassesProxy(url.hostname, defaults.noProxy) ? null : url.protocol === "https:" ? defaults.httpsProxy : defaults.httpProxy);
  const timeoutMs = Math.min(Math.max(Number(get(OUTBOUND_HEADERS.timeoutMs) ?? 30_000) || 30_000, 1), 3_600_000);

  let ca: Buffer | null = null;
  if (caPath) {
    try {
      ca = await readCaBundle(caPath);
    } catch (error) {
      return failed(`cannot read the CA bundle ${caPath} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
  }
  const allowPrivate = get(OUTBOUND_HEADERS.allowPrivate) === "1";
  if (!allowPrivate) {
    // Through a proxy, the proxy resolves the provider's name: both are checked here; directly,
    // the connection's own lookup checks it (below), and an address literal is checked now.
    try {
      const refused =
        // The admin's proxy_url is checked; the host's own HTTPS_PROXY is the operator's choice.
        (proxy && get(OUTBOUND_HEADERS.proxy) ? await refusedDestination(new URL(proxy).hostname, resolve) : null) ??
        (await refusedDestination(url.hostname, proxy ? resolve : atConnect));
      if (refused) return failed(`refused: ${refused}`);
    } catch (error) {
      return failed(`could not resolve the provider's host: ${reasonOf(error)}`);
    }
  }
  let dispatcher: Dispatcher;
  try {
    dispatcher = dispatcherFor(proxy, ca, verify, allowPrivate || proxy ? null : resolve);
  } catch (error) {
    return failed(`the proxy ${proxy} is not usable: ${reasonOf(error)}`);
  }

  const headers: Record<string, string> = {};
  request.headers.forEach((value, name) => {
    if (!HOP_BY_HOP.has(name) && !OWN.has(name)) headers[name] = value;
  });

  // The deadline is pushed back while the body moves and ends when the answer's head arrives (as in the Worker).
  const controller = new AbortController();
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
  };
  arm();
  // Tapped on the way through (a listener of its own would set the stream flowing before undici reads it).
  const tapped = request.body?.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        if (timer) arm();
        controller.enqueue(chunk);
      },
    }),
  );
  const body = tapped ? Readable.fromWeb(tapped as unknown as NodeReadableStream<Uint8Array>) : null;
  try {
    const answer = await undiciRequest(url, {
      method: request.method as Dispatcher.HttpMethod,
      headers,
      body,
      dispatcher,
      signal: controller.signal,
      // The deadline above is the timeout; undici's own would cut a long upload short.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    clearTimeout(timer);
    timer = undefined;
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value === undefined || RESPONSE_DROPPED.has(name) || OWN.has(name)) continue;
      for (const one of Array.isArray(value) ? value : [value]) responseHeaders.append(name, one);
    }
    const empty = request.method === "HEAD" || [204, 205, 304].includes(answer.statusCode);
    if (empty) answer.body.resume();
    return new Response(empty ? null : (Readable.toWeb(answer.body) as unknown as ReadableStream<Uint8Array>), {
      status: answer.statusCode,
      headers: responseHeaders,
    });
  } catch (error) {
    clearTimeout(timer);
    body?.destroy();
    return failed(timedOut ? TIMEOUT_REASON : reasonOf(error));
  }
}

/** The most a CA bundle may hold: a PEM of a few hundred certificates is well under it. */
export const MAX_CA_BUNDLE_BYTES = 1024 * 1024;

/**
 * A CA bundle's bytes: a regular file (not a device such as /dev/zero, a FIFO, a folder) of at
 * most MAX_CA_BUNDLE_BYTES, opened without blocking (a FIFO would wait for a writer) and read
 * no further than the cap, whatever it grows to meanwhile.
 *
 * @example
 * await readCaBundle("/etc/ssl/certs/corp.pem"); // Buffer; "/dev/zero" throws "not a regular file"
 */
export async function readCaBundle(path: string): Promise<Buffer> {
  const file = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const info = await file.stat();
    if (!info.isFile()) throw new Error("not a regular file");
    if (info.size > MAX_CA_BUNDLE_BYTES) throw new Error(`${info.size} bytes, more than the ${MAX_CA_BUNDLE_BYTES} a CA bundle may hold`);
    const buffer = Buffer.alloc(MAX_CA_BUNDLE_BYTES + 1);
    const { bytesRead } = await file.read(buffer, 0, buffer.length, 0);
    if (bytesRead > MAX_CA_BUNDLE_BYTES) throw new Error(`more than the ${MAX_CA_BUNDLE_BYTES} bytes a CA bundle may hold`);
    return buffer.subarray(0, bytesRead);
  } finally {
    await file.close();
  }
}
