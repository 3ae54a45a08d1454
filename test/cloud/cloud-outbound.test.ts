// The local host's provider fetcher (edge/local/provider-outbound.ts, the PROVIDER_OUTBOUND
// binding), against real servers in this process: an HTTPS provider with a self-signed
// certificate, a plain-HTTP provider, and an HTTP proxy that records what it was asked. Then the
// Worker's side (providerFetch) with this fetcher as its binding, as the local stack wires it.
import { createHash, randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import {
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { connect, type AddressInfo, type Socket } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { OUTBOUND_HEADERS, providerFetch } from "../../edge/cloud/outbound";
import { ProviderError } from "../../edge/cloud/types";
import type { Database } from "../../edge/db/client";
import type { Env } from "../../edge/env";
import { createLogger } from "../../edge/log";
import { providerDefaults } from "../../edge/cloud/provider-settings";
import { forwardProviderRequest, NO_OUTBOUND_DEFAULTS, type OutboundDefaults } from "../../edge/local/provider-outbound";
import { readOutboundDefaults } from "../../edge/local/host-environment";
import { openMigratedDb, type MigratedDb } from "../helpers/migrated-db";
import { selfSignedCert } from "../helpers/tls";

const tls = selfSignedCert();

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  bytes: number;
  sha256: string;
}
const seen: Seen[] = [];
// Set by the streaming test: resolves when the provider has received the first chunk of a body.
let firstChunk: (() => void) | null = null;

function provider(req: IncomingMessage, res: ServerResponse) {
  if (req.url === "/hang") return;
  const hash = createHash("sha256");
  let bytes = 0;
  req.on("data", (chunk: Buffer) => {
    if (bytes === 0) firstChunk?.();
    bytes += chunk.length;
    hash.update(chunk);
  });
  req.on("end", () => {
    seen.push({ method: req.method!, url: req.url!, headers: req.headers, bytes, sha256: hash.digest("hex") });
    res.writeHead(req.url!.startsWith("/missing") ? 404 : 200, {
      "content-type": "application/json",
      "x-provider": "yes",
      [OUTBOUND_HEADERS.failed]: "spoofed",
    });
    res.end(JSON.stringify({ ok: true, path: req.url, bytes }));
  });
}

const proxied: string[] = [];
function startProxy(): Server {
  const proxy = createHttpServer((req, res) => {
    // An absolute-form request (GET http://host/path): forwarded as it is.
    proxied.push(`${req.method} ${req.url}`);
    const target = new URL(req.url!);
    const upstream = httpRequest(target, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    req.pipe(upstream);
  });
  proxy.on("connect", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    proxied.push(`CONNECT ${req.url}`);
    const [host, port] = req.url!.split(":");
    const upstream = connect(Number(port), host!, () => {
      socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on("error", () => socket.destroy());
    socket.on("error", () => upstream.destroy());
  });
  return proxy;
}

let https: Server;
let http: Server;
let proxy: Server;
let httpsBase: string;
let httpBase: string;
let proxyUrl: string;

const listen = async (server: Server) => {
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return (server.address() as AddressInfo).port;
};

beforeAll(async () => {
  https = createHttpsServer({ cert: tls.cert, key: tls.key }, provider);
  http = createHttpServer(provider);
  proxy = startProxy();
  httpsBase = `https://127.0.0.1:${await listen(https)}`;
  httpBase = `http://127.0.0.1:${await listen(http)}`;
  proxyUrl = `http://127.0.0.1:${await listen(proxy)}`;
});
afterAll(() => {
  for (const server of [https, http, proxy]) {
    server.closeAllConnections();
    server.close();
  }
  rmSync(tls.dir, { recursive: true, force: true });
});
beforeEach(() => {
  seen.length = 0;
  proxied.length = 0;
});

const call = (
  url: string,
  headers: Record<string, string> = {},
  defaults: OutboundDefaults = NO_OUTBOUND_DEFAULTS,
  init: RequestInit = {},
  // The stand-ins listen on loopback: these calls come as from a provider an admin allowed private targets for.
) =>
  forwardProviderRequest(
    new Request(url, { ...init, headers: { authorization: "Bearer r8_token", [OUTBOUND_HEADERS.allowPrivate]: "1", ...headers } }),
    defaults,
  );
const failure = (response: Response) => decodeURIComponent(response.headers.get(OUTBOUND_HEADERS.failed) ?? "");

describe("certificates", () => {
  it("refuses a self-signed certificate with verification on: 502 with the reason, and the provider gets nothing", async () => {
    const response = await call(`${httpsBase}/v1/account`);
    expect(response.status).toBe(502);
    expect(failure(response)).toMatch(/certificate/);
    expect(seen).toEqual([]);
  });

  it("accepts it with the provider's CA bundle, or the host's SERVICE_CA_BUNDLE", async () => {
    const viaHeader = await call(`${httpsBase}/v1/account`, { [OUTBOUND_HEADERS.caBundle]: tls.certFile });
    expect(viaHeader.status).toBe(200);
    expect(await viaHeader.json()).toEqual({ ok: true, path: "/v1/account", bytes: 0 });
    const viaDefault = await call(`${httpsBase}/v1/account`, {}, { ...NO_OUTBOUND_DEFAULTS, caBundle: tls.certFile });
    expect(viaDefault.status).toBe(200);
  });

  it("accepts it with verification off, by the provider's ssl_verify or by SERVICE_SSL_VERIFY", async () => {
    expect((await call(`${httpsBase}/v1/account`, { [OUTBOUND_HEADERS.sslVerify]: "0" })).status).toBe(200);
    const hostOff = { ...NO_OUTBOUND_DEFAULTS, sslVerify: false };
    expect((await call(`${httpsBase}/v1/account`, { [OUTBOUND_HEADERS.sslVerify]: "1" }, hostOff)).status).toBe(200);
  });

  it("names a CA bundle it cannot read (502), sending nothing", async () => {
    const missing = join(tls.dir, "nope.pem");
    const response = await call(`${httpsBase}/v1/account`, { [OUTBOUND_HEADERS.caBundle]: missing });
    expect(response.status).toBe(502);
    expect(failure(response)).toBe(`cannot read the CA bundle ${missing} (ENOENT)`);
    expect(seen).toEqual([]);
  });

  it("reads a CA bundle only from a regular file under 1 MiB: a device, a folder, a FIFO or a 2 MiB file is refused at once, sending nothing", async () => {
    const big = join(tls.dir, "big.pem");
    writeFileSync(big, Buffer.alloc(2 * 1024 * 1024, 65));
    const fifo = join(tls.dir, "fifo.pem");
    execFileSync("mkfifo", [fifo]);
    for (const [path, why] of [
      ["/dev/zero", "not a regular file"],
      [tls.dir, "not a regular file"],
      [fifo, "not a regular file"],
      [big, "2097152 bytes, more than the 1048576 a CA bundle may hold"],
    ]) {
      // (A FIFO without a writer would block an open that waited for one: this one does not.)
      const response = await call(`${httpsBase}/v1/account`, { [OUTBOUND_HEADERS.caBundle]: path! });
      expect(response.status).toBe(502);
      expect(failure(response)).toBe(`cannot read the CA bundle ${path} (${why})`);
    }
    expect(seen).toEqual([]);
    // The real bundle still works.
    expect((await call(`${httpsBase}/v1/account`, { [OUTBOUND_HEADERS.caBundle]: tls.certFile })).status).toBe(200);
  });
});

describe("what passes through", () => {
  it("passes the provider's answer on as it came (status, headers, body) and keeps this layer's headers to itself", async () => {
    const response = await call(`${httpBase}/missing?x=1`, { [OUTBOUND_HEADERS.sslVerify]: "1", [OUTBOUND_HEADERS.timeoutMs]: "5000" });
    expect(response.status).toBe(404);
    expect(response.headers.get("x-provider")).toBe("yes");
    // A provider cannot make its answer look like the host's own failure.
    expect(response.headers.get(OUTBOUND_HEADERS.failed)).toBeNull();
    expect(await response.json()).toEqual({ ok: true, path: "/missing?x=1", bytes: 0 });
    expect(seen[0]!.headers.authorization).toBe("Bearer r8_token");
    expect(Object.keys(seen[0]!.headers).filter((h) => h.startsWith("x-outbound-"))).toEqual([]);
    expect(seen[0]!.headers.host).toBe(new URL(httpBase).host);
  });

  it("streams a request body on: the provider has its first bytes before the rest is produced, and all 8 MiB arrive intact", async () => {
    const chunks = Array.from({ length: 8 }, () => randomBytes(1024 * 1024));
    const expected = createHash("sha256").update(Buffer.concat(chunks)).digest("hex");
    const arrived = new Promise<void>((done) => (firstChunk = done));
    let next = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (next === 1) await arrived; // nothing more is produced until the provider has the first chunk
        if (next === chunks.length) return controller.close();
        controller.enqueue(chunks[next++]!);
      },
    });
    const response = await call(`${httpBase}/v1/files`, { "content-type": "application/zip" }, NO_OUTBOUND_DEFAULTS, {
      method: "POST",
      body,
      duplex: "half",
    } as RequestInit);
    firstChunk = null;
    expect(response.status).toBe(200);
    expect(seen[0]).toMatchObject({ method: "POST", bytes: 8 * 1024 * 1024, sha256: expected });
  });

  it("answers 502 timeout when the provider takes longer than x-outbound-timeout-ms", async () => {
    const response = await call(`${httpBase}/hang`, { [OUTBOUND_HEADERS.timeoutMs]: "300" });
    expect(response.status).toBe(502);
    expect(failure(response)).toBe("timeout");
  });

  it("answers 502 for an unreachable provider and for a URL that is not http(s)", async () => {
    const refused = await call("http://127.0.0.1:1/v1/account");
    expect(refused.status).toBe(502);
    expect(failure(refused)).toMatch(/ECONNREFUSED/);
    const file = await forwardProviderRequest(new Request("file:///etc/passwd"), NO_OUTBOUND_DEFAULTS);
    expect(file.status).toBe(502);
    expect(failure(file)).toBe("only http and https URLs are fetched, not file:");
  });
});

describe("proxies", () => {
  it("tunnels an https provider through the provider's proxy_url (CONNECT), with its CA", async () => {
    const response = await call(`${httpsBase}/v1/account`, {
      [OUTBOUND_HEADERS.proxy]: proxyUrl,
      [OUTBOUND_HEADERS.caBundle]: tls.certFile,
    });
    expect(response.status).toBe(200);
    expect(proxied).toEqual([`CONNECT ${new URL(httpsBase).host}`]);
  });

  it("uses HTTPS_PROXY for https providers and HTTP_PROXY (absolute-form) for http ones", async () => {
    const defaults = readOutboundDefaults({ HTTPS_PROXY: proxyUrl, HTTP_PROXY: proxyUrl, SERVICE_SSL_VERIFY: "false" });
    expect((await call(`${httpsBase}/a`, {}, defaults)).status).toBe(200);
    expect((await call(`${httpBase}/b`, {}, defaults)).status).toBe(200);
    expect(proxied).toEqual([`CONNECT ${new URL(httpsBase).host}`, `GET ${httpBase}/b`]);
  });

  it("goes direct for NO_PROXY hosts, and the provider's proxy_url wins over HTTPS_PROXY", async () => {
    const direct = readOutboundDefaults({ HTTP_PROXY: "http://127.0.0.1:1", NO_PROXY: "localhost,127.0.0.1" });
    expect((await call(`${httpBase}/c`, {}, direct)).status).toBe(200);
    const elsewhere = readOutboundDefaults({ HTTP_PROXY: "http://127.0.0.1:1" });
    expect((await call(`${httpBase}/d`, { [OUTBOUND_HEADERS.proxy]: proxyUrl }, elsewhere)).status).toBe(200);
    expect(proxied).toEqual([`GET ${httpBase}/d`]);
  });

  it("refuses proxy and verification variables that make no sense at start-up, naming each", () => {
    expect(() => readOutboundDefaults({ HTTPS_PROXY: "socks://user:pw@proxy" })).toThrow(
      'HTTPS_PROXY must be an http(s) URL of a proxy, not "socks://***@proxy"',
    );
    expect(() => readOutboundDefaults({ SERVICE_SSL_VERIFY: "maybe" })).toThrow('SERVICE_SSL_VERIFY must be true or false, not "maybe"');
    expect(() => readOutboundDefaults({ SERVICE_CA_BUNDLE: "/nonexistent/ca.pem" })).toThrow(
      "SERVICE_CA_BUNDLE names /nonexistent/ca.pem, which cannot be read (ENOENT)",
    );
  });
});

/** A provider's settings allowing private targets (the stand-ins listen on loopback). */
const allowedDefaults = () => ({ ...providerDefaults(), allow_private_targets: true });

describe("private destinations, resolved at connect", () => {
  // A name that resolves to this machine, as DNS rebinding or a planted record would make it.
  const rebound = async (host: string) => (host === "provider.example.test" ? [{ address: "127.0.0.1", family: 4 }] : []);
  const plain = (url: string, headers: Record<string, string> = {}) =>
    forwardProviderRequest(new Request(url, { headers: { authorization: "Bearer r8_token", ...headers } }), NO_OUTBOUND_DEFAULTS, rebound);

  it("refuses a name resolving to loopback, a loopback literal and a private proxy_url, sending nothing; the admin's allowance lets them through", async () => {
    const port = new URL(httpBase).port;
    const byName = await plain(`http://provider.example.test:${port}/v1/account`);
    expect(byName.status).toBe(502);
    expect(failure(byName)).toContain("provider.example.test resolves to 127.0.0.1");
    const literal = await plain(`${httpBase}/v1/account`);
    expect(failure(literal)).toContain("127.0.0.1 is a loopback, private or reserved address");
    const viaProxy = await plain("https://api.replicate.com/v1/account", { [OUTBOUND_HEADERS.proxy]: `http://127.0.0.1:${port}` });
    expect(failure(viaProxy)).toContain("127.0.0.1");
    expect(seen).toEqual([]);
    expect(proxied).toEqual([]);
    // The same loopback stand-in, allowed by the provider's allow_private_targets.
    expect((await plain(`${httpBase}/v1/account`, { [OUTBOUND_HEADERS.allowPrivate]: "1" })).status).toBe(200);
  });

  it("is what providerFetch asks for: refused without allow_private_targets, answered with it", async () => {
    const env = (resolve = rebound) =>
      ({
        PROVIDER_OUTBOUND: { fetch: (request: Request) => forwardProviderRequest(request, NO_OUTBOUND_DEFAULTS, resolve) },
      }) as unknown as Env;
    const migrated = await openMigratedDb();
    try {
      const ctx = {
        env: env(),
        db: { $client: migrated.client } as unknown as Database,
        log: createLogger("test", { logLevel: "ERROR", logFormat: "json" }),
      };
      const error = await providerFetch(ctx, "guarded", providerDefaults())(`${httpBase}/v1/account`).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderError);
      expect((error as Error).message).toContain("127.0.0.1 is a loopback, private or reserved address");
      expect(seen).toEqual([]);
      expect((await providerFetch(ctx, "allowed", allowedDefaults())(`${httpBase}/v1/account`)).status).toBe(200);
    } finally {
      migrated.close();
    }
  });
});

describe("the Worker's providerFetch through this host", () => {
  let migrated: MigratedDb;
  let db: Database;
  const lines: string[] = [];
  const log = createLogger("test", { logLevel: "DEBUG", logFormat: "json" }, null, (line) => lines.push(line));
  let hostCalls = 0;
  const env = (defaults: OutboundDefaults = NO_OUTBOUND_DEFAULTS) =>
    ({
      PROVIDER_OUTBOUND: {
        fetch: (request: Request) => {
          hostCalls++;
          return forwardProviderRequest(request, defaults);
        },
      },
    }) as unknown as Env;
  beforeAll(async () => {
    migrated = await openMigratedDb();
    db = { $client: migrated.client } as unknown as Database;
  });
  afterAll(() => migrated.close());

  it("hands the provider's ssl settings to the host: refused with verification on, answered with its CA bundle", async () => {
    const strict = providerFetch({ env: env(), db, log }, "tls-strict", allowedDefaults());
    const error = await strict(`${httpsBase}/v1/account`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ status: null, countsAsFailure: true });
    expect((error as Error).message).toMatch(/^tls-strict could not be reached \(.*certificate/);
    const withCa = providerFetch({ env: env(), db, log }, "tls-ca", { ...allowedDefaults(), ssl_ca_bundle: tls.certFile });
    expect((await withCa(`${httpsBase}/v1/account`)).status).toBe(200);
    const insecure = providerFetch({ env: env(), db, log }, "tls-off", { ...allowedDefaults(), ssl_verify: false });
    expect((await insecure(`${httpsBase}/v1/account`)).status).toBe(200);
    const row = await migrated.client.execute("SELECT provider, failures_total FROM provider_state ORDER BY provider");
    expect(row.rows.map((r) => [r.provider, r.failures_total])).toEqual([
      ["tls-ca", 0],
      ["tls-off", 0],
      ["tls-strict", 1],
    ]);
  });

  it("sends a streamed upload through the host unbuffered and intact, through the provider's proxy", async () => {
    const data = randomBytes(3 * 1024 * 1024);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < data.length; i += 256 * 1024) controller.enqueue(data.subarray(i, i + 256 * 1024));
        controller.close();
      },
    });
    const upload = providerFetch({ env: env(), db, log }, "upload", { ...allowedDefaults(), proxy_url: proxyUrl });
    const response = await upload(`${httpBase}/v1/files`, { method: "POST", body, headers: { "content-type": "application/zip" } });
    expect(response.status).toBe(200);
    expect(seen[0]).toMatchObject({ bytes: data.length, sha256: createHash("sha256").update(data).digest("hex") });
    expect(proxied).toEqual([`POST ${httpBase}/v1/files`]);
  });

  it("words the host's timeout as the provider not answering within the provider's http_timeout", async () => {
    const before = hostCalls;
    const slow = providerFetch({ env: env(), db, log }, "slow-host", { ...allowedDefaults(), http_timeout: 0.3 });
    await expect(slow(`${httpBase}/hang`)).rejects.toMatchObject({
      message: "slow-host did not answer within 0.3 s",
      countsAsFailure: true,
    });
    expect(hostCalls).toBe(before + 1);
  });
});
