// One job lifecycle (issue 13) over real HTTP: every way a job ends sends its watchers (server-sent
// events and WebSocket) an `end` with the right status and its webhook receivers the matching
// `job.<status>` message, with why; a running job sent back to the queue sends `job.retrying`.
// Also: the retry-or-fail rule on the real schema, and a lost race answered with the real status.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { requeueOrFail, interruptedChanges } from "../../edge/jobs/lifecycle/requeue-or-fail";
import { openMigratedDb } from "../helpers/migrated-db";
import { sseEvents } from "../helpers/sse";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let researcher: { key: string; id: number };
let receiver: Server;
/** Every webhook message the receiver got: `{type, job_id, timestamp, data}`. */
const received: any[] = [];
const as = (who: { key: string }) => ({ key: who.key });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const gpus = (n: number) => Array.from({ length: n }, (_, index) => ({ index, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }));

async function worker(name: string, pool: string) {
  const created = await t.call("POST", "/api/admin/workers", { json: { name }, auth: as(admin) });
  const token = created.body.token as string;
  expect(
    (await t.call("POST", "/api/workers/register", { json: { role: "remote", labels: { pool }, gpus: gpus(2) }, auth: { bearer: token } }))
      .status,
  ).toBe(200);
  return { id: created.body.id as number, token };
}
const submit = async (pool: string) =>
  (
    await t.call("POST", "/api/queue/submit", {
      json: { config_name: "hooked", target: "worker", worker_labels: { pool } },
      auth: as(researcher),
    })
  ).body;
const entry = async (jobId: string) =>
  (await t.call("GET", "/api/queue?include_completed=true&limit=1000", { auth: as(admin) })).body.jobs.find((j: any) => j.job_id === jobId);
/** The job's stored state, without the forecast each Scheduler pass refreshes (a pass may fall between two reads). */
const stored = async (jobId: string) => {
  const { expected_start_at, expected_start_basis, ...rest } = await entry(jobId);
  return rest;
};
const finish = (token: string, jobId: string, body: Record<string, unknown>) =>
  t.call("POST", `/api/workers/jobs/${jobId}/finish`, { json: body, auth: { bearer: token } });
const heartbeat = (token: string) => t.call("POST", "/api/workers/heartbeat", { json: {}, auth: { bearer: token } });

/** The messages of one job the receiver has got, once `count` of them are in. */
async function messagesOf(jobId: string, count: number): Promise<any[]> {
  await expect.poll(() => received.filter((m) => m.job_id === jobId).length, { timeout: 15_000 }).toBeGreaterThanOrEqual(count);
  return received.filter((m) => m.job_id === jobId);
}

/**
 * Opens a server-sent events watcher and a WebSocket watcher of the job, both registered with its
 * hub when this resolves; `ends` resolves with the `end` each of them got.
 */
async function watch(jobId: string): Promise<{ ends: Promise<[unknown, unknown]> }> {
  const url = `${t.base}/api/training/events/stream?job_id=${jobId}`;
  const response = await fetch(url, { headers: { "x-api-key": admin.key, accept: "text/event-stream" } });
  expect(response.status).toBe(200);
  const sse = (async () => {
    for await (const e of sseEvents(response.body!)) if (e.event === "end") return e.data;
    return "stream closed without an end";
  })();
  const socket = new WebSocket(url.replace("http", "ws"), { headers: { "x-api-key": admin.key } });
  const ws = new Promise((done, fail) => {
    socket.on("message", (data) => {
      const m = JSON.parse(String(data));
      if (m.type === "end") done(m);
    });
    socket.on("error", fail);
    socket.on("close", () => done("socket closed without an end"));
  });
  await new Promise((open, fail) => (socket.once("open", open), socket.once("error", fail)));
  return { ends: Promise.all([sse, ws]) };
}

async function expectEnd(watching: { ends: Promise<[unknown, unknown]> }, status: string) {
  const [sse, ws] = await watching.ends;
  expect(sse).toEqual({ status });
  expect(ws).toEqual({ type: "end", status });
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  researcher = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "rita");
  receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      received.push(JSON.parse(body));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  const hooks = JSON.stringify([
    { webhook_type: "raw", callback_url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` },
  ]);
  expect((await t.call("PUT", "/api/admin/webhooks", { json: { allow_private_targets: true }, auth: as(admin) })).status).toBe(200);
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "hooked" }, auth: as(admin) })).status).toBe(201);
  expect(
    (
      await t.call("PUT", "/api/configs/hooked", {
        json: { config: { "--num_processes": 1, "--webhook_config": hooks, "--webhook_reporting_interval": 5 } },
        auth: as(admin),
      })
    ).status,
  ).toBe(200);
});
afterAll(async () => {
  receiver?.close();
  await t?.stop();
});

describe("every way a job ends reaches its watchers and its webhook receivers", () => {
  let box: { id: number; token: string };
  beforeAll(async () => {
    box = await worker("box-a", "a");
  });

  it("completed: the runner reports exit 0", async () => {
    const job = await submit("a");
    expect(job).toMatchObject({ status: "running", worker_id: box.id });
    const watching = await watch(job.job_id);
    expect((await finish(box.token, job.job_id, { status: "completed", exit_code: 0 })).body).toEqual({
      job_id: job.job_id,
      status: "completed",
    });
    await expectEnd(watching, "completed");
    const [message] = await messagesOf(job.job_id, 1);
    expect(message).toMatchObject({
      type: "job.completed",
      job_id: job.job_id,
      data: { status: "completed", error_message: null, last_progress: null },
    });
  });

  it("failed: the runner reports a non-zero exit, and the receivers learn why", async () => {
    const job = await submit("a");
    const watching = await watch(job.job_id);
    const reported = await finish(box.token, job.job_id, {
      status: "failed",
      exit_code: 1,
      error: "CUDA out of memory",
      last_lines: ["step 3", "Traceback"],
    });
    expect(reported.body).toEqual({ job_id: job.job_id, status: "failed" });
    await expectEnd(watching, "failed");
    const [message] = await messagesOf(job.job_id, 1);
    expect(message).toMatchObject({
      type: "job.failed",
      data: { status: "failed", error_message: "CUDA out of memory\nlast lines:\nstep 3\nTraceback" },
    });
  });

  it("cancelled while pending (POST /api/queue/{id}/cancel)", async () => {
    const job = await submit("nowhere");
    expect(job).toMatchObject({ status: "queued", wait_reason: "no_matching_worker" });
    const watching = await watch(job.job_id);
    const cancelled = await t.call("POST", `/api/queue/${job.job_id}/cancel`, { auth: as(researcher) });
    expect(cancelled.body.job).toMatchObject({ status: "cancelled", error_message: "Cancelled before it started" });
    await expectEnd(watching, "cancelled");
    const [message] = await messagesOf(job.job_id, 1);
    expect(message).toMatchObject({ type: "job.cancelled", data: { status: "cancelled", error_message: "Cancelled before it started" } });
  });

  it("cancelled while running (POST /api/training/cancel): the runner is told to stop, the cancel by an admin is audited", async () => {
    const job = await submit("a");
    expect(job).toMatchObject({ status: "running", worker_id: box.id });
    const watching = await watch(job.job_id);
    const cancelled = await t.call("POST", "/api/training/cancel", { json: { job_id: job.job_id }, auth: as(admin) });
    expect(cancelled.body).toEqual({
      success: true,
      job_id: job.job_id,
      message: `Job ${job.job_id} is cancelled; its trainer is being killed and its GPUs are free`,
    });
    await expectEnd(watching, "cancelled");
    const [message] = await messagesOf(job.job_id, 1);
    expect(message).toMatchObject({ type: "job.cancelled", data: { status: "cancelled", error_message: "Cancelled while running" } });
    // The job left the runner's assignments, so the runner ends its trainer; the box is free.
    expect((await heartbeat(box.token)).body).toMatchObject({ status: "IDLE", assignments: [] });
    await expect
      .poll(async () =>
        (await t.call("GET", "/api/audit?event_type=job_cancelled", { auth: as(admin) })).body.entries.find(
          (e: any) => e.target === job.job_id,
        ),
      )
      .toMatchObject({ actor: "admin", details: { was: "running", owner_id: researcher.id } });
  });

  it("rejected: blocked by an approval rule, then rejected with a reason", async () => {
    await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 0 }, auth: as(admin) });
    try {
      const job = await submit("a");
      expect(job).toMatchObject({ status: "blocked", wait_reason: "awaiting_approval" });
      const watching = await watch(job.job_id);
      const rejected = await t.call("POST", `/api/queue/${job.job_id}/reject?reason=${encodeURIComponent("not this week")}`, {
        auth: as(admin),
      });
      expect(rejected.body.job).toMatchObject({ status: "cancelled", error_message: "Rejected: not this week" });
      await expectEnd(watching, "cancelled");
      const [message] = await messagesOf(job.job_id, 1);
      expect(message).toMatchObject({ type: "job.cancelled", data: { status: "cancelled", error_message: "Rejected: not this week" } });
    } finally {
      await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: null }, auth: as(admin) });
    }
  });

  it("a cancel that loses the race to the job's end answers 409 with the real status and changes nothing", async () => {
    const job = await submit("a");
    expect((await finish(box.token, job.job_id, { status: "completed", exit_code: 0 })).status).toBe(200);
    const before = await stored(job.job_id);
    const viaQueue = await t.call("POST", `/api/queue/${job.job_id}/cancel`, { auth: as(researcher) });
    expect([viaQueue.status, viaQueue.body]).toEqual([409, { code: "job_finished", detail: `Job ${job.job_id} is already completed` }]);
    const viaTraining = await t.call("POST", "/api/training/cancel", { json: { job_id: job.job_id }, auth: as(admin) });
    expect([viaTraining.status, viaTraining.body.code]).toEqual([409, "job_finished"]);
    // The runner reporting twice is the same race from the other side.
    const again = await finish(box.token, job.job_id, { status: "failed", exit_code: 1 });
    expect([again.status, again.body]).toEqual([
      409,
      { code: "not_running", detail: `Job ${job.job_id} is completed, not running; nothing was changed` },
    ]);
    expect(await stored(job.job_id)).toEqual(before);
    // One end only: the receivers got job.completed once and nothing after it.
    await messagesOf(job.job_id, 1);
    await sleep(300);
    expect(received.filter((m) => m.job_id === job.job_id).map((m) => m.type)).toEqual(["job.completed"]);
  });

  it("refuses careless and hostile requests with a 4xx, changing nothing", async () => {
    const other = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "oscar");
    const job = await submit("nowhere");
    const before = await stored(job.job_id);
    const notMine = await t.call("POST", `/api/queue/${job.job_id}/cancel`, { auth: as(other) });
    expect([notMine.status, notMine.body]).toEqual([
      403,
      { code: "forbidden", detail: "You can cancel only your own jobs; a lead or admin can cancel any" },
    ]);
    expect((await t.call("POST", "/api/training/cancel", { json: { job_id: job.job_id }, auth: as(other) })).status).toBe(403);
    expect((await t.call("POST", "/api/queue/no-such-job/cancel", { auth: as(admin) })).status).toBe(404);
    expect((await t.call("POST", "/api/training/cancel", { json: {}, auth: as(admin) })).status).toBe(422);
    expect((await t.call("POST", `/api/queue/${job.job_id}/reject`, { auth: as(admin) })).status).toBe(422);
    const notBlocked = await t.call("POST", `/api/queue/${job.job_id}/reject?reason=x`, { auth: as(admin) });
    expect([notBlocked.status, notBlocked.body]).toEqual([
      409,
      { code: "not_awaiting_approval", detail: `Job ${job.job_id} is pending, not awaiting approval` },
    ]);
    expect((await t.call("POST", `/api/queue/${job.job_id}/approve`, { auth: as(researcher) })).status).toBe(403);
    // A runner cannot end a job that is not its own, nor send a status that does not exist.
    expect((await finish(box.token, job.job_id, { status: "completed", exit_code: 0 })).status).toBe(404);
    expect((await finish(box.token, job.job_id, { status: "exploded" })).status).toBe(422);
    expect(await stored(job.job_id)).toEqual(before);
    expect(received.filter((m) => m.job_id === job.job_id)).toEqual([]);
    await t.call("POST", `/api/queue/${job.job_id}/cancel`, { auth: as(researcher) });
  });
});

describe("a runner that dies", () => {
  it("retries its job (job.retrying) and fails it at max_attempts, silent or removed, with the end and job.failed", async () => {
    const silent = await worker("silent", "s");
    const doomed = await worker("doomed", "d");
    const quiet = (await submit("s")).job_id as string;
    const removed = (await submit("d")).job_id as string;
    await t.call("POST", "/api/queue/concurrency", { json: { worker_heartbeat_timeout_seconds: 1 }, auth: as(admin) });
    try {
      for (const attempt of [1, 2]) {
        await sleep(1100);
        await t.call("POST", "/api/queue/process", { auth: as(admin) });
        expect(await entry(quiet)).toMatchObject({
          status: "pending",
          attempt: attempt + 1,
          error_message: `worker silent went offline during attempt ${attempt}; retrying (attempt ${attempt + 1} of 3)`,
        });
        // Both come back; their jobs are dispatched again.
        for (const w of [silent, doomed]) expect((await heartbeat(w.token)).body.status).toBe("IDLE");
        expect(await entry(quiet)).toMatchObject({ status: "running", attempt: attempt + 1, worker_id: silent.id });
      }
      const retries = (await messagesOf(quiet, 2)).map((m) => [m.type, m.data.attempt, m.data.max_attempts, m.data.error_message]);
      expect(retries).toEqual([
        ["job.retrying", 2, 3, "worker silent went offline during attempt 1; retrying (attempt 2 of 3)"],
        ["job.retrying", 3, 3, "worker silent went offline during attempt 2; retrying (attempt 3 of 3)"],
      ]);

      const watchingQuiet = await watch(quiet);
      const watchingRemoved = await watch(removed);
      const gone = await t.call("DELETE", `/api/admin/workers/${doomed.id}`, { auth: as(admin) });
      expect(gone.body).toEqual({ id: doomed.id, name: "doomed", requeued: [], failed: [removed] });
      await expectEnd(watchingRemoved, "failed");
      expect((await messagesOf(removed, 3)).at(-1)).toMatchObject({
        type: "job.failed",
        data: { status: "failed", error_message: "worker doomed was removed during attempt 3; no retries left" },
      });

      await sleep(1100);
      await t.call("POST", "/api/queue/process", { auth: as(admin) });
      await expectEnd(watchingQuiet, "failed");
      expect(await entry(quiet)).toMatchObject({
        status: "failed",
        attempt: 3,
        error_message: "worker silent went offline during attempt 3; no retries left",
      });
      expect((await messagesOf(quiet, 3)).at(-1)).toMatchObject({
        type: "job.failed",
        data: { status: "failed", error_message: "worker silent went offline during attempt 3; no retries left" },
      });
    } finally {
      await t.call("POST", "/api/queue/concurrency", { json: { worker_heartbeat_timeout_seconds: 90 }, auth: as(admin) });
    }
  });
});

describe("requeueOrFail on the real schema", () => {
  it("sends a job with attempts left back to pending with its GPUs and worker freed, and fails one without, touching nothing else", async () => {
    const db = await openMigratedDb();
    try {
      const now = "2026-11-20T10:00:00.000Z";
      await db.client.batch(
        [
          "INSERT INTO workers (id, name, status, token_prefix, token_hash, created_at) VALUES (1, 'w1', 'offline', 'p1', 'h1', '2026-01-01'), (2, 'w2', 'busy', 'p2', 'h2', '2026-01-01')",
          `INSERT INTO queue_entries (job_id, status, queued_at, started_at, attempt, max_attempts, allocated_gpus, worker_id) VALUES
             ('retried', 'running', '2026-11-20', '2026-11-20T09:00:00Z', 1, 3, '[0,1]', 1),
             ('spent', 'running', '2026-11-20', '2026-11-20T09:00:00Z', 3, 3, '[2]', 1),
             ('other-worker', 'running', '2026-11-20', '2026-11-20T09:00:00Z', 1, 3, '[0]', 2),
             ('ended', 'completed', '2026-11-20', '2026-11-20T09:00:00Z', 1, 3, '[3]', 1)`,
        ],
        "write",
      );
      const result = await db.client.execute(requeueOrFail({ offlineWorkers: true, what: "went offline" }, now));
      const changes = interruptedChanges(result.rows as unknown as Record<string, unknown>[]);
      expect(changes.sort((a, b) => a.jobId.localeCompare(b.jobId))).toEqual([
        {
          jobId: "retried",
          from: "running",
          to: "pending",
          workerId: null,
          message: "worker w1 went offline during attempt 1; retrying (attempt 2 of 3)",
          attempt: 2,
          maxAttempts: 3,
        },
        {
          jobId: "spent",
          from: "running",
          to: "failed",
          workerId: null,
          message: "worker w1 went offline during attempt 3; no retries left",
          attempt: 3,
          maxAttempts: 3,
        },
      ]);
      const rows = (
        await db.client.execute(
          "SELECT job_id, status, attempt, started_at, completed_at, allocated_gpus, worker_id FROM queue_entries ORDER BY job_id",
        )
      ).rows.map((r) => ({ ...r }));
      expect(rows).toEqual([
        {
          job_id: "ended",
          status: "completed",
          attempt: 1,
          started_at: "2026-11-20T09:00:00Z",
          completed_at: null,
          allocated_gpus: "[3]",
          worker_id: 1,
        },
        {
          job_id: "other-worker",
          status: "running",
          attempt: 1,
          started_at: "2026-11-20T09:00:00Z",
          completed_at: null,
          allocated_gpus: "[0]",
          worker_id: 2,
        },
        { job_id: "retried", status: "pending", attempt: 2, started_at: null, completed_at: null, allocated_gpus: null, worker_id: null },
        {
          job_id: "spent",
          status: "failed",
          attempt: 3,
          started_at: "2026-11-20T09:00:00Z",
          completed_at: now,
          allocated_gpus: "[2]",
          worker_id: 1,
        },
      ]);

      // A runner's own report: its words first, the trainer's last lines after; only that job of that worker.
      const reported = await db.client.execute(
        requeueOrFail({ jobId: "other-worker", workerId: 2, why: "the runner restarted", tail: "a\nb" }, now),
      );
      expect(interruptedChanges(reported.rows as unknown as Record<string, unknown>[])).toEqual([
        {
          jobId: "other-worker",
          from: "running",
          to: "pending",
          workerId: null,
          message: "the runner restarted; retrying (attempt 2 of 3)\nlast lines:\na\nb",
          attempt: 2,
          maxAttempts: 3,
        },
      ]);
      expect((await db.client.execute(requeueOrFail({ jobId: "other-worker", workerId: 2, why: "again" }, now))).rows).toEqual([]);
    } finally {
      db.close();
    }
  });
});
