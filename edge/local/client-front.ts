import { randomUUID } from "node:crypto";
import { Agent, createServer, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { STORAGE_PREFIX } from "../storage/endpoint";
import { s3ErrorXml } from "../storage/xml";

/*
 * The local host's public socket. workerd, run through Miniflare, keeps a `CF-Connecting-IP` the
 * client sent (Miniflare's entry worker sets it from the peer only when absent) and obeys
 * Miniflare's own `MF-*` control headers from anyone, so a remote client could choose its
 * address (and escape rate limits and webhook allowlists). Miniflare has no option to trust the
 * socket instead. So workerd listens on a private loopback port and this front takes the public
 * one: every request gets `CF-Connecting-IP` set to its TCP peer, the client's own value and any
 * `MF-*` header dropped, and is streamed through unbuffered in both directions (keep-alive
 * connections, WebSocket upgrades piped as raw bytes after the rewritten head).
 *
 * Requests without a body reuse pooled keep-alive connections to workerd; a request with a body
 * gets a connection of its own, because workerd closes a connection after answering a request
 * whose body it did not read (an early refusal), and a pooled connection reused at that moment
 * would fail the next request.
 */

/** Whether a request carries a body (chunked, or a Content-Length above 0). */
function hasBody(req: IncomingMessage): boolean {
  return req.headers["transfer-encoding"] !== undefined || (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0");
}

/** Headers that describe one connection, never forwarded to the next hop (RFC 9110 7.6.1). */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "expect"]);

/** The peer as workerd should see it: IPv4-mapped IPv6 (a dual-stack listener) as plain IPv4. */
function peerAddress(socket: Socket): string {
  const address = socket.remoteAddress ?? "";
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}

/**
 * The request's headers for workerd: hop-by-hop headers, `CF-Connecting-IP` and Miniflare's
 * `MF-*` headers dropped (whatever their case), the peer's address set as `CF-Connecting-IP`.
 * Repeated headers keep their order (a flat name/value list, as Node reads them).
 *
 * @example
 * forwardedHeaders(["Host", "x", "CF-Connecting-IP", "127.0.0.1"], "203.0.113.7", false);
 * // ["Host", "x", "cf-connecting-ip", "203.0.113.7"]
 */
export function forwardedHeaders(rawHeaders: readonly string[], peer: string, upgrade: boolean): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (lower === "cf-connecting-ip" || lower.startsWith("mf-")) continue;
    if (HOP_BY_HOP.has(lower) && !(upgrade && (lower === "connection" || lower === "upgrade"))) continue;
    out.push(name, rawHeaders[i + 1]!);
  }
  out.push("cf-connecting-ip", peer);
  return out;
}

function responseHeaders(rawHeaders: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const lower = rawHeaders[i]!.toLowerCase();
    if (HOP_BY_HOP.has(lower) || lower === "transfer-encoding") continue;
    out.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  }
  return out;
}

// Header values never hold CR or LF once Node has parsed them, so a raw head is safe to write.
function rawHead(req: IncomingMessage, headers: readonly string[]): string {
  const lines = [`${req.method} ${req.url} HTTP/1.1`];
  for (let i = 0; i < headers.length; i += 2) lines.push(`${headers[i]}: ${headers[i + 1]}`);
  return lines.join("\r\n") + "\r\n\r\n";
}

/**
 * The answer to a request Node's HTTP parser refused (broken framing, Content-Length with
 * Transfer-Encoding, a malformed head): 400 in the API's JSON error shape, or S3's XML on the
 * storage endpoint, whose clients read that; the connection is closed.
 *
 * @example
 * badRequestAnswer(Object.assign(new Error("Parse Error"), { code: "HPE_INVALID_CHUNK_SIZE" }));
 */
export function badRequestAnswer(error: NodeJS.ErrnoException & { rawPacket?: Buffer }): string {
  const head = /^([A-Z]+) (\S+) HTTP\/1\.[01]\r\n/.exec(error.rawPacket?.subarray(0, 8192).toString("latin1") ?? "");
  const path = head?.[2]?.split("?")[0] ?? "";
  const detail = `The request is not valid HTTP/1.1 (${error.code ?? "parse error"}): check its framing (Content-Length or Transfer-Encoding, not both) and headers`;
  const storage = path === STORAGE_PREFIX || path.startsWith(`${STORAGE_PREFIX}/`);
  const body = storage ? s3ErrorXml("IncompleteBody", detail, path, randomUUID()) : JSON.stringify({ detail, code: "bad_request" });
  const type = storage ? "application/xml" : "application/json";
  return `HTTP/1.1 400 Bad Request\r\nContent-Type: ${type}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/** Most of an unread request body the front reads and discards after an early answer; past it the connection is dropped. */
const DRAIN_LIMIT = 16 * 1024 * 1024;

/** Reads and discards the rest of a request's body (bounded), so its client is not left blocked writing. */
function drain(req: IncomingMessage): void {
  req.unpipe();
  let drained = 0;
  req.on("data", (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > DRAIN_LIMIT) req.socket.destroy();
  });
  req.resume();
}

export interface ClientFront {
  /** The port the front listens on (the one asked for, or the one the system chose for 0). */
  port: number;
  close(): Promise<void>;
}

/**
 * Listens on `host`:`port` and forwards every request to workerd on 127.0.0.1:`upstreamPort`
 * with `CF-Connecting-IP` set to the TCP peer (see above). An unreachable workerd is a 502.
 *
 * @example
 * const front = await startClientFront({ host: "0.0.0.0", port: 8001, upstreamPort: 40123, onError: console.warn });
 */
export async function startClientFront(options: { host: string; port: number; upstreamPort: number; onError: (message: string) => void }): Promise<ClientFront> {
  const { upstreamPort } = options;
  const pooled = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 256 });
  const fresh = new Agent({ keepAlive: false, maxSockets: Infinity });
  const server: Server = createServer({
    // Large uploads stream for as long as they take; only the head has a deadline.
    requestTimeout: 0,
    headersTimeout: 60_000,
    keepAliveTimeout: 65_000,
  });

  const forward = (req: IncomingMessage, res: ServerResponse, headers: string[], retried: boolean) => {
    const bodiless = !hasBody(req);
    const upstream = httpRequest({ agent: bodiless && !retried ? pooled : fresh, host: "127.0.0.1", port: upstreamPort, method: req.method, path: req.url, headers: headers as unknown as OutgoingHttpHeaders, setHost: false });
    let answered = false;
    upstream.on("response", (answer) => {
      answered = true;
      const early = !bodiless && !req.complete;
      const head = responseHeaders(answer.rawHeaders);
      if (early) {
        // workerd answered before reading the whole body (an early refusal such as 413) and
        // closes its connection: the rest of the body goes nowhere, so it is drained here
        // (a client blocked on a body nobody reads would never see the answer) and the
        // client's connection is closed after the answer, as workerd's was.
        head.push("Connection", "close");
        drain(req);
      }
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, head);
      answer.pipe(res);
      answer.on("error", () => res.destroy());
    });
    upstream.on("error", (error) => {
      // Once answered, the answer's own stream ends or fails the response: a write error of the
      // request's body (workerd stopped reading it) is no reason to cut the answer off.
      if (answered) return;
      if (res.headersSent) return void res.destroy();
      // A pooled connection workerd closed just as it was reused: nothing of this request was
      // consumed, so it is sent once more on a connection of its own.
      if (bodiless && !retried && upstream.reusedSocket) return forward(req, res, headers, true);
      options.onError(`client front: workerd unreachable for ${req.method} ${req.url}: ${error.message}`);
      if (!bodiless && !req.complete) drain(req);
      res.writeHead(502, { "content-type": "application/json" }).end(JSON.stringify({ detail: "The Worker runtime did not answer; see the service log", code: "bad_gateway" }));
    });
    // A client that goes away mid-request takes its upstream request with it.
    res.on("close", () => {
      if (!res.writableFinished) upstream.destroy();
    });
    if (bodiless) {
      req.resume();
      upstream.end();
    } else req.pipe(upstream);
  };

  server.on("request", (req, res) => forward(req, res, forwardedHeaders(req.rawHeaders, peerAddress(req.socket), false), false));

  server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const headers = forwardedHeaders(req.rawHeaders, peerAddress(socket), true);
    const upstream = connect(upstreamPort, "127.0.0.1", () => {
      upstream.write(rawHead(req, headers));
      if (head.length) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    const close = () => {
      upstream.destroy();
      socket.destroy();
    };
    upstream.on("error", close);
    socket.on("error", close);
    upstream.on("close", close);
    socket.on("close", close);
  });

  server.on("clientError", (error: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Socket) => {
    if (!socket.writable) return void socket.destroy();
    socket.end(badRequestAnswer(error));
  });

  await new Promise<void>((done, fail) => {
    server.once("error", fail);
    server.listen(options.port, options.host, () => {
      server.off("error", fail);
      done();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
      pooled.destroy();
      fresh.destroy();
    },
  };
}
