import { randomUUID } from "node:crypto";
import {
  Agent,
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { connect, isIP, type AddressInfo, type Socket } from "node:net";
import { UNREAD_BODY_DRAIN_BYTES } from "../../shared/body-drain";
import { HOST_TOKEN_HEADER } from "../host-call";
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
 * A malformed request never reaches workerd (which answers some of them with a plain-text 500):
 * what Node's parser refuses (request line, headers, Content-Length, chunking) and what
 * checkRequestHead refuses (HTTP version, target, Host, Transfer-Encoding) is a 400 from the
 * front itself, in the API's `{ detail, code }` (S3's XML on the storage endpoint), with the
 * connection closed.
 *
 * Requests reuse pooled keep-alive connections to workerd, those with a body of a declared length
 * up to UNREAD_BODY_DRAIN_BYTES too: workerd closes a connection after answering a request whose
 * body it did not read, and the Worker reads such a body whatever it answers (middleware/body-limit.ts
 * drainUnreadBodies), so the connection stays open for the next request. A larger or chunked body
 * gets a connection of its own, and a connection whose request body was not all sent when the
 * answer came, or whose answer refused it (4xx, 5xx), is closed after it, never reused. workerd
 * closes a connection idle for 5 s (measured); a pooled one is closed by the front after
 * POOLED_IDLE_MS, before workerd can close it under a request that is being sent.
 */

/** How long a pooled connection to workerd may sit idle (workerd closes one after 5 s). */
const POOLED_IDLE_MS = 3000;

/** Whether a request carries a body (chunked, or a Content-Length above 0). */
function hasBody(req: IncomingMessage): boolean {
  return (
    req.headers["transfer-encoding"] !== undefined || (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0")
  );
}

/** Whether a request's body may go on a pooled connection: a declared length the Worker reads whatever it answers. */
function poolable(req: IncomingMessage): boolean {
  const declared = req.headers["content-length"];
  return req.headers["transfer-encoding"] === undefined && declared !== undefined && Number(declared) <= UNREAD_BODY_DRAIN_BYTES;
}

/** Headers that describe one connection, never forwarded to the next hop (RFC 9110 7.6.1). */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "expect"]);

/** The peer as workerd should see it: IPv4-mapped IPv6 (a dual-stack listener) as plain IPv4. */
function peerAddress(socket: Socket): string {
  const address = socket.remoteAddress ?? "";
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}

/**
 * The request's headers for workerd: hop-by-hop headers, `CF-Connecting-IP`, Miniflare's
 * `MF-*` headers and the front's and the host's token headers dropped (whatever their case),
 * the peer's address set as `CF-Connecting-IP`.
 * Repeated headers keep their order (a flat name/value list, as Node reads them).
 *
 * @example
 * forwardedHeaders(["Host", "x", "CF-Connecting-IP", "127.0.0.1"], "203.0.113.7", false);
 * // ["Host", "x", "cf-connecting-ip", "203.0.113.7"]
 */
export function forwardedHeaders(rawHeaders: readonly string[], peer: string, upgrade: boolean, frontToken = ""): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (lower === "cf-connecting-ip" || lower.startsWith("mf-") || lower === FRONT_TOKEN_HEADER || lower === HOST_TOKEN_HEADER) continue;
    if (HOP_BY_HOP.has(lower) && !(upgrade && (lower === "connection" || lower === "upgrade"))) continue;
    out.push(name, rawHeaders[i + 1]!);
  }
  out.push("cf-connecting-ip", peer);
  if (frontToken) out.push(FRONT_TOKEN_HEADER, frontToken);
  return out;
}

/**
 * The header by which workerd knows a request came through the front: its value a secret of this
 * start (the Worker's SERVICE_FRONT_TOKEN), so another local process cannot reach workerd's
 * private port with an address of its choosing (edge/middleware/front-only.ts).
 */
export const FRONT_TOKEN_HEADER = "x-service-front";

/**
 * Whether `host` (a Host header's name, without its port) is one of the service's own: an IP
 * address, `localhost` and names under it, or a name in `names` (the machine's, the public URL's,
 * SERVICE_ALLOWED_HOSTS). Any other name is a page on a host name rebound to this machine: a
 * browser there must not reach the service (nor count as loopback), so the front answers 421.
 *
 * @example
 * ownHost("attacker.example", ["gpu-box"]); // false
 */
export function ownHost(host: string, names: readonly string[]): boolean {
  const name = host
    .replace(/^\[|\]$/g, "")
    .replace(/\.$/, "")
    .toLowerCase();
  if (isIP(name)) return true;
  if (name === "localhost" || name.endsWith(".localhost")) return true;
  return names.some((allowed) => allowed.toLowerCase() === name);
}

/** A Host header's name without its port. */
function hostName(host: string): string {
  const bracket = /^\[([^\]]*)\](?::\d*)?$/.exec(host);
  if (bracket) return bracket[1]!;
  const colon = host.lastIndexOf(":");
  return colon >= 0 && host.indexOf(":") === colon ? host.slice(0, colon) : host;
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
function rawHead(method: string, path: string, headers: readonly string[]): string {
  const lines = [`${method} ${path} HTTP/1.1`];
  for (let i = 0; i < headers.length; i += 2) lines.push(`${headers[i]}: ${headers[i + 1]}`);
  return lines.join("\r\n") + "\r\n\r\n";
}

/** What the front answers by itself, never asking workerd: a client's malformed request. */
interface OwnAnswer {
  status: 400 | 408 | 421;
  /** Headers every answer carries (the rate-limit headers), from the front's options. */
  extra: Record<string, string>;
  detail: string;
  /** The request's path when known: on the storage endpoint the answer is S3's XML, which its clients read, with this code. */
  path: string;
  s3Code: "IncompleteBody" | "InvalidRequest" | "RequestTimeout";
}

function answerParts({ status, detail, path, s3Code, extra }: OwnAnswer): { headers: Record<string, string>; body: string } {
  const storage = path === STORAGE_PREFIX || path.startsWith(`${STORAGE_PREFIX}/`);
  const code = status === 408 ? "request_timeout" : status === 421 ? "misdirected_request" : "bad_request";
  const body = storage ? s3ErrorXml(s3Code, detail, path, randomUUID()) : JSON.stringify({ detail, code });
  const type = storage ? "application/xml" : "application/json";
  return { headers: { ...extra, "Content-Type": type, "Content-Length": String(Buffer.byteLength(body)), Connection: "close" }, body };
}

/** An own answer as raw HTTP/1.1, for a socket Node's server no longer speaks on. */
function rawAnswer(answer: OwnAnswer): string {
  const { headers, body } = answerParts(answer);
  const reason = answer.status === 408 ? "Request Timeout" : answer.status === 421 ? "Misdirected Request" : "Bad Request";
  return `HTTP/1.1 ${answer.status} ${reason}\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("")}\r\n${body}`;
}

/** What each of Node's parser errors (llhttp's codes) means for the client, in words it can act on. */
const PARSE_PROBLEMS: Record<string, string> = {
  HPE_INVALID_METHOD: "the method is not an HTTP method",
  HPE_INVALID_CONSTANT: "the request line is not METHOD /path HTTP/1.1",
  HPE_INVALID_VERSION: "the HTTP version is not HTTP/1.1 or HTTP/1.0, or a line does not end with CRLF",
  HPE_INVALID_URL: "the request target is not a path starting with /",
  HPE_HEADER_OVERFLOW: "the request line and headers are longer than 16 KiB",
  HPE_INVALID_HEADER_TOKEN:
    "a header line is malformed (a name without a colon, a space or control character in a name or value, or a folded line)",
  HPE_INVALID_CONTENT_LENGTH: "Content-Length is not one non-negative decimal number",
  HPE_UNEXPECTED_CONTENT_LENGTH: "Content-Length is given twice, or together with Transfer-Encoding",
  HPE_INVALID_TRANSFER_ENCODING: "Transfer-Encoding must be chunked, and never sent with Content-Length",
  HPE_INVALID_CHUNK_SIZE: "a chunk size of the chunked body is not a hexadecimal number",
  HPE_STRICT: "a chunk of the chunked body does not end with CRLF",
  HPE_LF_EXPECTED: "a line does not end with CRLF",
};

/**
 * The answer to a request Node's HTTP parser refused (a malformed request line, header or body
 * framing): 400 in the API's JSON error shape, or S3's XML on the storage endpoint, whose
 * clients read that; a head that never completed is a 408. The connection is closed after it.
 *
 * @example
 * badRequestAnswer(Object.assign(new Error("Parse Error"), { code: "HPE_INVALID_CHUNK_SIZE" }));
 */
export function badRequestAnswer(error: NodeJS.ErrnoException & { rawPacket?: Buffer }, answerHeaders: AnswerHeaders = () => ({})): string {
  const head = /^([A-Z]+) (\S+) HTTP\/1\.[01]\r\n/.exec(error.rawPacket?.subarray(0, 8192).toString("latin1") ?? "");
  const path = head?.[2]?.split("?")[0] ?? "";
  const extra = answerHeaders(head?.[1] ?? "GET", path || "/");
  if (error.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    return rawAnswer({ status: 408, detail: "The request's head did not arrive in time", path, s3Code: "RequestTimeout", extra });
  }
  const problem = PARSE_PROBLEMS[error.code ?? ""] ?? "check its request line, headers and framing";
  // On an upload, S3 calls broken framing IncompleteBody.
  return rawAnswer({
    status: 400,
    detail: `The request is not valid HTTP/1.1 (${error.code ?? "parse error"}): ${problem}`,
    path,
    s3Code: "IncompleteBody",
    extra,
  });
}

/**
 * Headers the front puts on the answers it gives by itself (every response carries the
 * rate-limit headers), for a request's method and path.
 */
export type AnswerHeaders = (method: string, path: string) => Record<string, string>;

/** A request's head as Node parsed it. */
export interface RequestHead {
  url: string;
  httpVersion: string;
  rawHeaders: readonly string[];
}

// A host name or IPv4 address, or an IPv6 address in brackets, with an optional port.
const HOST = /^(?:[A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/;

const shown = (text: string) => JSON.stringify(text.length > 100 ? `${text.slice(0, 100)}...` : text);

/**
 * Checks what Node's parser lets through but workerd cannot take (it answers them with a
 * plain-text 500): the HTTP version, the request target and the Host header, and a
 * Transfer-Encoding other than chunked (Node reads the body as chunked and would forward a
 * coding nobody applied). An absolute-form target (`GET http://host/path`) is accepted, as
 * RFC 9112 3.2.2 asks, and becomes its path with its authority as the Host (`host`: the Host
 * header that replaces the client's; null: the client's stands).
 *
 * @example
 * checkRequestHead({ url: "http://svc/x", httpVersion: "1.1", rawHeaders: [] });
 * // { path: "/x", host: "svc" }
 */
export function checkRequestHead(head: RequestHead): { problem: string } | { path: string; host: string | null } {
  if (head.httpVersion !== "1.1" && head.httpVersion !== "1.0")
    return { problem: `HTTP/${head.httpVersion} is not served here: send HTTP/1.1` };
  const valuesOf = (name: string) => {
    const found: string[] = [];
    for (let i = 0; i + 1 < head.rawHeaders.length; i += 2)
      if (head.rawHeaders[i]!.toLowerCase() === name) found.push(head.rawHeaders[i + 1]!);
    return found;
  };
  const codings = valuesOf("transfer-encoding");
  if (codings.length > 1 || (codings.length === 1 && codings[0]!.trim().toLowerCase() !== "chunked")) {
    return { problem: `Transfer-Encoding must be chunked alone, not ${shown(codings.join(", "))}` };
  }
  if (/^https?:\/\//i.test(head.url)) {
    let target: URL;
    try {
      target = new URL(head.url);
    } catch {
      return { problem: `The request target ${shown(head.url)} is not a valid URL` };
    }
    if (target.username || target.password || !HOST.test(target.host)) {
      return { problem: `The request target ${shown(head.url)} does not name a host without credentials` };
    }
    return { path: `${target.pathname}${target.search}`, host: target.host };
  }
  if (!head.url.startsWith("/")) return { problem: `The request target ${shown(head.url)} is not served: send a path starting with /` };
  const hosts = valuesOf("host");
  if (hosts.length !== 1) return { problem: `Send exactly one Host header, not ${hosts.length}` };
  if (!HOST.test(hosts[0]!.trim()))
    return { problem: `The Host header ${shown(hosts[0]!)} is not a host name or address with an optional port` };
  return { path: head.url, host: null };
}

/** The raw header list with its Host headers replaced by `host`. */
function withHost(rawHeaders: readonly string[], host: string): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2)
    if (rawHeaders[i]!.toLowerCase() !== "host") out.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  return [...out, "Host", host];
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
  /** Ends every connection, upgraded ones (WebSockets) included, and stops listening; says how many upgraded ones it cut. */
  close(): Promise<{ upgraded: number }>;
}

/**
 * Listens on `host`:`port` and forwards every request to workerd on 127.0.0.1:`upstreamPort`
 * with `CF-Connecting-IP` set to the TCP peer (see above). An unreachable workerd is a 502.
 * With `tls` (PEM certificate chain and key: SERVICE_SSL_CERT, SERVICE_SSL_KEY) it serves HTTPS
 * on that port instead of HTTP; a certificate and key that do not load throw at once.
 *
 * @example
 * const front = await startClientFront({ host: "0.0.0.0", port: 8001, upstreamPort: 40123, onError: console.warn });
 */
export async function startClientFront(options: {
  host: string;
  port: number;
  upstreamPort: number;
  onError: (message: string) => void;
  answerHeaders?: AnswerHeaders;
  tls?: { cert: Buffer; key: Buffer };
  /** Host names besides IP addresses and localhost that are the service's own (ownHost); unset: every name is. */
  hostNames?: readonly string[];
  /** This start's secret for workerd (FRONT_TOKEN_HEADER). */
  frontToken?: string;
}): Promise<ClientFront> {
  const { upstreamPort } = options;
  const answerHeaders: AnswerHeaders = options.answerHeaders ?? (() => ({}));
  const pathOf = (req: IncomingMessage) => req.url?.split("?")[0] ?? "";
  const extraFor = (req: IncomingMessage) => answerHeaders(req.method ?? "GET", pathOf(req) || "/");
  const pooled = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 256, timeout: POOLED_IDLE_MS });
  const fresh = new Agent({ keepAlive: false, maxSockets: Infinity });
  const serverOptions = {
    // Large uploads stream for as long as they take; only the head has a deadline.
    requestTimeout: 0,
    headersTimeout: 60_000,
    keepAliveTimeout: 65_000,
    // The limit PARSE_PROBLEMS names. Host is checked by checkRequestHead, which answers in the API's shape.
    maxHeaderSize: 16 * 1024,
    requireHostHeader: false,
  };
  // An https.Server is an http.Server whose sockets are TLS: every handler below serves both.
  const server: Server = options.tls
    ? createHttpsServer({ ...serverOptions, cert: options.tls.cert, key: options.tls.key })
    : createServer(serverOptions);
  // The response in progress on each connection, and the connections the front answered by
  // itself and is closing: Node's parser may still fail on what follows (the body of a refused
  // request), and no second answer may follow the first.
  const responses = new WeakMap<Socket, { req: IncomingMessage; res: ServerResponse }>();
  const refused = new WeakSet<Socket>();

  const refuse = (req: IncomingMessage, res: ServerResponse, detail: string, status: 400 | 421 = 400) => {
    refused.add(req.socket);
    const { headers, body } = answerParts({ status, detail, path: pathOf(req), s3Code: "InvalidRequest", extra: extraFor(req) });
    res.writeHead(status, headers).end(body);
    if (!req.complete) drain(req);
  };
  /** Why a request's Host is not the service's own, or null. */
  const misdirected = (req: IncomingMessage, host: string | null): string | null => {
    if (!options.hostNames) return null;
    const name = hostName(host ?? req.headers.host ?? "");
    return ownHost(name, options.hostNames)
      ? null
      : `This service does not answer to the host name ${shown(name)}: use its address, localhost, or a name set in SERVICE_PUBLIC_URL or SERVICE_ALLOWED_HOSTS`;
  };
  const frontToken = options.frontToken ?? "";

  const forward = (req: IncomingMessage, res: ServerResponse, path: string, headers: string[], retried: boolean) => {
    const bodiless = !hasBody(req);
    const upstream = httpRequest({
      agent: (bodiless || poolable(req)) && !retried ? pooled : fresh,
      host: "127.0.0.1",
      port: upstreamPort,
      method: req.method,
      path,
      headers: headers as unknown as OutgoingHttpHeaders,
      setHost: false,
    });
    let answered = false;
    upstream.on("response", (answer) => {
      answered = true;
      const early = !bodiless && !req.complete;
      const head = responseHeaders(answer.rawHeaders);
      // workerd closes a connection whose request body it did not read to the end: one answered
      // before the whole body was sent, or with a refusal (a handler may refuse after taking the
      // body's reader and before reading it, as the storage endpoint's quota does). Neither goes
      // back to the pool, where the next request would find it closed under it.
      if (!bodiless && (!upstream.writableFinished || (answer.statusCode ?? 500) >= 400)) upstream.shouldKeepAlive = false;
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
      if (bodiless && !retried && upstream.reusedSocket) return forward(req, res, path, headers, true);
      options.onError(`client front: workerd unreachable for ${req.method} ${path}: ${error.message}`);
      const cutOff = !bodiless && !req.complete;
      if (cutOff) drain(req);
      // A body the Worker stopped reading: a refusal whose answer the reset took with it (a body
      // over UNREAD_BODY_DRAIN_BYTES is not read to carry one), or a Worker runtime that stopped.
      const detail = cutOff
        ? `The Worker runtime closed the connection before reading the whole body: it refused the request without reading a body over ${UNREAD_BODY_DRAIN_BYTES} bytes (check the credentials, the path and the size), or it stopped; see the service log`
        : "The Worker runtime did not answer; see the service log";
      res.writeHead(502, { ...extraFor(req), "content-type": "application/json" }).end(JSON.stringify({ detail, code: "bad_gateway" }));
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

  server.on("request", (req, res) => {
    responses.set(req.socket, { req, res });
    res.on("close", () => {
      if (responses.get(req.socket)?.res === res) responses.delete(req.socket);
    });
    const head = checkRequestHead({ url: req.url ?? "", httpVersion: req.httpVersion, rawHeaders: req.rawHeaders });
    if ("problem" in head) return refuse(req, res, head.problem);
    const foreign = misdirected(req, head.host);
    if (foreign) return refuse(req, res, foreign, 421);
    const raw = head.host === null ? req.rawHeaders : withHost(req.rawHeaders, head.host);
    forward(req, res, head.path, forwardedHeaders(raw, peerAddress(req.socket), false, frontToken), false);
  });

  // Upgraded connections (a runner's wake channel, a dashboard's live stream) leave the HTTP
  // server's books: closeAllConnections() would not end them, and server.close() would wait for them.
  const upgraded = new Set<Socket>();
  server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    upgraded.add(socket);
    socket.once("close", () => upgraded.delete(socket));
    const checked = checkRequestHead({ url: req.url ?? "", httpVersion: req.httpVersion, rawHeaders: req.rawHeaders });
    if ("problem" in checked) {
      return void socket.end(
        rawAnswer({ status: 400, detail: checked.problem, path: pathOf(req), s3Code: "InvalidRequest", extra: extraFor(req) }),
      );
    }
    const foreign = misdirected(req, checked.host);
    if (foreign)
      return void socket.end(
        rawAnswer({ status: 421, detail: foreign, path: pathOf(req), s3Code: "InvalidRequest", extra: extraFor(req) }),
      );
    const headers = forwardedHeaders(
      checked.host === null ? req.rawHeaders : withHost(req.rawHeaders, checked.host),
      peerAddress(socket),
      true,
      frontToken,
    );
    const upstream = connect(upstreamPort, "127.0.0.1", () => {
      upstream.write(rawHead(req.method ?? "GET", checked.path, headers));
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

  // This is not a proxy: a tunnel is a request it cannot serve.
  server.on("connect", (req: IncomingMessage, socket: Socket) => {
    socket.end(
      rawAnswer({
        status: 400,
        detail: `CONNECT ${shown(req.url ?? "")} is not served: this is not a proxy`,
        path: "",
        s3Code: "InvalidRequest",
        extra: answerHeaders("CONNECT", "/"),
      }),
    );
  });

  server.on("clientError", (error: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Socket) => {
    if (refused.has(socket)) return void socket.end();
    const current = responses.get(socket);
    // A pipelined request behind one still being answered: its 400 follows that answer.
    if (current?.req.complete && !current.res.writableFinished) {
      current.res.once("finish", () => socket.writable && socket.end(badRequestAnswer(error, answerHeaders)));
      return;
    }
    // A body that broke off after its answer began: the answer cannot become a 400 any more.
    if (!socket.writable || current?.res.headersSent) return void socket.destroy();
    // Otherwise the request still waiting on workerd is dropped with this connection (its 'close').
    socket.end(badRequestAnswer(error, answerHeaders));
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
      const open = upgraded.size;
      for (const socket of upgraded) socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
      pooled.destroy();
      fresh.destroy();
      return { upgraded: open };
    },
  };
}
