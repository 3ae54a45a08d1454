// `jobs retry` and the CLI's idempotent submit: the binary run as a subprocess against the real
// stack with its local runner (demo trainer, CPU jobs). A stopped job's retry resumes from its
// checkpoint and --follow follows it to its end; a running job or another researcher's job is
// refused with nothing queued. `jobs submit` sends a fresh Idempotency-Key and, when the answer is
// lost on the way back (a proxy drops the connection after the service answered), sends the same
// key again and is answered the first job: one job queued.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jobs } from "../helpers/cli";
import { createUserWithKey, setUpAdmin, startStackWithLocalRunner, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string };
let rita: { key: string; id: number };
let olga: { key: string; id: number };
const runnerDir = mkdtempSync(join(tmpdir(), "cli-retry-runner-"));

const env = (who: { key: string }, url = t.base) => ({ SERVICE_URL: url, SERVICE_API_KEY: who.key });
const http = async (method: string, path: string, who: { key: string }, json?: unknown) => {
  const reply = await t.call(method, path, { auth: { key: who.key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
};
const allJobs = async () =>
  ((await http("GET", "/api/queue?include_completed=true&limit=1000", admin)).jobs as any[]).map((j) => j.job_id as string).sort();
const jobOf = async (id: string) => (await http("GET", `/api/queue/jobs/${id}`, rita)) as any;
const events = async (id: string) => (await http("GET", `/api/training/events?job_id=${id}&limit=1000`, rita)).events as any[];

beforeAll(async () => {
  t = await startStackWithLocalRunner(runnerDir);
  admin = await setUpAdmin(t);
  rita = await createUserWithKey(t, admin, "researcher", "rita");
  olga = await createUserWithKey(t, admin, "researcher", "olga");
  await http("POST", "/api/configs/environments", rita, { name: "steady", from_example: "demo" });
  const { config } = await http("GET", "/api/configs/steady", rita);
  await http("PUT", "/api/configs/steady", rita, {
    config: { ...config, "--max_train_steps": 80, "--demo_step_ms": 40, "--validation_steps": 0, "--checkpointing_steps": 5 },
  });
}, 60_000);
afterAll(async () => {
  await t?.stop();
  rmSync(runnerDir, { recursive: true, force: true });
});

describe("jobs retry", () => {
  it("retries a stopped job from its checkpoint and, with --follow, follows the new job to its end (exit 0)", async () => {
    const old = (await http("POST", "/api/queue/submit", rita, { config_name: "steady" })).job_id as string;
    await until("a checkpoint", async () => (await events(old)).some((e) => e.type === "checkpoint.saved"), { timeoutMs: 60_000 });
    await http("POST", "/api/training/stop", rita, { job_id: old });
    await until("it to stop", async () => (await jobOf(old)).status === "completed", { timeoutMs: 60_000 });
    const newest = Math.max(...(await events(old)).filter((e) => e.type === "checkpoint.saved").map((e) => e.data.step));

    const run = await jobs(["retry", old, "--follow"], { env: env(rita), timeoutMs: 90_000 });
    expect(run.code, run.stderr).toBe(0);
    const id = /^(local-[0-9a-f]+) /.exec(run.stderr)?.[1] ?? "";
    expect(run.stderr).toContain(`retry of ${old}, resuming from checkpoint-${newest} of ${old}`);
    expect(run.stderr).toContain(`job ${id} ended: completed`);
    const retried = await jobOf(id);
    expect(retried).toMatchObject({ status: "completed", retry_of: old, lineage: { id: old, jobs: [old, id] } });
    const started = (await events(id)).find((e) => e.type === "training.started");
    expect(started.data.resumed_from_step).toBe(newest);
  }, 150_000);

  it("prints the new job as JSON with --format json", async () => {
    // Long enough that the stop, not its own end, ends it however slow this machine is.
    await http("POST", "/api/configs/environments", rita, { name: "long", from_example: "demo" });
    const { config } = await http("GET", "/api/configs/long", rita);
    await http("PUT", "/api/configs/long", rita, {
      config: { ...config, "--max_train_steps": 5000, "--demo_step_ms": 40, "--validation_steps": 0, "--checkpointing_steps": 5 },
    });
    const old = (await http("POST", "/api/queue/submit", rita, { config_name: "long" })).job_id as string;
    await until("a checkpoint", async () => (await events(old)).some((e) => e.type === "checkpoint.saved"), { timeoutMs: 60_000 });
    await http("POST", "/api/training/stop", rita, { job_id: old });
    await until("it to stop", async () => (await jobOf(old)).status === "completed", { timeoutMs: 60_000 });
    const run = await jobs(["retry", old, "--format", "json"], { env: env(rita) });
    expect(run.code, run.stderr).toBe(0);
    expect(run.json()).toMatchObject({ success: true, retry_of: old, lineage_id: old });
    await http("POST", "/api/training/stop", rita, { job_id: run.json().job_id });
  }, 90_000);

  it("exits 1 for a running job and for another researcher's job, queueing nothing", async () => {
    const running = (await http("POST", "/api/queue/submit", rita, { config_name: "steady" })).job_id as string;
    await until("it to run", async () => (await jobOf(running)).status === "running");
    const before = await allJobs();
    const refused = await jobs(["retry", running], { env: env(rita) });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`Job ${running} is running`);
    await http("POST", "/api/training/stop", rita, { job_id: running });
    await until("it to stop", async () => (await jobOf(running)).status === "completed", { timeoutMs: 60_000 });
    const byOlga = await jobs(["retry", running], { env: env(olga) });
    expect(byOlga.code).toBe(1);
    expect(byOlga.stderr).toContain("only your own jobs");
    expect(await allJobs()).toEqual(before);
  }, 90_000);
});

describe("jobs submit and its Idempotency-Key", () => {
  let proxy: Server;
  let proxyUrl: string;
  const seen: { path: string; key: string | null; replayed: string | null }[] = [];
  let dropNext = false;

  beforeAll(async () => {
    // Forwards to the service; when told to, drops the connection after the service answered a submit.
    proxy = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k !== "host" && k !== "connection")) as Record<
        string,
        string
      >;
      const upstream = await fetch(t.base + req.url, {
        method: req.method,
        headers,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
      });
      const body = Buffer.from(await upstream.arrayBuffer());
      if (req.url === "/api/queue/submit") {
        seen.push({
          path: req.url,
          key: req.headers["idempotency-key"] as string | null,
          replayed: upstream.headers.get("idempotent-replayed"),
        });
        if (dropNext) {
          dropNext = false;
          req.socket.destroy();
          return;
        }
      }
      res.writeHead(upstream.status, { "content-type": upstream.headers.get("content-type") ?? "application/json" });
      res.end(body);
    });
    await new Promise<void>((done) => proxy.listen(0, "127.0.0.1", done));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((done) => proxy.close(() => done())));

  it("sends the same key again when the answer is lost, and the service queues one job", async () => {
    const before = await allJobs();
    seen.length = 0;
    dropNext = true;
    const run = await jobs(["submit", "steady", "--no-wait"], { env: env(rita, proxyUrl), timeoutMs: 60_000 });
    expect(run.code, run.stderr).toBe(0);
    const added = (await allJobs()).filter((j) => !before.includes(j));
    expect(added).toHaveLength(1);
    expect(run.stdout).toContain(added[0]);
    expect(seen).toHaveLength(2);
    expect(seen[0]!.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen[1]).toEqual({ path: "/api/queue/submit", key: seen[0]!.key, replayed: "true" });
    await http("POST", "/api/training/stop", rita, { job_id: added[0] }).catch(() => undefined);
    await until("it to end", async () => ["completed", "failed", "cancelled"].includes((await jobOf(added[0]!)).status), {
      timeoutMs: 60_000,
    });
  }, 90_000);

  it("sends a fresh key with each submit", async () => {
    seen.length = 0;
    for (let i = 0; i < 2; i++) {
      const run = await jobs(["submit", "steady", "--dry-run"], { env: env(rita, proxyUrl) });
      expect(run.code, run.stderr).toBe(0);
    }
    expect(seen).toHaveLength(2);
    expect(seen[0]!.key).not.toBe(seen[1]!.key);
    expect(seen.every((s) => s.replayed === null)).toBe(true);
  });
});
