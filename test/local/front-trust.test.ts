// The client front is the only way into the local service (README "Security in short"): a page
// on a host name rebound to this machine is answered 421 (it must not count as loopback and
// create the first admin without the setup token), and workerd's private port refuses whatever
// does not come through the front (a local process choosing its own client address).
import { request } from "node:http";
import { connect } from "node:net";
import { hostname } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ownHost } from "../../edge/local/client-front";
import { ownHostNames } from "../../edge/local/stack";
import { startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
beforeAll(async () => {
  t = await startTestStack();
});
afterAll(async () => {
  await t?.stop();
});

const ADMIN = { email: "a@example.com", username: "admin", password: "admin-password-1" };

/** A request with the Host header a browser on `host` would send (fetch will not set one). */
function send(
  url: string,
  options: { method?: string; path: string; host?: string; headers?: Record<string, string>; body?: unknown },
): Promise<{ status: number; body: any }> {
  const target = new URL(url);
  return new Promise((done, fail) => {
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        method: options.method ?? "GET",
        path: options.path,
        headers: {
          host: options.host ?? target.host,
          ...(body ? { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) } : {}),
          ...options.headers,
        },
      },
      (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => {
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {}
          done({ status: res.statusCode ?? 0, body: parsed });
        });
      },
    );
    req.on("error", fail);
    req.end(body);
  });
}

describe("the front's host names", () => {
  it("answers 421 to a rebound host name, even from loopback: no first admin without the setup token, nothing else either", async () => {
    const port = new URL(t.base).port;
    const rebound = await send(t.base, {
      method: "POST",
      path: "/api/cloud/auth/setup/first-admin",
      host: `rebind.attacker.example:${port}`,
      body: ADMIN,
    });
    expect(rebound.status).toBe(421);
    expect(rebound.body).toEqual({
      detail:
        'This service does not answer to the host name "rebind.attacker.example": use its address, localhost, or a name set in SERVICE_PUBLIC_URL or SERVICE_ALLOWED_HOSTS',
      code: "misdirected_request",
    });
    expect((await send(t.base, { path: "/api/cloud/health/live", host: "attacker.example" })).status).toBe(421);
    // A WebSocket upgrade from such a page too.
    const upgrade = await new Promise<string>((done) => {
      const socket = connect(Number(port), "127.0.0.1", () =>
        socket.write(
          `GET /api/training/events/ws HTTP/1.1\r\nHost: attacker.example:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
        ),
      );
      let text = "";
      socket.on("data", (d) => (text += d));
      socket.on("close", () => done(text));
    });
    expect(upgrade.split("\r\n")[0]).toBe("HTTP/1.1 421 Misdirected Request");
    // Nothing changed: the service still needs its first admin.
    expect((await t.call("GET", "/api/cloud/auth/setup/status")).body.needs_setup).toBe(true);
  });

  it("serves its own names: an IP address, localhost, this machine's name; the first admin from loopback as before", async () => {
    const port = new URL(t.base).port;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST.:${port}`, `${hostname()}:${port}`, `[::1]:${port}`])
      expect((await send(t.base, { path: "/api/cloud/health/live", host })).status, host).toBe(200);
    expect(
      (await send(t.base, { method: "POST", path: "/api/cloud/auth/setup/first-admin", host: `localhost:${port}`, body: ADMIN })).status,
    ).toBe(201);
  });

  it("knows its names: IP literals, localhost and below, the machine's, the bind address, the public URL's, SERVICE_ALLOWED_HOSTS", () => {
    const names = ownHostNames("0.0.0.0", "https://train.example.com", ["gpu-box.lab"]);
    for (const host of ["10.1.2.3", "::1", "localhost", "app.localhost", hostname(), "train.example.com", "GPU-BOX.LAB"])
      expect(ownHost(host, names), host).toBe(true);
    for (const host of ["attacker.example", "train.example.com.attacker.example", "localhost.attacker.example", ""])
      expect(ownHost(host, names), host).toBe(false);
  });
});

describe("workerd's private port", () => {
  it("refuses a request that did not come through the front, whatever client address it claims, and changes nothing", async () => {
    const worker = t.stack.workerUrl.href;
    const forged = { "cf-connecting-ip": "203.0.113.9", "x-service-front": "guessed" };
    for (const headers of [{ "cf-connecting-ip": "203.0.113.9" }, forged]) {
      const direct = await send(worker, { path: "/api/cloud/health/live", headers });
      expect(direct).toEqual({
        status: 403,
        body: {
          detail: "This port takes requests only from the service's own front; use the address npm start printed",
          code: "front_only",
        },
      });
    }
    const login = await send(worker, {
      method: "POST",
      path: "/api/cloud/auth/login",
      headers: forged,
      body: { username: "admin", password: "wrong" },
    });
    expect(login.status).toBe(403);
    // The front's own requests still work, and set the address from the socket.
    expect((await t.call("GET", "/api/cloud/health/live")).status).toBe(200);
    const admin = await t.call("POST", "/api/cloud/auth/login", { json: { username: "admin", password: ADMIN.password } });
    expect(admin.status).toBe(200);
    const cookie = admin.headers.get("set-cookie")!.split(";")[0]!;
    const audit = await t.call("GET", "/api/audit?limit=200", { auth: { cookie } });
    expect(JSON.stringify(audit.body)).not.toContain("203.0.113.9");
  });

  it("does not take the front's secret from a client: a header of that name sent to the front is dropped", async () => {
    const reply = await send(t.base, {
      path: "/api/cloud/health/live",
      headers: { "x-service-front": "client-chosen", "cf-connecting-ip": "203.0.113.9" },
    });
    expect(reply.status).toBe(200);
  });
});
