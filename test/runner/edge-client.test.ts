// The runner's client of its edge (runner/agent/edge-client.ts) over node:http keep-alive
// connections (runner/agent/http-fetch.ts) instead of the global fetch (issue 31: undici's memory):
// against the real stack, and against a deliberately wrong edge for the answers the real one never
// gives (a malformed heartbeat answer or channel command, a redirect elsewhere, a dropped connection).
import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { text } from "node:stream/consumers";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import * as esbuild from "esbuild";
import { Agent, fetch as undiciFetch } from "undici";
import { WebSocketServer } from "ws";
import { runnerBuild } from "../../runner/agent/build.mjs";
import { WakeChannel } from "../../runner/agent/channel";
import { edgeClient } from "../../runner/agent/edge-client";
import { httpFetch } from "../../runner/agent/http-fetch";
import { ServiceClient, type ServiceError } from "../../shared/client/client";
import { endpoint } from "../../shared/client/endpoint";
import { workerEndpoints } from "../../shared/client/endpoints-workers";
import { QueueStats } from "../../shared/schemas/queue";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { selfSignedCert } from "../helpers/tls";

const failure = (call: Promise<unknown>): Promise<ServiceError> =>
  call.then(
    () => {
      throw new Error("expected the call to fail");
    },
    (error: unknown) => error as ServiceError,
  );

/** A wrong edge on a free port: `handle` answers every request; `connections` counts TCP connections. */
async function fakeEdge(handle: (req: IncomingMessage, res: ServerResponse) => void) {
  const server: Server = createServer(handle);
  let connections = 0;
  server.on("connection", () => connections++);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    server,
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => connections,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

const HEARTBEAT = { body: { acked_commands: [] } };
/** A well-formed heartbeat answer. */
const IDLE = { worker_id: 1, status: "IDLE", heartbeat_interval_seconds: 5, heartbeat_timeout_seconds: 30, assignments: [], commands: [] };
const until = async (what: string, check: () => boolean) => {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!check()) throw new Error(`never: ${what}`);
};

describe("the runner's client against the service", () => {
  let t: TestStack;
  let key: string;
  let token: string;
  const fetchBefore = globalThis.fetch;
  beforeAll(async () => {
    t = await startTestStack();
    ({ key } = await setUpAdmin(t));
    token = (await t.call("POST", "/api/admin/workers", { json: { name: "http-box" }, auth: { key } })).body.token;
  });
  afterEach(() => {
    globalThis.fetch = fetchBefore;
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("registers and sends heartbeats without the global fetch, on one kept-alive connection", async () => {
    globalThis.fetch = () => {
      throw new Error("the runner's client used the global fetch");
    };
    const edge = edgeClient(t.base, token);
    const answer = await edge.call(workerEndpoints.workerRegister, { body: { role: "remote", labels: {}, gpus: [], hostname: "h" } });
    expect(answer).toMatchObject({ status: "IDLE", assignments: [], commands: [] });
    expect(await edge.call(workerEndpoints.workerHeartbeat, HEARTBEAT)).toMatchObject({ status: "IDLE", assignments: [] });
  });

  it("throws the edge's refusal with its status, code and detail, and a wrong token is a 401", async () => {
    const refused = await failure(edgeClient(t.base, "stw_wrong").call(workerEndpoints.workerHeartbeat, HEARTBEAT));
    expect(refused).toMatchObject({ name: "ServiceError", status: 401 });
    const invalid = await failure(edgeClient(t.base, token).call(workerEndpoints.workerRegister, { body: { role: "moon" } as never }));
    expect(invalid).toMatchObject({ status: 422, code: "invalid_request" });
    expect(invalid.fields?.map((f) => f.path)).toContain("body.role");
  });

  it("reports an answer that is not what the schema says as unexpected_answer", async () => {
    const wrong = endpoint({ method: "GET", path: "/api/users/me", response: QueueStats });
    const client = new ServiceClient({ baseUrl: t.base, apiKey: key, fetch: httpFetch() });
    expect(await failure(client.call(wrong, {}))).toMatchObject({ status: 200, code: "unexpected_answer" });
  });
});

// The runner as `npm run runner` builds it, in a folder of this test's own: runner.test.ts builds
// .build/runner/ at the same time.
const BUILT = ".build/edge-client-test";
let built: Promise<unknown> | undefined;
const buildRunner = () => (built ??= esbuild.build({ ...runnerBuild, outdir: BUILT }));

/** The built runner (`npm run runner`'s process) started against `url`: its exit code and output, or "registered". */
async function builtRunner(url: string, token: string, env: Record<string, string> = {}): Promise<{ outcome: unknown; stderr: string }> {
  const runner = spawn(
    process.execPath,
    [join(BUILT, "main.mjs"), "start", "--url", url, "--work-dir", mkdtempSync(join(tmpdir(), "runner-"))],
    {
      env: { ...process.env, RUNNER_TOKEN: token, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stderr = "";
  runner.stderr!.on("data", (d: Buffer) => (stderr += d));
  const outcome = await new Promise((done) => {
    runner.stdout!.on("data", (d: Buffer) => String(d).includes("registered as worker") && done("registered"));
    runner.once("exit", done);
  });
  runner.kill("SIGTERM");
  return { outcome, stderr };
}

describe("the built runner against a service over HTTPS", () => {
  const tls = selfSignedCert();
  let t: TestStack;
  let token: string;
  beforeAll(async () => {
    t = await startTestStack(undefined, undefined, { tls: { certFile: tls.certFile, keyFile: tls.keyFile } });
    // The admin and the worker token are made by this process's fetch, trusting the certificate for that.
    const trusting = new Agent({ connect: { ca: tls.cert } });
    const plainFetch = globalThis.fetch;
    globalThis.fetch = ((url: string, init: RequestInit) => undiciFetch(url, { ...(init as object), dispatcher: trusting })) as never;
    try {
      const { key } = await setUpAdmin(t);
      token = (await t.call("POST", "/api/admin/workers", { json: { name: "tls-box" }, auth: { key } })).body.token;
    } finally {
      globalThis.fetch = plainFetch;
      await trusting.close();
    }
    await buildRunner();
  });
  afterAll(async () => {
    await t?.stop();
    rmSync(tls.dir, { recursive: true, force: true });
  });

  it("registers when it trusts the service's certificate, and refuses a certificate it does not trust", async () => {
    expect(t.base).toMatch(/^https:/);
    const untrusted = await builtRunner(t.base, token);
    expect(untrusted.outcome).toBe(1);
    expect(untrusted.stderr).toContain("could not register");
    expect(untrusted.stderr).toMatch(/SELF_SIGNED_CERT|certificate/);
    expect(await builtRunner(t.base, token, { NODE_EXTRA_CA_CERTS: tls.certFile })).toMatchObject({ outcome: "registered" });
  });
});

describe("the runner's client against a wrong edge", () => {
  let closers: (() => void)[] = [];
  afterEach(() => {
    for (const close of closers) close();
    closers = [];
  });
  const edgeAnswering = async (handle: (req: IncomingMessage, res: ServerResponse) => void) => {
    const edge = await fakeEdge(handle);
    closers.push(edge.close);
    return edge;
  };

  it("refuses a malformed heartbeat answer: unexpected_answer, nothing taken from it", async () => {
    const fake = await edgeAnswering((_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ ...IDLE, assignments: [{ job_id: 42 }] }));
    });
    const error = await failure(edgeClient(fake.base, "stw_x").call(workerEndpoints.workerHeartbeat, HEARTBEAT));
    expect(error).toMatchObject({ status: 200, code: "unexpected_answer" });
    expect(error.detail).toContain("assignments.0");
    const notJson = await edgeAnswering((_req, res) => res.end("<html>proxy error</html>"));
    expect(await failure(edgeClient(notJson.base, "stw_x").call(workerEndpoints.workerHeartbeat, HEARTBEAT))).toMatchObject({
      status: 200,
      code: "unexpected_answer",
    });
  });

  it("ignores a malformed command on the channel and takes a well-formed one", async () => {
    const fake = await edgeAnswering((_req, res) => res.end());
    const sockets = new WebSocketServer({ server: fake.server });
    closers.push(() => sockets.close());
    const taken: unknown[] = [];
    const channel = new WakeChannel(
      edgeClient(fake.base, "stw_x"),
      () => {},
      () => {},
      (commands) => taken.push(...commands),
    );
    closers.push(() => channel.close());
    sockets.on("connection", (socket) => {
      socket.send("{not json");
      socket.send(JSON.stringify({ commands: [{ id: 1, job_id: "local-1", command: "format-the-disk" }] }));
      socket.send(JSON.stringify({ commands: [{ id: "2", job_id: "local-1", command: "validation" }] }));
      socket.send(JSON.stringify({ commands: [{ id: 3, job_id: "local-1", command: "validation" }] }));
    });
    channel.open();
    await until("the well-formed command", () => taken.length > 0);
    expect(taken).toEqual([{ id: 3, job_id: "local-1", command: "validation" }]);
  });

  it("the built runner (plain zod in place of @hono/zod-openapi) refuses a malformed register answer and exits", async () => {
    const fake = await edgeAnswering((_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ ...IDLE, status: "PARTYING" }));
    });
    await buildRunner();
    const { outcome, stderr } = await builtRunner(fake.base, "stw_x");
    expect(outcome).toBe(1);
    expect(stderr).toContain("could not register");
    expect(stderr).toContain("status: Invalid option");
  });

  it("follows no redirect to another origin and says where it pointed", async () => {
    const fake = await edgeAnswering((_req, res) =>
      res.writeHead(307, { location: "http://elsewhere.example/api/workers/heartbeat" }).end(),
    );
    const error = await failure(edgeClient(fake.base, "stw_x").call(workerEndpoints.workerHeartbeat, HEARTBEAT));
    expect(error).toMatchObject({ status: 307, code: "redirected" });
    expect(error.detail).toContain("http://elsewhere.example");
  });

  it("reports an edge it cannot reach, or one that does not answer in time, with status 0", async () => {
    expect(await failure(edgeClient("http://127.0.0.1:9", "stw_x").call(workerEndpoints.workerHeartbeat, HEARTBEAT))).toMatchObject({
      status: 0,
      code: "unreachable",
    });
    const silent = await edgeAnswering(() => {});
    const slow = new ServiceClient({ baseUrl: silent.base, bearer: "stw_x", timeoutMs: 200, fetch: httpFetch() });
    const error = await failure(slow.call(workerEndpoints.workerHeartbeat, HEARTBEAT));
    expect(error).toMatchObject({ status: 0, code: "timeout" });
  });

  it("streams a raw answer's body (a dataset file) whole", async () => {
    const bytes = Buffer.alloc(3 * 1024 * 1024, "a");
    const fake = await edgeAnswering((_req, res) => res.end(bytes));
    const response = await edgeClient(fake.base, "stw_x").call(workerEndpoints.workerDatasetFile, { query: { job_id: "j", path: "d/f" } });
    expect((await text(Readable.fromWeb(response.body as never))).length).toBe(bytes.length);
  });

  it("reuses its connection, and replaces one the edge closed while idle", async () => {
    const fake = await edgeAnswering((_req, res) => res.setHeader("content-type", "application/json").end(JSON.stringify(IDLE)));
    const edge = edgeClient(fake.base, "stw_x");
    await edge.call(workerEndpoints.workerHeartbeat, HEARTBEAT);
    await edge.call(workerEndpoints.workerHeartbeat, HEARTBEAT);
    expect(fake.connections()).toBe(1);
    // Closed by the edge, and at once asked again: the dead connection is not the answer.
    fake.server.closeIdleConnections();
    expect(await edge.call(workerEndpoints.workerHeartbeat, HEARTBEAT)).toMatchObject({ status: "IDLE" });
    expect(fake.connections()).toBe(2);
  });
});
