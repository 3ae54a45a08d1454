// The client address is the socket's (README "Rate limiting"): the local host's front sets
// CF-Connecting-IP from the TCP peer and drops a client's own, so a forged one neither escapes a
// rate limit nor passes a provider's webhook allowlist. Every client here is on this machine,
// but Linux routes all of 127.0.0.0/8 to loopback, so a client socket bound to 127.0.0.5 is a
// peer other than 127.0.0.1 that the forged headers can be told apart from.
import { createServer, request, type IncomingHttpHeaders, type Server } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { forwardedHeaders, startClientFront, type ClientFront } from "../edge/local/client-front";
import { setUpAdmin, startTestStack, type TestStack } from "./helpers/stack";

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** One HTTP request whose socket is bound to `localAddress` (the peer the server sees). */
function requestFrom(localAddress: string, url: string, options: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {}): Promise<Answer> {
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

describe("forwardedHeaders", () => {
  it("drops a client's CF-Connecting-IP, Miniflare's MF-* control headers and hop-by-hop headers, whatever their case, and sets the peer", () => {
    const raw = ["Host", "svc", "cf-connecting-IP", "127.0.0.1", "MF-Original-URL", "http://x/", "mf-cf-blob", "{}", "Connection", "keep-alive", "X-Forwarded-For", "1.2.3.4", "Cookie", "a=1", "Cookie", "b=2"];
    expect(forwardedHeaders(raw, "203.0.113.9", false)).toEqual(["Host", "svc", "X-Forwarded-For", "1.2.3.4", "Cookie", "a=1", "Cookie", "b=2", "cf-connecting-ip", "203.0.113.9"]);
    expect(forwardedHeaders(["Connection", "Upgrade", "Upgrade", "websocket"], "::1", true)).toEqual(["Connection", "Upgrade", "Upgrade", "websocket", "cf-connecting-ip", "::1"]);
  });
});

describe("the client front against a small upstream", () => {
  let upstream: Server;
  let front: ClientFront;
  const seen: IncomingHttpHeaders[] = [];

  beforeAll(async () => {
    upstream = createServer((req, res) => {
      seen.push(req.headers);
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
    front = await startClientFront({ host: "127.0.0.1", port: 0, upstreamPort: (upstream.address() as AddressInfo).port, onError: () => {} });
  });
  afterAll(async () => {
    await front?.close();
    await new Promise((done) => upstream?.close(done));
  });

  it("tells the upstream the TCP peer, not the CF-Connecting-IP or MF-* headers the client sent", async () => {
    const answer = await requestFrom("127.0.0.5", `http://127.0.0.1:${front.port}/x`, { headers: { "CF-Connecting-IP": "127.0.0.1", "MF-Original-URL": "http://127.0.0.1/cdn-cgi/x", "MF-Route-Override": "other" } });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text).peer).toBe("127.0.0.5");
    const headers = seen.at(-1)!;
    expect(Object.keys(headers).filter((name) => name.startsWith("mf-"))).toEqual([]);
    expect(headers["cf-connecting-ip"]).toBe("127.0.0.5");
    expect(answer.headers["set-cookie"]).toEqual(["a=1", "b=2"]);
  });

  it("streams a large request body through, chunked or with a length", async () => {
    const body = Buffer.alloc(8 * 1024 * 1024, 7);
    const sized = await requestFrom("127.0.0.1", `http://127.0.0.1:${front.port}/upload`, { method: "PUT", body, headers: { "content-length": String(body.length) } });
    expect(JSON.parse(sized.text).bytes).toBe(body.length);
    const chunked = await requestFrom("127.0.0.1", `http://127.0.0.1:${front.port}/upload`, { method: "POST", body, headers: { "transfer-encoding": "chunked" } });
    expect(JSON.parse(chunked.text).bytes).toBe(body.length);
  });

  it("answers a request Node cannot parse with 400 in the API's error shape, never reaching the upstream", async () => {
    const before = seen.length;
    const answer = await new Promise<string>((done, fail) => {
      const socket = connect(front.port, "127.0.0.1", () => socket.write("POST /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"));
      let text = "";
      socket.on("data", (data) => (text += data.toString()));
      socket.on("end", () => done(text));
      socket.on("error", fail);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4));
    expect(body.code).toBe("bad_request");
    expect(body.detail).toMatch(/^The request is not valid HTTP\/1\.1 \(HPE_[A-Z_]+\): check its framing/);
    expect(seen.length).toBe(before);
  });

  it("carries WebSocket upgrades both ways, with the peer's address", async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${front.port}/ws`, { localAddress: "127.0.0.5", headers: { "CF-Connecting-IP": "10.9.9.9" } });
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
      const reply = await t.call("POST", "/api/cloud/auth/login", { json: { username: `nobody-${i}`, password: "wrong-password" }, headers: forged });
      statuses.push(reply.status);
      if (i === 6) {
        expect(reply.body.code).toBe("rate_limited");
        expect(reply.headers.get("retry-after")).not.toBeNull();
      }
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    // Another peer is another client: its own window, untouched.
    const other = await requestFrom("127.0.0.6", `${t.base}/api/cloud/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ username: "nobody", password: "wrong-password" }) });
    expect([other.status, other.headers["x-ratelimit-remaining"]]).toEqual([401, "4"]);
  });

  it("refuses a provider webhook that forges an allowed address (403, nothing recorded), and accepts one really sent from it", async () => {
    const saved = await t.call("PUT", "/api/cloud/providers/replicate", { json: { webhook_allowed_ips: ["127.0.0.5"], webhook_secret: SECRET }, auth: { key: admin.key } });
    expect(saved.status).toBe(200);
    const body = JSON.stringify({ id: "pred-front", status: "succeeded" });
    const signed = (id: string) => {
      const now = new Date();
      return { "content-type": "application/json", "webhook-id": id, "webhook-timestamp": String(Math.floor(now.getTime() / 1000)), "webhook-signature": new Webhook(SECRET).sign(id, now, body) };
    };
    const recorded = async () => (await t.call("GET", "/api/cloud/providers/replicate/webhooks", { auth: { key: admin.key } })).body.events as { webhook_id: string; client_ip: string }[];

    const forged = await requestFrom("127.0.0.1", `${t.base}/api/webhooks/replicate`, { method: "POST", body, headers: { ...signed("msg-forged"), "CF-Connecting-IP": "127.0.0.5" } });
    expect(forged.status).toBe(403);
    expect(JSON.parse(forged.text)).toEqual({ code: "address_not_allowed", detail: "Webhooks for replicate are not accepted from 127.0.0.1: it is outside the provider's webhook_allowed_ips" });
    expect((await recorded()).map((e) => e.webhook_id)).not.toContain("msg-forged");

    const genuine = await requestFrom("127.0.0.5", `${t.base}/api/webhooks/replicate`, { method: "POST", body, headers: signed("msg-genuine") });
    expect(genuine.status).toBe(202);
    expect((await recorded()).find((e) => e.webhook_id === "msg-genuine")?.client_ip).toBe("127.0.0.5");
  });
});
