import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type RequestOptions } from "node:http";
import type { Agent as HttpsAgent } from "node:https";
import { Readable } from "node:stream";

/*
 * The runner's HTTP calls over node:http(s) with kept-alive connections instead of the global
 * fetch: Node's fetch (and even touching its Response or Headers) loads undici, about 10 MB of an
 * idle runner's 60 (issue 31; `npm run bench:runner-modules`), and no package the project depends
 * on does this (node-fetch is not one of them). Hand-written, so it does only what
 * ServiceClient (shared/client/client.ts) asks of fetch: a method, headers, a string body, a
 * signal, `redirect: "manual"` (a 3xx comes back as it is; the client decides), and an answer it
 * reads with status, headers.get, text(), json() or body (a web stream, for a raw download).
 */

type Transport = { request: typeof httpRequest; agent: HttpAgent | HttpsAgent };

/**
 * A fetch for ServiceClient's `fetch` option: one keep-alive connection pool per protocol.
 *
 * @example
 * new ServiceClient({ baseUrl: "https://train.example.com", bearer: "stw_...", fetch: httpFetch() });
 */
export function httpFetch(): typeof fetch {
  const http: Transport = { request: httpRequest, agent: new HttpAgent({ keepAlive: true }) };
  // Loaded with the first https call: a loopback edge (the local stack) never needs TLS.
  let https: Promise<Transport> | undefined;
  const transport = (protocol: string): Transport | Promise<Transport> => {
    if (protocol === "http:") return http;
    if (protocol !== "https:") throw new TypeError(`fetch: ${protocol} URLs are not supported`);
    return (https ??= import("node:https").then((m) => ({
      request: m.request as typeof httpRequest,
      agent: new m.Agent({ keepAlive: true }),
    })));
  };
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(input instanceof URL ? input.href : String(input));
    const { request, agent } = await transport(url.protocol);
    const headers = headerRecord(init.headers);
    const body = init.body === undefined || init.body === null ? undefined : Buffer.from(init.body as string);
    if (body) headers["content-length"] = String(body.length);
    const options: RequestOptions = { method: init.method ?? "GET", headers, agent };
    init.signal?.throwIfAborted();
    // A kept-alive connection the edge closed while idle fails at once: tried again, once, on a
    // new one, as Node's documentation advises. Nearly always the request never reached the edge;
    // a reset after it did is a lost answer, which the runner's calls already survive (it resends
    // after one anyway, and the edge keeps an event batch's events by (attempt, seq) once).
    for (let attempt = 0; ; attempt++) {
      try {
        return await send(request, url, options, body, init.signal ?? undefined);
      } catch (error) {
        if (attempt > 0 || !(error as { reusedSocket?: boolean }).reusedSocket) throw error;
      }
    }
  }) as typeof fetch;
}

function send(
  request: typeof httpRequest,
  url: URL,
  options: RequestOptions,
  body: Buffer | undefined,
  signal: AbortSignal | undefined,
): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = request(url, options);
    const abort = () => req.destroy(signal!.reason);
    signal?.addEventListener("abort", abort, { once: true });
    req.once("response", (message) => resolve(new HttpAnswer(message, url, () => signal?.removeEventListener("abort", abort)) as never));
    req.once("error", (error: NodeJS.ErrnoException) => {
      signal?.removeEventListener("abort", abort);
      if (signal?.aborted) return reject(signal.reason);
      const retry = req.reusedSocket && (error.code === "ECONNRESET" || error.code === "EPIPE");
      // As fetch fails: a TypeError whose cause names what happened (ECONNREFUSED...).
      reject(Object.assign(new TypeError("fetch failed", { cause: error }), { reusedSocket: retry }));
    });
    req.end(body);
  });
}

function headerRecord(init: HeadersInit | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!init) return out;
  const entries: Iterable<[string, string]> = Array.isArray(init)
    ? (init as [string, string][])
    : typeof (init as Headers).entries === "function"
      ? (init as Headers).entries()
      : Object.entries(init as Record<string, string>);
  for (const [name, value] of entries) out[name.toLowerCase()] = value;
  return out;
}

/** The part of a fetch Response the client reads, over a node:http answer. */
class HttpAnswer {
  readonly status: number;
  readonly statusText: string;
  readonly ok: boolean;
  readonly type = "basic";
  readonly redirected = false;
  readonly url: string;
  readonly headers: { get(name: string): string | null; has(name: string): boolean };
  private stream: ReadableStream<Uint8Array> | undefined;

  constructor(
    private readonly message: IncomingMessage,
    url: URL,
    done: () => void,
  ) {
    this.status = message.statusCode ?? 0;
    this.statusText = message.statusMessage ?? "";
    this.ok = this.status >= 200 && this.status < 300;
    this.url = url.href;
    message.once("close", done);
    const raw = message.headers;
    this.headers = {
      get: (name) => {
        const value = raw[name.toLowerCase()];
        return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
      },
      has: (name) => raw[name.toLowerCase()] !== undefined,
    };
  }

  get bodyUsed(): boolean {
    return this.stream !== undefined || this.message.readableEnded;
  }

  /** The body as a web stream (a raw download); read it or cancel it. */
  get body(): ReadableStream<Uint8Array> {
    return (this.stream ??= Readable.toWeb(this.message) as ReadableStream<Uint8Array>);
  }

  async arrayBuffer(): Promise<ArrayBuffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of this.message) chunks.push(chunk as Buffer);
    const all = Buffer.concat(chunks);
    return all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength) as ArrayBuffer;
  }

  async text(): Promise<string> {
    return new TextDecoder().decode(await this.arrayBuffer());
  }

  async json(): Promise<unknown> {
    return JSON.parse(await this.text());
  }
}
