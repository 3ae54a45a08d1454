// The client address is the socket's (README "Rate limiting"): the local host's front sets
// CF-Connecting-IP from the TCP peer and drops a client's own, so a forged one neither escapes a
// rate limit nor passes a provider's webhook allowlist. Every client here is on this machine,
// but Linux routes all of 127.0.0.0/8 to loopback, so a client socket bound to 127.0.0.5 is a
// peer other than 127.0.0.1 that the forged headers can be told apart from.
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type Server } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { checkRequestHead, forwardedHeaders, startClientFront, type ClientFront } from "../../edge/local/client-front";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** One HTTP request whose socket is bound to `localAddress` (the peer the server sees). */
function requestFrom(
  localAddress: string,
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<Answer> {
  return new Promise((done, fail) => {
    const req = request(url, { method: options.method ?? "GET", headers: options.headers, localAddress }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => done({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString() }));
      res.on("error", fail);
    });
    req.on("error", fail);
    req.end(options.body);
  });
}

/** Writes `text` on a raw connection and reads until the server ends it (or 5 s pass: the connection is then still open). */
function rawExchange(port: number, text: string): Promise<{ answer: string; ended: boolean }> {
  return new Promise((done, fail) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(text));
    let answer = "";
    const timer = setTimeout(() => (socket.destroy(), done({ answer, ended: false })), 5000);
    socket.on("data", (data) => (answer += data.toString("latin1")));
    socket.on("end", () => (clearTimeout(timer), done({ answer, ended: true })));
    socket.on("error", (error) => (clearTimeout(timer), fail(error)));
  });
}

/** The status, headers (lower-cased names) and body of one raw HTTP/1.1 answer. */
function parseAnswer(answer: string): { status: number; headers: Record<string, string>; body: string } {
  const split = answer.indexOf("\r\n\r\n");
  const [statusLine, ...lines] = answer.slice(0, split).split("\r\n");
  const headers = Object.fromEntries(
    lines.map((line) => [line.slice(0, line.indexOf(":")).toLowerCase(), line.slice(line.indexOf(":") + 1).trim()]),
  );
  return { status: Number(statusLine!.split(" ")[1]), headers, body: answer.slice(split + 4) };
}

/**
 * Malformed requests, each with what its 400 says. Every one is refused by the front itself, in
 * the API's JSON error shape, and the connection closed.
 */
const MALFORMED: [string, string, RegExp][] = [
  [
    "a Content-Length that is not a number",
    "POST /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
    /\(HPE_INVALID_CONTENT_LENGTH\): Content-Length is not one non-negative decimal number$/,
  ],
  ["a negative Content-Length", "POST /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", /\(HPE_INVALID_CONTENT_LENGTH\)/],
  [
    "a Content-Length past any integer",
    "POST /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
    /\(HPE_INVALID_CONTENT_LENGTH\)/,
  ],
  [
    "two different Content-Length values",
    "POST /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    /\(HPE_UNEXPECTED_CONTENT_LENGTH\): Content-Length is given twice/,
  ],
  ["a list in Content-Length", "POST /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\nabcd", /\(HPE_INVALID_CONTENT_LENGTH\)/],
  [
    "Content-Length with Transfer-Encoding",
    "POST /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    /\(HPE_INVALID_TRANSFER_ENCODING\): Transfer-Encoding must be chunked, and never sent with Content-Length$/,
  ],
  [
    "a coding other than chunked",
    "POST /api/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc",
    /^Transfer-Encoding must be chunked alone, not "gzip"$/,
  ],
  ["a bad method token", "G@T /api/x HTTP/1.1\r\nHost: x\r\n\r\n", /\(HPE_INVALID_METHOD\): the method is not an HTTP method$/],
  [
    "a bad HTTP version",
    "GET /api/x HTTP/9.9\r\nHost: x\r\n\r\n",
    /\(HPE_INVALID_VERSION\): the HTTP version is not HTTP\/1\.1 or HTTP\/1\.0/,
  ],
  ["HTTP/2.0 in an HTTP/1 request line", "GET /api/x HTTP/2.0\r\nHost: x\r\n\r\n", /^HTTP\/2\.0 is not served here: send HTTP\/1\.1$/],
  [
    "a garbled protocol name",
    "GET /api/x HTTX/1.1\r\nHost: x\r\n\r\n",
    /\(HPE_INVALID_CONSTANT\): the request line is not METHOD \/path HTTP\/1\.1$/,
  ],
  [
    "an over-long request line",
    `GET /${"a".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
    /\(HPE_HEADER_OVERFLOW\): the request line and headers are longer than 16 KiB$/,
  ],
  [
    "a header line without a colon",
    "GET /api/x HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n",
    /\(HPE_INVALID_HEADER_TOKEN\): a header line is malformed/,
  ],
  ["a folded header line", "GET /api/x HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", /\(HPE_INVALID_HEADER_TOKEN\)/],
  ["no Host header", "GET /api/x HTTP/1.1\r\n\r\n", /^Send exactly one Host header, not 0$/],
  ["two Host headers", "GET /api/x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", /^Send exactly one Host header, not 2$/],
  [
    "a Host that is no host",
    "GET /api/x HTTP/1.1\r\nHost: a b\r\n\r\n",
    /^The Host header "a b" is not a host name or address with an optional port$/,
  ],
  ["the asterisk target", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", /^The request target "\*" is not served: send a path starting with \/$/],
  ["a target that is not a path", "GET api/x HTTP/1.1\r\nHost: x\r\n\r\n", /\(HPE_INVALID_URL\)/],
  [
    "CONNECT",
    "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    /^CONNECT "example\.com:443" is not served: this is not a proxy$/,
  ],
  [
    "a WebSocket upgrade with two Hosts",
    "GET /ws HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    /^Send exactly one Host header, not 2$/,
  ],
];

describe("checkRequestHead", () => {
  const head = (url: string, rawHeaders: string[], httpVersion = "1.1") => checkRequestHead({ url, httpVersion, rawHeaders });

  it("passes an origin-form request with one Host as it is, and turns an absolute-form target into its path and Host", () => {
    expect(head("/x?y=1", ["Host", "svc:8001"])).toEqual({ path: "/x?y=1", host: null });
    expect(head("/x", ["host", "[::1]:8001"], "1.0")).toEqual({ path: "/x", host: null });
    expect(head("http://svc.example:8001/a/b?c", ["Host", "ignored"])).toEqual({ path: "/a/b?c", host: "svc.example:8001" });
    expect(head("/x", ["Host", "svc", "Transfer-Encoding", "Chunked"])).toEqual({ path: "/x", host: null });
  });

  it("names the problem of a head workerd could not take", () => {
    expect(head("http://user:pw@svc/x", [])).toEqual({
      problem: 'The request target "http://user:pw@svc/x" does not name a host without credentials',
    });
    expect(head("/x", ["Host", "svc", "Transfer-Encoding", "chunked", "Transfer-Encoding", "chunked"])).toEqual({
      problem: 'Transfer-Encoding must be chunked alone, not "chunked, chunked"',
    });
    expect(head("/x", ["Host", "a,b"])).toEqual({ problem: 'The Host header "a,b" is not a host name or address with an optional port' });
    expect(head("/x", ["Host", "svc"], "0.9")).toEqual({ problem: "HTTP/0.9 is not served here: send HTTP/1.1" });
  });
});

describe("forwardedHeaders", () => {
  it("drops a client's CF-Connecting-IP, Miniflare's MF-* control headers, the front's and the host's token headers and hop-by-hop headers, whatever their case, and sets the peer", () => {
    const raw = [
      "Host",
      "svc",
      "cf-connecting-IP",
      "127.0.0.1",
      "MF-Original-URL",
      "http://x/",
      "mf-cf-blob",
      "{}",
      "X-Service-Front",
      "forged",
      "x-service-HOST",
      "guess",
      "Connection",
      "keep-alive",
      "X-Forwarded-For",
      "1.2.3.4",
      "Cookie",
      "a=1",
      "Cookie",
      "b=2",
    ];
    expect(forwardedHeaders(raw, "203.0.113.9", false)).toEqual([
      "Host",
      "svc",
      "X-Forwarded-For",
      "1.2.3.4",
      "Cookie",
      "a=1",
      "Cookie",
      "b=2",
      "cf-connecting-ip",
      "203.0.113.9",
    ]);
    expect(forwardedHeaders(["Connection", "Upgrade", "Upgrade", "websocket"], "::1", true)).toEqual([
      "Connection",
      "Upgrade",
      "Upgrade",
      "websocket",
      "cf-connecting-ip",
      "::1",
    ]);
  });
});

describe("the client front against a small upstream", () => {
  let upstream: Server;
  let front: ClientFront;
  const seen: IncomingHttpHeaders[] = [];
  const closing = new WeakSet<Socket>();

  beforeAll(async () => {
    upstream = createServer((req, res) => {
      seen.push(req.headers);
      // As workerd does when a handler refuses a body it did not read: answer, then close the
      // connection (a moment later), serving nothing more on it.
      if (closing.has(req.socket)) return;
      if (req.url === "/refuse") {
        closing.add(req.socket);
        res.on("finish", () => setTimeout(() => req.socket.destroy(), 20));
        return void res.writeHead(403).end("refused");
      }
      let bytes = 0;
      req.on("data", (chunk: Buffer) => (bytes += chunk.length));
      req.on("end", () => {
        res.setHeader("set-cookie", ["a=1", "b=2"]);
        res.end(JSON.stringify({ bytes, peer: req.headers["cf-connecting-ip"] }));
      });
    });
    const sockets = new WebSocketServer({ server: upstream });
    sockets.on("connection", (socket, req) => {
      socket.send(`peer ${req.headers["cf-connecting-ip"]}`);
      socket.on("message", (data) => socket.send(`echo ${data.toString()}`));
    });
    await new Promise<void>((done) => upstream.listen(0, "127.0.0.1", done));
    front = await startClientFront({
      host: "127.0.0.1",
      port: 0,
      upstreamPort: (upstream.address() as AddressInfo).port,
      onError: () => {},
    });
  });
  afterAll(async () => {
    await front?.close();
    await new Promise((done) => upstream?.close(done));
  });

  it("tells the upstream the TCP peer, not the CF-Connecting-IP or MF-* headers the client sent", async () => {
    const answer = await requestFrom("127.0.0.5", `http://127.0.0.1:${front.port}/x`, {
      headers: { "CF-Connecting-IP": "127.0.0.1", "MF-Original-URL": "http://127.0.0.1/cdn-cgi/x", "MF-Route-Override": "other" },
    });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text).peer).toBe("127.0.0.5");
    const headers = seen.at(-1)!;
    expect(Object.keys(headers).filter((name) => name.startsWith("mf-"))).toEqual([]);
    expect(headers["cf-connecting-ip"]).toBe("127.0.0.5");
    expect(answer.headers["set-cookie"]).toEqual(["a=1", "b=2"]);
  });

  it("streams a large request body through, chunked or with a length", async () => {
    const body = Buffer.alloc(8 * 1024 * 1024, 7);
    const sized = await requestFrom("127.0.0.1", `http://127.0.0.1:${front.port}/upload`, {
      method: "PUT",
      body,
      headers: { "content-length": String(body.length) },
    });
    expect(JSON.parse(sized.text).bytes).toBe(body.length);
    const chunked = await requestFrom("127.0.0.1", `http://127.0.0.1:${front.port}/upload`, {
      method: "POST",
      body,
      headers: { "transfer-encoding": "chunked" },
    });
    expect(JSON.parse(chunked.text).bytes).toBe(body.length);
  });

  it("sends requests with a declared body on pooled connections to the upstream, a chunked one on a connection of its own", async () => {
    let opened = 0;
    const count = () => void opened++;
    upstream.on("connection", count);
    try {
      const post = (headers: Record<string, string>) =>
        requestFrom("127.0.0.1", `http://127.0.0.1:${front.port}/submit`, { method: "POST", headers, body: "{}" });
      for (let i = 0; i < 10; i++) expect(JSON.parse((await post({ "content-length": "2" })).text).bytes).toBe(2);
      expect(opened).toBeLessThanOrEqual(1);
      const pooled = opened;
      for (let i = 0; i < 3; i++) expect(JSON.parse((await post({ "transfer-encoding": "chunked" })).text).bytes).toBe(2);
      expect(opened - pooled).toBe(3);
    } finally {
      upstream.off("connection", count);
    }
  });

  it("never reuses a connection whose body the upstream refused: the next POST is answered, not a 502", async () => {
    const post = (path: string) =>
      requestFrom("127.0.0.1", `http://127.0.0.1:${front.port}${path}`, {
        method: "POST",
        headers: { "content-length": "1024" },
        body: "x".repeat(1024),
      });
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push((await post("/refuse")).status, (await post("/submit")).status);
    expect(statuses).toEqual(Array.from({ length: 20 }, () => [403, 200]).flat());
  });

  it("lets no client's bytes reach the next request on a pooled connection: a body abandoned half-way takes its connection with it", async () => {
    const urls: string[] = [];
    let cutOff!: () => void;
    const abandoned = new Promise<void>((done) => (cutOff = done));
    const record = (req: IncomingMessage) => {
      urls.push(req.url ?? "");
      req.on("close", () => !req.complete && cutOff());
    };
    upstream.on("request", record);
    try {
      // Declares 100 bytes, sends 62 that look like a request of their own, and goes away.
      const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n".padEnd(62, "x");
      await new Promise<void>((done, fail) => {
        const socket = connect(front.port, "127.0.0.1", () => {
          socket.write(`POST /submit HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n${smuggled}`);
          setTimeout(() => (socket.destroy(), done()), 100);
        });
        socket.on("error", fail);
      });
      // The front ends its upstream request too, rather than leave it waiting for the rest.
      await Promise.race([
        abandoned,
        new Promise((_, fail) => setTimeout(() => fail(new Error("the upstream request was left waiting for the rest of the body")), 5000)),
      ]);
      for (let i = 0; i < 5; i++) {
        const next = await requestFrom("127.0.0.1", `http://127.0.0.1:${front.port}/submit`, {
          method: "POST",
          headers: { "content-length": "2" },
          body: "{}",
        });
        expect([next.status, JSON.parse(next.text).bytes]).toEqual([200, 2]);
      }
      expect(urls).toEqual(Array.from({ length: 6 }, () => "/submit"));
    } finally {
      upstream.off("request", record);
    }
  });

  it.each(MALFORMED)(
    "answers %s with a 400 in the API's error shape and closes, never reaching the upstream",
    async (_, request, detail) => {
      const before = seen.length;
      const { answer, ended } = await rawExchange(front.port, request);
      const { status, headers, body } = parseAnswer(answer);
      expect([status, headers["content-type"], headers["connection"], ended]).toEqual([400, "application/json", "close", true]);
      expect(Number(headers["content-length"])).toBe(Buffer.byteLength(body));
      expect(JSON.parse(body)).toEqual({ detail: expect.stringMatching(detail), code: "bad_request" });
      expect(seen.length).toBe(before);
    },
  );

  it("answers a malformed request after a good one on the same connection: the good one served, then a 400, pipelined or not", async () => {
    const before = seen.length;
    const good = "GET /first HTTP/1.1\r\nHost: x\r\n\r\n";
    const bad = "GET /second HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n";
    const both =
      /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n\{"bytes":0,"peer":"127\.0\.0\.1"\}HTTP\/1\.1 400 Bad Request\r\n[\s\S]*"code":"bad_request"\}$/;
    const pipelined = await rawExchange(front.port, good + bad);
    expect([pipelined.answer, pipelined.ended]).toEqual([expect.stringMatching(both), true]);
    const sequential = await new Promise<string>((done, fail) => {
      const socket = connect(front.port, "127.0.0.1", () => socket.write(good));
      let answer = "";
      socket.on("data", (data) => {
        answer += data.toString("latin1");
        if (answer.endsWith('"peer":"127.0.0.1"}')) socket.write(bad);
      });
      socket.on("end", () => done(answer));
      socket.on("error", fail);
    });
    expect(sequential).toMatch(both);
    expect(seen.length).toBe(before + 2);
  });

  it("serves an absolute-form request line as its path, with the target's authority as Host", async () => {
    const { answer } = await rawExchange(
      front.port,
      "GET http://svc.example:8001/absolute?q=1 HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n",
    );
    expect(parseAnswer(answer).status).toBe(200);
    expect(seen.at(-1)!.host).toBe("svc.example:8001");
  });

  it("answers the storage endpoint's malformed requests in S3's XML", async () => {
    const { answer } = await rawExchange(front.port, "PUT /api/cloud/storage/job/key HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n");
    const { status, headers, body } = parseAnswer(answer);
    expect([status, headers["content-type"]]).toEqual([400, "application/xml"]);
    expect(body).toContain("<Code>IncompleteBody</Code><Message>The request is not valid HTTP/1.1 (HPE_INVALID_CONTENT_LENGTH)");
    const twoHosts = parseAnswer(
      (await rawExchange(front.port, "GET /api/cloud/storage/job/key HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")).answer,
    );
    expect([twoHosts.status, twoHosts.headers["content-type"]]).toEqual([400, "application/xml"]);
    expect(twoHosts.body).toContain("<Code>InvalidRequest</Code><Message>Send exactly one Host header, not 2</Message>");
  });

  it("carries WebSocket upgrades both ways, with the peer's address", async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${front.port}/ws`, {
      localAddress: "127.0.0.5",
      headers: { "CF-Connecting-IP": "10.9.9.9" },
    });
    const messages: string[] = [];
    await new Promise<void>((done, fail) => {
      socket.on("message", (data) => {
        messages.push(data.toString());
        if (messages.length === 1) socket.send("hello");
        else done();
      });
      socket.on("error", fail);
    });
    socket.close();
    expect(messages).toEqual(["peer 127.0.0.5", "echo hello"]);
  });
});

describe("the local stack behind its front (rate limiting counts loopback, no trusted proxy)", () => {
  let t: TestStack;
  let admin: { key: string; cookie: string };
  const SECRET = `whsec_${Buffer.from("the client front test's secret").toString("base64")}`;

  beforeAll(async () => {
    t = await startTestStack(undefined, { RATE_LIMIT_LOOPBACK: "1", TRUSTED_PROXIES: "none" });
    admin = await setUpAdmin(t);
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("keys a client's login attempts by its socket: forged CF-Connecting-IP and X-Forwarded-For values share its one window", async () => {
    const statuses: number[] = [];
    for (let i = 1; i <= 6; i++) {
      const forged: Record<string, string> = i % 2 ? { "cf-connecting-ip": `203.0.113.${i}` } : { "x-forwarded-for": `203.0.113.${i}` };
      const reply = await t.call("POST", "/api/cloud/auth/login", {
        json: { username: `nobody-${i}`, password: "wrong-password" },
        headers: forged,
      });
      statuses.push(reply.status);
      if (i === 6) {
        expect(reply.body.code).toBe("rate_limited");
        expect(reply.headers.get("retry-after")).not.toBeNull();
      }
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    // Another peer is another client: its own window, untouched.
    const other = await requestFrom("127.0.0.6", `${t.base}/api/cloud/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: "nobody", password: "wrong-password" }),
    });
    expect([other.status, other.headers["x-ratelimit-remaining"]]).toEqual([401, "4"]);
  });

  it("refuses malformed requests with a 400 before the Worker, with the rate-limit headers: nothing logged by it, nothing changed", async () => {
    // The keys as a list (the reading itself moves last_used_at, a moment after its answer: left out).
    const keys = async () =>
      (
        (await t.call("GET", "/api/cloud/auth/api-keys", { auth: { key: admin.key } })).body as { keys: Record<string, unknown>[] }
      ).keys.map(({ last_used_at: _used, ...key }) => key);
    const before = JSON.stringify(await keys());
    const create = `POST /api/cloud/auth/api-keys HTTP/1.1\r\nX-API-Key: ${admin.key}\r\nContent-Type: application/json\r\n`;
    const body = JSON.stringify({ name: "never-created" });
    const requests = [
      ...MALFORMED.map(([, request]) => request.replace("/api/x", "/api/cloud/auth/api-keys")),
      `${create}Host: x\r\nContent-Length: abc\r\n\r\n${body}`,
      `${create}Host: x\r\nContent-Length: ${body.length}\r\nContent-Length: ${body.length + 1}\r\n\r\n${body} `,
      `${create}Host: a\r\nHost: b\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      `${create.replace("HTTP/1.1", "HTTP/2.0")}Host: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      `${create}Host: x\r\nTransfer-Encoding: gzip\r\n\r\n${body}`,
    ];
    const linesBefore = t.lines.length;
    for (const request of requests) {
      const { status, headers, body: text } = parseAnswer((await rawExchange(Number(new URL(t.base).port), request)).answer);
      expect([status, headers["content-type"], JSON.parse(text).code], request.slice(0, 80)).toEqual([
        400,
        "application/json",
        "bad_request",
      ]);
      // Every answer, the front's own too, names the rule that would apply (uncounted: all of it remains).
      const limit = Number(headers["x-ratelimit-limit"]);
      expect(limit, request.slice(0, 80)).toBeGreaterThan(0);
      expect(Number(headers["x-ratelimit-remaining"])).toBe(limit);
      expect(Number(headers["x-ratelimit-reset"])).toBeGreaterThan(Date.now() / 1000);
    }
    expect(t.lines.slice(linesBefore).filter((line) => line.includes("api-keys") || line.includes('"level":"ERROR"'))).toEqual([]);
    expect(JSON.stringify(await keys())).toBe(before);
  });

  it("refuses a provider webhook that forges an allowed address (403, nothing recorded), and accepts one really sent from it", async () => {
    const saved = await t.call("PUT", "/api/cloud/providers/replicate", {
      json: { webhook_allowed_ips: ["127.0.0.5"], webhook_secret: SECRET },
      auth: { key: admin.key },
    });
    expect(saved.status).toBe(200);
    const body = JSON.stringify({ id: "pred-front", status: "succeeded" });
    const signed = (id: string) => {
      const now = new Date();
      return {
        "content-type": "application/json",
        "webhook-id": id,
        "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
        "webhook-signature": new Webhook(SECRET).sign(id, now, body),
      };
    };
    const recorded = async () =>
      (await t.call("GET", "/api/cloud/providers/replicate/webhooks", { auth: { key: admin.key } })).body.events as {
        webhook_id: string;
        client_ip: string;
      }[];

    const forged = await requestFrom("127.0.0.1", `${t.base}/api/webhooks/replicate`, {
      method: "POST",
      body,
      headers: { ...signed("msg-forged"), "CF-Connecting-IP": "127.0.0.5" },
    });
    expect(forged.status).toBe(403);
    expect(JSON.parse(forged.text)).toEqual({
      code: "address_not_allowed",
      detail: "Webhooks for replicate are not accepted from 127.0.0.1: it is outside the provider's webhook_allowed_ips",
    });
    expect((await recorded()).map((e) => e.webhook_id)).not.toContain("msg-forged");

    const genuine = await requestFrom("127.0.0.5", `${t.base}/api/webhooks/replicate`, {
      method: "POST",
      body,
      headers: signed("msg-genuine"),
    });
    expect(genuine.status).toBe(202);
    expect((await recorded()).find((e) => e.webhook_id === "msg-genuine")?.client_ip).toBe("127.0.0.5");
  });
});
