// A job's ways out of its sandbox (runner/agent/egress.ts) and its callback (runner/agent/callback.ts), as
// pure functions and as real servers: the callback takes only its own secret path; the proxy
// lets through only allowed names, never to loopback or link-local addresses.
import { request } from "node:http";
import { createServer, type AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { startCallback } from "../../runner/agent/callback";
import { forbiddenAddress, hostAllowed, startJobNetwork } from "../../runner/agent/egress";

describe("the egress rules", () => {
  it("allows a host by its exact name or below a *. pattern, case and trailing dot aside", () => {
    const allowed = ["huggingface.co", "*.hf.co"];
    for (const host of ["huggingface.co", "HuggingFace.co.", "cdn-lfs.hf.co", "a.b.hf.co"])
      expect(hostAllowed(host, allowed), host).toBe(true);
    for (const host of ["hf.co", "evilhuggingface.co", "huggingface.co.evil.example", "xhf.co", ""])
      expect(hostAllowed(host, allowed), host).toBe(false);
  });

  it("never lets out to loopback, link-local (the metadata service) or the unspecified address", () => {
    for (const a of [
      "127.0.0.1",
      "127.9.9.9",
      "169.254.169.254",
      "0.0.0.0",
      "::1",
      "::",
      "fe80::1",
      "::ffff:127.0.0.1",
      "::ffff:169.254.169.254",
    ])
      expect(forbiddenAddress(a), a).toBe(true);
    for (const a of ["10.0.0.5", "192.168.1.2", "8.8.8.8", "2606:4700::1111"]) expect(forbiddenAddress(a), a).toBe(false);
  });
});

describe("a job's callback", () => {
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closers) await close();
  });

  const post = (target: { port?: number; socketPath?: string }, path: string, body: string) =>
    new Promise<number>((done, fail) => {
      const req = request(
        { host: "127.0.0.1", ...target, path, method: "POST", headers: { "content-type": "application/json" } },
        (res) => {
          res.resume();
          done(res.statusCode ?? 0);
        },
      );
      req.on("error", fail);
      req.end(body);
    });

  it("takes events only at its secret path: any other path is 404 and delivers nothing", async () => {
    const got: unknown[] = [];
    const callback = await startCallback((e) => got.push(e));
    closers.push(callback.close);
    const url = new URL(callback.url);
    expect(url.pathname).toMatch(/^\/[A-Za-z0-9_-]{32}\/$/);
    const port = Number(url.port);
    const event = JSON.stringify({ type: "log", message: "forged" });
    for (const path of ["/", "/x/", url.pathname.slice(0, -2) + "/", url.pathname.toUpperCase(), `/../${url.pathname}`])
      expect(await post({ port }, path, event), path).toBe(404);
    expect(got).toEqual([]);
    expect(await post({ port }, url.pathname, JSON.stringify({ type: "training.progress", data: { step: 1 } }))).toBe(204);
    expect(got).toEqual([{ type: "training.progress", data: { step: 1 } }]);
  });

  it("inside a job's gateway, listens on its socket only; the URL names the sandbox's own loopback port", async () => {
    const net = await startJobNetwork({ allowHosts: [], edgeUrls: ["http://127.0.0.1:8001"], refused: () => {} });
    closers.push(net.close);
    const got: unknown[] = [];
    const callback = await startCallback((e) => got.push(e), { socket: net.callbackSocket, port: 47001 });
    closers.push(callback.close);
    expect(callback.url).toMatch(/^http:\/\/127\.0\.0\.1:47001\/[A-Za-z0-9_-]{32}\/$/);
    expect(net.listen).toEqual([
      { port: 47001, socket: "callback.sock" },
      { port: 8001, socket: "edge-8001.sock" },
      { port: 47002, socket: "proxy.sock" },
    ]);
    expect(await post({ socketPath: net.callbackSocket }, new URL(callback.url).pathname, '{"type":"x"}')).toBe(204);
    expect(got).toEqual([{ type: "x" }]);
  });

  it("its proxy refuses a host not allowed and an allowed name that resolves to loopback, saying why once each", async () => {
    const service = createServer((s) => s.end("secret service\n")).listen(0, "127.0.0.1");
    await new Promise((r) => service.once("listening", r));
    const port = (service.address() as AddressInfo).port;
    const refused: [string, string][] = [];
    const net = await startJobNetwork({ allowHosts: ["localhost"], edgeUrls: [], refused: (t, why) => refused.push([t, why]) });
    closers.push(net.close);
    const connect = (target: string) =>
      new Promise<number>((done, fail) => {
        const req = request({ socketPath: net.dir + "/proxy.sock", method: "CONNECT", path: target });
        req.on("connect", (res, socket) => (socket.destroy(), done(res.statusCode ?? 0)));
        req.on("response", (res) => done(res.statusCode ?? 0));
        req.on("error", fail);
        req.end();
      });
    expect(await connect(`localhost:${port}`)).toBe(403);
    expect(await connect(`localhost:${port}`)).toBe(403);
    expect(await connect("example.com:443")).toBe(403);
    expect(refused).toEqual([
      [`localhost:${port}`, expect.stringMatching(/^it resolves to (127\.0\.0\.1|::1), a loopback or link-local address$/)],
      ["example.com:443", "not among the hosts this box allows (localhost)"],
    ]);
    service.close();
  });
});
