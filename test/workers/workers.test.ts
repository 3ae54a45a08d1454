// Remote workers and the GPU box over real HTTP: label globs, FIFO among idle workers, heartbeat
// timeouts with retries and failure, and a restart in the middle of a queue.
import { join } from "node:path";
import { createClient } from "@libsql/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { createUserWithKey, setUpAdmin, startTestStack, tempDataDir, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let researcher: { key: string };
const dataDir = tempDataDir();
const as = (who: { key: string }) => ({ key: who.key });
const gpus = (n: number, name = "NVIDIA A100-SXM4-80GB") => Array.from({ length: n }, (_, index) => ({ index, name, memory_mb: 81920 }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function worker(name: string, labels: Record<string, string>, count = 8) {
  const created = await t.call("POST", "/api/admin/workers", { json: { name }, auth: as(admin) });
  const token = created.body.token as string;
  const registered = await t.call("POST", "/api/workers/register", {
    json: { role: "remote", labels, gpus: gpus(count) },
    auth: { bearer: token },
  });
  expect(registered.status).toBe(200);
  return { id: created.body.id as number, token };
}
const submit = (body: Record<string, unknown>) =>
  t.call("POST", "/api/queue/submit", { json: { config_name: "train", ...body }, auth: as(researcher) });
const entry = async (jobId: string) =>
  (await t.call("GET", `/api/queue?include_completed=true&limit=1000`, { auth: as(admin) })).body.jobs.find((j: any) => j.job_id === jobId);
const workerList = async () => (await t.call("GET", "/api/admin/workers", { auth: as(admin) })).body.workers as any[];

beforeAll(async () => {
  t = await startTestStack(dataDir);
  admin = await setUpAdmin(t);
  researcher = await createUserWithKey(t, { cookie: admin.cookie }, "researcher");
  await t.call("POST", "/api/configs/environments", { json: { name: "train" }, auth: as(admin) });
  await t.call("PUT", "/api/configs/train", { json: { config: { "--num_processes": 2 } }, auth: as(admin) });
});
afterAll(async () => {
  await t?.stop();
});

describe("remote workers", () => {
  it("refuses bad worker input and names the problem", async () => {
    expect((await t.call("POST", "/api/admin/workers", { json: { name: "bad/name" }, auth: as(admin) })).status).toBe(422);
    const w = await t.call("POST", "/api/admin/workers", { json: { name: "dup" }, auth: as(admin) });
    expect((await t.call("POST", "/api/admin/workers", { json: { name: "dup" }, auth: as(admin) })).status).toBe(409);
    const twice = await t.call("POST", "/api/workers/register", {
      json: { gpus: [...gpus(1), ...gpus(1)] },
      auth: { bearer: w.body.token },
    });
    expect(twice.status).toBe(422);
    expect(twice.body.errors[0]).toEqual({ path: "body.gpus.1.index", message: "device index 0 is listed twice" });
    expect((await t.call("POST", "/api/workers/heartbeat", { json: {}, auth: { bearer: w.body.token } })).body.code).toBe("not_registered");
    expect((await t.call("POST", "/api/workers/heartbeat", { json: {}, auth: { bearer: "stw_" + "x".repeat(43) } })).status).toBe(401);
  });

  it("dispatches by label glob and GPU count, says why a job waits, and takes the longest-idle worker first", async () => {
    const a100 = await worker("a100-box", { gpu: "a100-80gb", zone: "eu-west" });
    await worker("h100-box", { gpu: "h100" });
    const first = await submit({ target: "worker", worker_labels: { gpu: "a100*" } });
    expect(first.body).toMatchObject({ status: "running", worker_id: a100.id, allocated_gpus: null });
    const second = await submit({ target: "worker", worker_labels: { gpu: "a100*" } });
    expect(second.body).toMatchObject({ status: "queued", wait_reason: "workers_busy" });
    const never = await submit({ target: "worker", worker_labels: { gpu: "v100" } });
    expect(never.body).toMatchObject({
      status: "queued",
      wait_reason: "no_matching_worker",
      message: 'queued: no online worker has labels {"gpu":"v100"} and at least 2 GPU(s)',
    });
    const listed = (await workerList()).find((w) => w.name === "a100-box");
    expect(listed).toMatchObject({
      status: "busy",
      gpu_name: "NVIDIA A100-SXM4-80GB",
      gpu_count: 8,
      labels: { gpu: "a100-80gb", zone: "eu-west" },
      current_job: first.body.job_id,
    });
    const hb = await t.call("POST", "/api/workers/heartbeat", { json: {}, auth: { bearer: a100.token } });
    expect(hb.body).toMatchObject({
      status: "busy",
      assignments: [{ job_id: first.body.job_id, config_name: "train", allocated_gpus: null, num_processes: 2, attempt: 1 }],
    });

    const older = await worker("pool-1", { pool: "x" });
    await sleep(5);
    await worker("pool-2", { pool: "x" });
    const fifo = await submit({ target: "worker", worker_labels: { pool: "x" } });
    expect(fifo.body.worker_id).toBe(older.id);
    for (const job of [second, never]) await t.call("POST", `/api/queue/${job.body.job_id}/cancel`, { auth: as(admin) });
  });

  it("gives a worker the storage credentials of a job it runs, the same pair each time, and no other job's", async () => {
    const box = await worker("storage-box", { role: "storage-test" });
    const other = await worker("other-box", { role: "other" });
    const job = (await submit({ target: "worker", worker_labels: { role: "storage-test" } })).body.job_id as string;
    const ask = (token: string, jobId = job) =>
      t.call("POST", `/api/workers/jobs/${jobId}/storage-credentials`, { json: {}, auth: { bearer: token } });
    const first = await ask(box.token);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ job_id: job, bucket: job, source: "job", endpoint_url: `${t.base}/api/cloud/storage` });
    // Asking again (a restarted runner) never revokes the pair its trainer may be using.
    expect((await ask(box.token)).body).toEqual(first.body);
    expect((await ask(other.token)).status).toBe(404);
    expect((await ask(box.token, "no-such-job")).status).toBe(404);
    expect((await t.call("POST", `/api/workers/jobs/${job}/storage-credentials`, { json: {} })).status).toBe(401);
    // Once the job has ended, neither the runner nor the pair it was given has any use.
    expect(
      (
        await t.call("POST", `/api/workers/jobs/${job}/finish`, {
          json: { status: "completed", exit_code: 0 },
          auth: { bearer: box.token },
        })
      ).status,
    ).toBe(200);
    expect((await ask(box.token)).status).toBe(404);
  });

  it("takes a silent worker offline, retries its job, and fails it after max_attempts", async () => {
    const w = await worker("flaky", { pool: "flaky" });
    const job = await submit({ target: "worker", worker_labels: { pool: "flaky" } });
    expect(job.body).toMatchObject({ status: "running", worker_id: w.id });
    await t.call("POST", "/api/queue/concurrency", { json: { worker_heartbeat_timeout_seconds: 1 }, auth: as(admin) });
    for (const attempt of [1, 2]) {
      await sleep(1100);
      await t.call("POST", "/api/queue/process", { auth: as(admin) });
      expect(await entry(job.body.job_id)).toMatchObject({
        status: "pending",
        attempt: attempt + 1,
        worker_id: null,
        error_message: `worker flaky went offline during attempt ${attempt}; retrying (attempt ${attempt + 1} of 3)`,
      });
      expect((await workerList()).find((x) => x.name === "flaky").status).toBe("offline");
      // The worker comes back: its heartbeat is a scheduling event and the job is dispatched again.
      const back = await t.call("POST", "/api/workers/heartbeat", { json: {}, auth: { bearer: w.token } });
      expect(back.body.status).toBe("IDLE");
      expect(await entry(job.body.job_id)).toMatchObject({ status: "running", attempt: attempt + 1, worker_id: w.id });
    }
    await sleep(1100);
    await t.call("POST", "/api/queue/process", { auth: as(admin) });
    expect(await entry(job.body.job_id)).toMatchObject({
      status: "failed",
      attempt: 3,
      error_message: "worker flaky went offline during attempt 3; no retries left",
    });
    await t.call("POST", "/api/queue/concurrency", { json: { worker_heartbeat_timeout_seconds: 90 }, auth: as(admin) });
  });
});

describe("removing workers and rotating their tokens (admin)", () => {
  const heartbeat = (token: string, headers: Record<string, string> = {}) =>
    t.call("POST", "/api/workers/heartbeat", { json: {}, auth: { bearer: token }, headers });
  const audited = async (type: string) =>
    (await t.call("GET", `/api/audit?event_type=${type}&limit=100`, { auth: as(admin) })).body.entries as any[];

  it("removes a worker: its token is refused at once and its running job goes back to the queue, audited", async () => {
    const w = await worker("doomed", { pool: "doomed" });
    const job = await submit({ target: "worker", worker_labels: { pool: "doomed" } });
    expect(job.body).toMatchObject({ status: "running", worker_id: w.id });

    const removed = await t.call("DELETE", `/api/admin/workers/${w.id}`, { auth: as(admin) });
    expect(removed.status).toBe(200);
    expect(removed.body).toEqual({ id: w.id, name: "doomed", requeued: [job.body.job_id], failed: [] });
    const refused = await heartbeat(w.token);
    expect([refused.status, refused.body.code]).toEqual([401, "invalid_worker_token"]);
    expect(await entry(job.body.job_id)).toMatchObject({
      status: "pending",
      attempt: 2,
      worker_id: null,
      error_message: "worker doomed was removed during attempt 1; retrying (attempt 2 of 3)",
    });
    expect((await workerList()).map((x) => x.name)).not.toContain("doomed");
    await expect
      .poll(async () => (await audited("worker_removed")).find((e) => e.target === `worker:${w.id}`)?.details)
      .toEqual({ name: "doomed", requeued: [job.body.job_id], failed: [] });
    const again = await t.call("DELETE", `/api/admin/workers/${w.id}`, { auth: as(admin) });
    expect([again.status, again.body.code]).toEqual([404, "not_found"]);
    // A new worker may take the name, and the requeued job, again.
    const successor = await worker("doomed", { pool: "doomed" });
    expect(await entry(job.body.job_id)).toMatchObject({ status: "running", worker_id: successor.id });
  });

  it("lets only admins remove a worker; anyone else changes nothing", async () => {
    const w = await worker("kept", { pool: "kept" });
    const refused = await t.call("DELETE", `/api/admin/workers/${w.id}`, { auth: as(researcher) });
    expect([refused.status, refused.body.code]).toEqual([403, "forbidden"]);
    expect((await heartbeat(w.token)).status).toBe(200);
    expect((await workerList()).find((x) => x.id === w.id)).toBeDefined();
    expect((await t.call("DELETE", "/api/admin/workers/not-a-number", { auth: as(admin) })).status).toBe(422);
  });

  it("rotates a token: the new one is shown once and works, the old one is refused at once", async () => {
    const w = await worker("rotating", { pool: "rotating" });
    const notAdmin = await t.call("POST", `/api/admin/workers/${w.id}/token`, { auth: as(researcher) });
    expect(notAdmin.status).toBe(403);
    expect((await heartbeat(w.token)).status).toBe(200);

    const rotated = await t.call("POST", `/api/admin/workers/${w.id}/token`, { auth: as(admin) });
    expect(rotated.status).toBe(201);
    expect(rotated.body).toMatchObject({ id: w.id, name: "rotating", status: "IDLE" });
    expect(rotated.body.token).toMatch(/^stw_[A-Za-z0-9_-]{43}$/);
    expect(rotated.body.token).not.toBe(w.token);
    const old = await heartbeat(w.token);
    expect([old.status, old.body.code]).toEqual([401, "invalid_worker_token"]);
    expect((await heartbeat(rotated.body.token)).status).toBe(200);
    expect(JSON.stringify(await workerList())).not.toContain(rotated.body.token);
    await expect.poll(async () => (await audited("worker_token_rotated")).some((e) => e.target === `worker:${w.id}`)).toBe(true);
    expect(JSON.stringify(await audited("worker_token_rotated"))).not.toContain(rotated.body.token);
    expect((await t.call("POST", "/api/admin/workers/999999/token", { auth: as(admin) })).status).toBe(404);
  });

  it("refuses a runner's event batch with its old token at once after a rotation and after a removal, though it sent one a moment before", async () => {
    const w = await worker("streaming", { pool: "streaming" });
    const job = await submit({ target: "worker", worker_labels: { pool: "streaming" } });
    expect(job.body).toMatchObject({ status: "running", worker_id: w.id });
    const send = (token: string, seq: number) =>
      t.call("POST", `/api/workers/jobs/${job.body.job_id}/events`, {
        json: { attempt: 1, events: [{ seq, event: { type: "log", message: `line ${seq}` } }] },
        auth: { bearer: token },
      });
    expect((await send(w.token, 0)).body).toMatchObject({ stored: 1 });

    const rotated = await t.call("POST", `/api/admin/workers/${w.id}/token`, { auth: as(admin) });
    expect(rotated.status).toBe(201);
    const late = await send(w.token, 1);
    expect([late.status, late.body.code]).toEqual([401, "invalid_worker_token"]);
    // Nothing of the refused batch was stored: seq 1 is new to the log when the new token sends it.
    expect((await send(rotated.body.token, 1)).body).toMatchObject({ stored: 1 });

    expect((await t.call("DELETE", `/api/admin/workers/${w.id}`, { auth: as(admin) })).status).toBe(200);
    const gone = await send(rotated.body.token, 2);
    expect([gone.status, gone.body.code]).toEqual([401, "invalid_worker_token"]);
  });

  it("closes a channel opened with a token that stops working, on rotation and on removal; the old token cannot reopen it", async () => {
    const w = await worker("channelled", { pool: "channelled" });
    const open = (token: string) =>
      new Promise<{ socket: WebSocket; closed: Promise<number> }>((done, fail) => {
        const socket = new WebSocket(`${t.base.replace("http", "ws")}/api/workers/channel`, {
          headers: { authorization: `Bearer ${token}` },
        });
        const closed = new Promise<number>((resolve) => {
          socket.on("close", (code) => resolve(code));
          // workerd keeps the TCP connection about 10 s after the close handshake; the close
          // frame's code is what counts, and ws keeps it when the socket is dropped.
          const watch = setInterval(() => {
            if (socket.readyState !== WebSocket.CLOSING) return;
            clearInterval(watch);
            socket.terminate();
          }, 10);
          socket.on("close", () => clearInterval(watch));
        });
        socket.on("open", () => done({ socket, closed }));
        socket.on("unexpected-response", (_req, res) => fail(new Error(`channel refused: ${res.statusCode}`)));
        socket.on("error", fail);
      });
    const first = await open(w.token);
    const rotated = (await t.call("POST", `/api/admin/workers/${w.id}/token`, { auth: as(admin) })).body.token as string;
    expect(await first.closed).toBe(1008);
    await expect(open(w.token)).rejects.toThrow("channel refused: 401");
    const second = await open(rotated);
    expect((await t.call("DELETE", `/api/admin/workers/${w.id}`, { auth: as(admin) })).status).toBe(200);
    expect(await second.closed).toBe(1008);
    await expect(open(rotated)).rejects.toThrow("channel refused: 401");
  });

  it("limits worker-token guessing per address: 20 failures a minute, then 429; a valid token from there still works", async () => {
    const w = await worker("guessed", { pool: "guessed" });
    const guesser = { "x-forwarded-for": "203.0.113.66" };
    for (let i = 0; i < 20; i++) {
      const reply = await heartbeat(`stw_${String(i).padStart(43, "g")}`, guesser);
      expect([reply.status, reply.body.code]).toEqual([401, "invalid_worker_token"]);
    }
    const limited = await heartbeat(`stw_${"h".repeat(43)}`, guesser);
    expect([limited.status, limited.body.code]).toEqual([429, "rate_limited"]);
    expect(limited.body.detail).toMatch(
      /^Rate limit exceeded: at most 20 failed worker-token authentications per 60 s \(rule "worker-token-failures"\); retry in \d+ s$/,
    );
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await heartbeat(w.token, guesser)).status).toBe(200);
    expect((await heartbeat(`stw_${"h".repeat(43)}`, { "x-forwarded-for": "203.0.113.67" })).status).toBe(401);
  });
});

describe("a restart in the middle of a queue", () => {
  it("keeps order and allocations, and cleanup removes only old finished entries", async () => {
    const box = await t.call("POST", "/api/admin/workers", { json: { name: "local-box" }, auth: as(admin) });
    await t.call("POST", "/api/workers/register", { json: { role: "local", gpus: gpus(4) }, auth: { bearer: box.body.token } });
    await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 4 }, auth: as(admin) });
    const jobs = [];
    for (let i = 0; i < 4; i++) jobs.push((await submit({ target: "local" })).body);
    // Positions are global: the jobs the earlier test's silent workers gave back wait ahead.
    const ahead = jobs[2].queue_position - 1;
    expect(jobs.map((j) => [j.status, j.allocated_gpus ?? j.queue_position - ahead])).toEqual([
      ["running", [0, 1]],
      ["running", [2, 3]],
      ["queued", 1],
      ["queued", 2],
    ]);
    const before = (await t.call("GET", "/api/queue", { auth: as(admin) })).body.jobs.map((j: any) => [
      j.job_id,
      j.status,
      j.allocated_gpus,
      j.position,
    ]);
    await t.stop({ keepData: true });

    // Finished entries written as an older deployment would have left them.
    const db = createClient({ url: `file:${join(dataDir, "service.db")}` });
    const day = 86_400_000;
    const at = (daysAgo: number) => new Date(Date.now() - daysAgo * day).toISOString();
    for (const [id, status, daysAgo] of [
      ["old-done", "completed", 40],
      ["old-failed", "failed", 31],
      ["recent-done", "completed", 29],
      ["old-cancelled", "cancelled", 365],
    ] as const) {
      await db.execute({
        sql: "INSERT INTO queue_entries (job_id, user_id, status, queued_at, completed_at) VALUES (?, 1, ?, ?, ?)",
        args: [id, status, at(daysAgo + 1), at(daysAgo)],
      });
    }
    await db.execute({
      sql: "INSERT INTO queue_entries (job_id, user_id, status, queued_at) VALUES ('ancient-blocked', 1, 'blocked', ?)",
      args: [at(400)],
    });
    db.close();

    t = await startTestStack(dataDir);
    const after = (await t.call("GET", "/api/queue", { auth: as(admin) })).body.jobs
      .filter((j: any) => j.job_id !== "ancient-blocked")
      .map((j: any) => [j.job_id, j.status, j.allocated_gpus, j.position]);
    expect(after).toEqual(before);
    const cleanup = await t.call("POST", "/api/queue/cleanup?days=30", { auth: as(admin) });
    expect(cleanup.body).toEqual({ success: true, deleted: 3, days: 30 });
    const left = (await t.call("GET", "/api/queue?include_completed=true&limit=1000", { auth: as(admin) })).body.jobs.map(
      (j: any) => j.job_id,
    );
    expect(left).toEqual(expect.arrayContaining(["recent-done", "ancient-blocked", ...jobs.map((j) => j.job_id)]));
    expect(left).not.toEqual(expect.arrayContaining(["old-done"]));
    expect(left.filter((id: string) => id.startsWith("old-"))).toEqual([]);
  });
});
