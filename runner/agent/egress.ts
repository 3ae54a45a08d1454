import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer as createHttpServer, request as httpRequest, type IncomingMessage, type Server as HttpServer } from "node:http";
import { connect, createServer, type Server, type Socket } from "node:net";
import { lookup } from "node:dns/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ipInRanges, isLoopbackHost, LOOPBACK_RANGES, parseRange } from "../../shared/ip";

/*
 * A sandboxed job's only ways out of its network namespace (runner/agent/sandbox.ts): Unix sockets in a
 * folder of its own, which the bridge inside the sandbox (runner/agent/sandbox-bridge.mjs) serves on
 * loopback ports there.
 *   - the runner's callback for the job (runner/agent/callback.ts), behind its per-job secret;
 *   - the edge, when it is on this box's loopback (a local `npm start`): its storage endpoint;
 *   - an HTTP proxy (CONNECT, and plain http:// requests) to the hosts the box's operator allows
 *     by name (`allow_hosts`: a model hub), and the edge's own host when it is remote. Never to a
 *     loopback or link-local address (a cloud box's metadata service), whatever a name resolves to.
 * Hand-written: the proxy is a few dozen lines over node:http, and no package offers an
 * allowlisting CONNECT proxy on a Unix socket.
 */

/** The loopback ports inside the sandbox: the callback, then the proxy (the edge keeps its own). */
export const CALLBACK_PORT = 47001;
export const PROXY_PORT = 47002;

export interface JobNetwork {
  /** The folder of sockets, bound into the sandbox (SandboxSpec.net.dir). */
  dir: string;
  /** What the bridge serves inside: port -> socket file name in `dir`. */
  listen: { port: number; socket: string }[];
  /** The proxy settings the trainer gets (HTTP(S)_PROXY, NO_PROXY, both cases). */
  env: Record<string, string>;
  /** Where the callback server must listen (a Unix socket in `dir`). */
  callbackSocket: string;
  close(): Promise<void>;
}

/** Whether `host` matches an allowed name: exactly, or `*.example.com` for any name below example.com. */
export function hostAllowed(host: string, allowed: string[]): boolean {
  const name = host.toLowerCase().replace(/\.$/, "");
  return allowed.some((pattern) => {
    const p = pattern.toLowerCase();
    return p.startsWith("*.") ? name.endsWith(p.slice(1)) && name.length > p.length - 1 : name === p;
  });
}

/** Loopback, link-local (169.254.0.0/16 holds clouds' metadata services), unspecified: never a way out. */
const FORBIDDEN_RANGES = [...LOOPBACK_RANGES, ...["169.254.0.0/16", "0.0.0.0/8", "fe80::/10", "::/128"].map(parseRange)];

/** Whether a resolved address is loopback, link-local or unspecified (IPv4-mapped forms too). */
export function forbiddenAddress(address: string): boolean {
  return ipInRanges(address, FORBIDDEN_RANGES);
}

/**
 * Opens the job's gateway. `allowHosts`: the operator's list; `edgeUrls`: the edge as the runner
 * and the trainer's storage endpoint name it; `refused(host)`: told once per host the proxy refused.
 *
 * @example
 * const net = await startJobNetwork({ allowHosts: ["huggingface.co"], edgeUrls: ["http://127.0.0.1:8001"], refused: (h) => log(h) });
 */
export async function startJobNetwork(options: {
  allowHosts: string[];
  edgeUrls: string[];
  refused: (target: string, why: string) => void;
}): Promise<JobNetwork> {
  const dir = mkdtempSync(join(tmpdir(), "trainer-net-"));
  // The trainer may run as another user (run_as): it walks in and connects, nothing more.
  chmodSync(dir, 0o711);
  const servers: (Server | HttpServer)[] = [];
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => (sockets.add(socket), socket.once("close", () => sockets.delete(socket)));
  const listen = async (server: Server | HttpServer, name: string) => {
    servers.push(server);
    const path = join(dir, name);
    await new Promise<void>((done, fail) => (server.once("error", fail), server.listen(path, () => done())));
    chmodSync(path, 0o666);
  };
  const bridged: { port: number; socket: string }[] = [{ port: CALLBACK_PORT, socket: "callback.sock" }];

  // The edge on this box's loopback, reached at the same address inside.
  const allowed = [...options.allowHosts];
  for (const url of options.edgeUrls) {
    const edge = new URL(url);
    const host = edge.hostname.replace(/^\[|\]$/g, "");
    const port = Number(edge.port || (edge.protocol === "https:" ? 443 : 80));
    if (!isLoopbackHost(host)) {
      allowed.push(host);
      continue;
    }
    if (bridged.some((b) => b.port === port) || port === PROXY_PORT) continue;
    const name = `edge-${port}.sock`;
    await listen(
      createServer((client) => {
        track(client);
        const upstream = track(connect(port, host === "localhost" ? "127.0.0.1" : host));
        client.pipe(upstream).pipe(client);
        client.on("error", () => upstream.destroy());
        upstream.on("error", () => client.destroy());
      }),
      name,
    );
    bridged.push({ port, socket: name });
  }

  const told = new Set<string>();
  /** The address to connect to for host:port, or why not. */
  const resolveTarget = async (host: string, port: number): Promise<{ address: string } | { why: string }> => {
    const bare = host.replace(/^\[|\]$/g, "");
    if (!hostAllowed(bare, allowed))
      return {
        why: allowed.length ? `not among the hosts this box allows (${allowed.join(", ")})` : "this box allows no host (allow_hosts)",
      };
    if (!Number.isInteger(port) || port < 1 || port > 65535) return { why: "not a port" };
    try {
      const { address } = await lookup(bare);
      if (forbiddenAddress(address)) return { why: `it resolves to ${address}, a loopback or link-local address` };
      return { address };
    } catch (error) {
      return { why: `it does not resolve (${(error as NodeJS.ErrnoException).code ?? String(error)})` };
    }
  };
  const refuse = (target: string, why: string) => {
    if (told.has(target)) return;
    told.add(target);
    options.refused(target, why);
  };

  const proxy = createHttpServer(async (req, res) => {
    // A plain http:// request through the proxy: the absolute URL names the host.
    let url: URL;
    try {
      url = new URL(req.url ?? "");
      if (url.protocol !== "http:") throw new Error("not http");
    } catch {
      res.writeHead(400, { "content-type": "text/plain" }).end("this proxy takes absolute http:// URLs and CONNECT\n");
      return;
    }
    const target = await resolveTarget(url.hostname, Number(url.port || 80));
    if ("why" in target) {
      refuse(url.host, target.why);
      res.writeHead(403, { "content-type": "text/plain" }).end(`${url.host} refused by the box's runner: ${target.why}\n`);
      return;
    }
    const headers = { ...req.headers };
    delete headers["proxy-connection"];
    delete headers["proxy-authorization"];
    const upstream = httpRequest(
      { host: target.address, port: Number(url.port || 80), method: req.method, path: url.pathname + url.search, headers },
      (answer: IncomingMessage) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", (error) => (res.headersSent ? res.destroy() : res.writeHead(502).end(`${url.host}: ${error.message}\n`)));
    req.pipe(upstream);
  });
  proxy.on("connect", async (req: IncomingMessage, client: Socket, head: Buffer) => {
    track(client);
    client.on("error", () => {});
    const at = (req.url ?? "").lastIndexOf(":");
    const host = at > 0 ? req.url!.slice(0, at) : (req.url ?? "");
    const port = Number(at > 0 ? req.url!.slice(at + 1) : NaN);
    const target = await resolveTarget(host, port);
    if ("why" in target) {
      refuse(req.url ?? host, target.why);
      client.end(
        `HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n${req.url} refused by the box's runner: ${target.why}\n`,
      );
      return;
    }
    const upstream = track(connect(port, target.address));
    upstream.once("connect", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length) upstream.write(head);
      client.pipe(upstream).pipe(client);
    });
    upstream.on("error", (error) => client.end(`HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\n\r\n${error.message}\n`));
    client.on("close", () => upstream.destroy());
  });
  await listen(proxy, "proxy.sock");
  bridged.push({ port: PROXY_PORT, socket: "proxy.sock" });

  const proxyUrl = `http://127.0.0.1:${PROXY_PORT}`;
  const noProxy = "127.0.0.1,localhost,::1";
  return {
    dir,
    listen: bridged,
    callbackSocket: join(dir, "callback.sock"),
    env: { HTTP_PROXY: proxyUrl, HTTPS_PROXY: proxyUrl, http_proxy: proxyUrl, https_proxy: proxyUrl, NO_PROXY: noProxy, no_proxy: noProxy },
    async close() {
      for (const socket of sockets) socket.destroy();
      await Promise.all(servers.map((server) => new Promise((done) => server.close(() => done(undefined)))));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
