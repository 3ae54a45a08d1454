// Expected ends and run times (issue 17 steps 1 and 2) over real HTTP: a remote worker runs jobs
// and posts their progress; the job, the listing and the training status show when each running
// job is expected to end and how that was estimated, and the queue how long each waiting job is
// expected to run. Also what must not move them: another worker's batch, garbage progress, a
// late batch of an earlier attempt; and what another researcher must not see.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerWorker } from "../helpers/boxes";
import { PUBLIC_QUEUE_FIELDS } from "../../shared/schemas/queue";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let rita: { key: string; id: number };
let oscar: { key: string; id: number };
let box: { id: number; token: string };
let other: { id: number; token: string };
const MIN = 60_000;
const gpus = [{ index: 0, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }];

async function call(method: string, path: string, key: string, json?: unknown) {
  const reply = await t.call(method, path, { auth: { key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
}

const worker = (name: string, pool: string) => registerWorker(t, admin.key, name, "remote", gpus, { pool });

async function environment(name: string, config: Record<string, unknown>) {
  await call("POST", "/api/configs/environments", admin.key, { name });
  await call("PUT", `/api/configs/${name}`, admin.key, { config: { "--num_processes": 1, ...config } });
}

/** Submits as rita to the workers of `pool`; the answer. */
const submit = (config: string, pool: string) =>
  call("POST", "/api/queue/submit", rita.key, { config_name: config, target: "worker", worker_labels: { pool } });
const job = (id: string, key = rita.key) => call("GET", `/api/queue/jobs/${id}`, key);
const listed = async (id: string, key = rita.key) =>
  ((await call("GET", "/api/queue?limit=1000", key)).jobs as any[]).find((j) => j.job_id === id);
const trainingStatus = (id: string) => call("GET", `/api/training/status?job_id=${id}`, rita.key);
/** Each job attempt's events are numbered from 0, as a runner numbers them. */
const seqs = new Map<string, number>();
/** Posts one batch of events as `as` (a worker's token) for the job's attempt; the raw reply. */
const post = (as: { token: string }, id: string, events: Record<string, unknown>[], attempt = 1) =>
  t.call("POST", `/api/workers/jobs/${id}/events`, {
    json: {
      attempt,
      events: events.map((event) => {
        const seq = seqs.get(`${id}#${attempt}`) ?? 0;
        seqs.set(`${id}#${attempt}`, seq + 1);
        return { seq, event };
      }),
    },
    auth: { bearer: as.token },
  });
const progress = (step: unknown, total: unknown) => ({ type: "training.progress", data: { step, total_steps: total } });
const finish = (id: string, status: string) =>
  t.call("POST", `/api/workers/jobs/${id}/finish`, {
    json: { status, exit_code: status === "completed" ? 0 : null },
    auth: { bearer: box.token },
  });

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  rita = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "rita");
  oscar = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "oscar");
  await call("POST", "/api/queue/concurrency", admin.key, { worker_heartbeat_timeout_seconds: 86_400, user_max_concurrent: 10 });
  await environment("free", {});
  await environment("timed", { "--max_runtime_minutes": "90" });
  await environment("fresh", {});
  box = await worker("box", "a");
  other = await worker("other-box", "b");
});
afterAll(async () => {
  await t?.stop();
});

describe("a running job's expected end", () => {
  it("follows its progress: the job, the listing and the training status show it, close to what the posted steps imply", async () => {
    const started = await submit("free", "a");
    expect(started).toMatchObject({ status: "running", worker_id: box.id });
    const id = started.job_id as string;
    expect(await job(id)).toMatchObject({ status: "running", expected_end_at: null, expected_end_method: null });

    const startedAt = Date.parse((await job(id)).started_at);
    const before = Date.now();
    expect((await post(box, id, [{ type: "log", message: "loading" }, progress(10, 100)])).body).toMatchObject({ stored: 2 });
    const after = Date.now();
    // First point: the whole time since the start over 10 steps, 90 steps to go.
    const shown = await job(id);
    expect(shown.expected_end_method).toBe("progress");
    const end = Date.parse(shown.expected_end_at);
    expect(end).toBeGreaterThanOrEqual(before + 9 * (before - startedAt) - 1);
    expect(end).toBeLessThanOrEqual(after + 9 * (after - startedAt) + 1);
    expect(await listed(id)).toMatchObject({ expected_end_at: shown.expected_end_at, expected_end_method: "progress" });
    expect(await trainingStatus(id)).toMatchObject({ expected_end_at: shown.expected_end_at, expected_end_method: "progress" });

    // The last step reported: expected to end now, whatever the rate.
    const last = Date.now();
    await post(box, id, [progress(100, 100)]);
    const done = Date.parse((await job(id)).expected_end_at);
    expect(done).toBeGreaterThanOrEqual(last);
    expect(done).toBeLessThanOrEqual(Date.now());
    expect((await finish(id, "completed")).status).toBe(200);
    expect(await job(id)).toMatchObject({ status: "completed", expected_end_at: null, expected_end_method: null });
  });

  it("comes from --max_runtime_minutes from its start when it reports no progress", async () => {
    const id = (await submit("timed", "a")).job_id as string;
    const shown = await job(id);
    expect(shown).toMatchObject({ status: "running", expected_end_method: "max_runtime" });
    expect(Date.parse(shown.expected_end_at)).toBe(Date.parse(shown.started_at) + 90 * MIN);
    expect(await trainingStatus(id)).toMatchObject({ expected_end_at: shown.expected_end_at, expected_end_method: "max_runtime" });
    // Progress, when it comes, is the better evidence.
    await post(box, id, [progress(1, 10)]);
    expect((await job(id)).expected_end_method).toBe("progress");
    expect((await finish(id, "completed")).status).toBe(200);
  });

  it("is gone when the job goes back to the queue, and a late batch of the earlier attempt does not bring it back", async () => {
    const id = (await submit("free", "a")).job_id as string;
    await post(box, id, [progress(5, 50)]);
    expect((await job(id)).expected_end_method).toBe("progress");
    expect((await finish(id, "interrupted")).body).toEqual({ job_id: id, status: "pending" });
    // The worker is idle again, so the Scheduler starts it again in attempt 2: afresh, with no estimate.
    const again = await until("the job to start again", async () => {
      const shown = await job(id);
      return shown.status === "running" && shown;
    });
    // Afresh: at most what recent runs of its environment say (the earlier tests ran it), never its old progress.
    expect(again.attempt).toBe(2);
    expect([null, "recent_runs"]).toContain(again.expected_end_method);
    expect((await post(box, id, [progress(6, 50)], 1)).body).toMatchObject({ stored: 1 });
    expect(await job(id)).toMatchObject({ expected_end_at: again.expected_end_at, expected_end_method: again.expected_end_method });
    expect((await finish(id, "completed")).status).toBe(200);
  });
});

describe("a waiting job's expected run time", () => {
  it("comes from --max_runtime_minutes, else from the recent runs of its environment on as many GPUs", async () => {
    // Pool "nowhere" has no worker: these wait.
    const timed = (await submit("timed", "nowhere")).job_id as string;
    const fresh = (await submit("fresh", "nowhere")).job_id as string;
    expect(await listed(timed)).toMatchObject({ status: "pending", expected_minutes: 90, expected_minutes_method: "max_runtime" });
    expect(await job(fresh)).toMatchObject({ status: "pending", expected_minutes: null, expected_minutes_method: null });

    const durations: number[] = [];
    for (let i = 0; i < 2; i++) {
      const run = (await submit("fresh", "a")).job_id as string;
      expect((await finish(run, "completed")).status).toBe(200);
      const ended = await job(run);
      durations.push(Date.parse(ended.completed_at) - Date.parse(ended.started_at));
    }
    const median = (durations[0]! + durations[1]!) / 2;
    const expected = { status: "pending", expected_minutes: Math.round(median / 600) / 100, expected_minutes_method: "recent_runs" };
    expect(await job(fresh)).toMatchObject(expected);
    expect(await listed(fresh)).toMatchObject(expected);
    // One that starts now is expected to end that much later, until its own progress says better.
    const third = (await submit("fresh", "a")).job_id as string;
    const started = await job(third);
    expect(started).toMatchObject({ status: "running", expected_end_method: "recent_runs" });
    expect(Date.parse(started.expected_end_at) - Date.parse(started.started_at)).toBeCloseTo(median, -2);
    expect((await post(box, third, [progress(1, 10)])).status).toBe(200);
    expect(await job(third)).toMatchObject({ expected_end_method: "progress" });
    expect((await finish(third, "completed")).status).toBe(200);
    // Running and ended jobs have none.
    expect((await listed(timed)).expected_end_at).toBeNull();
    for (const id of [timed, fresh]) await call("POST", `/api/queue/${id}/cancel`, rita.key);
    expect(await job(fresh)).toMatchObject({ status: "cancelled", expected_minutes: null, expected_minutes_method: null });
  });
});

describe("what must not show or move an estimate", () => {
  const ESTIMATES = ["expected_end_at", "expected_end_method", "expected_minutes", "expected_minutes_method"];

  it("another researcher sees only the public fields of the job: no estimate", async () => {
    const id = (await submit("timed", "a")).job_id as string;
    expect((await job(id)).expected_end_method).toBe("max_runtime");
    const seen = await job(id, oscar.key);
    expect(Object.keys(seen).sort()).toEqual([...PUBLIC_QUEUE_FIELDS].sort());
    expect(Object.keys(await listed(id, oscar.key)).sort()).toEqual([...PUBLIC_QUEUE_FIELDS].sort());
    for (const field of ESTIMATES) expect(seen).not.toHaveProperty(field);
    expect((await t.call("GET", `/api/training/status?job_id=${id}`, { auth: { key: oscar.key } })).status).toBe(403);
    expect((await finish(id, "completed")).status).toBe(200);
  });

  it("a worker posting progress for a job that is not its own is refused and changes nothing", async () => {
    const id = (await submit("timed", "a")).job_id as string;
    const before = await job(id);
    const refused = await post(other, id, [progress(99, 100)]);
    expect([refused.status, refused.body.code]).toEqual([404, "not_found"]);
    expect(await job(id)).toMatchObject({ expected_end_at: before.expected_end_at, expected_end_method: "max_runtime" });
    expect((await finish(id, "completed")).status).toBe(200);
  });

  it("garbage progress is stored as events but makes no estimate, and is never a server error", async () => {
    const id = (await submit("free", "a")).job_id as string;
    // What it started with (recent runs of "free" from the tests before, or nothing) must stay.
    const { expected_end_at, expected_end_method } = await job(id);
    expect(expected_end_method).not.toBe("progress");
    const garbage = [
      progress("x", 100),
      progress(-5, 100),
      progress(5, 0),
      progress(5, -10),
      progress(5, "100"),
      progress(null, 100),
      progress(1e300, 1e308),
      progress(1, 9_007_199_254_740_991),
      progress(1.5e-300, 2),
      { type: "training.progress", data: "step 5" },
      { type: "training.progress" },
    ];
    for (const event of garbage) {
      const reply = await post(box, id, [event]);
      expect([reply.status, reply.body.stored], JSON.stringify(event)).toEqual([200, 1]);
      expect(await job(id)).toMatchObject({ expected_end_at, expected_end_method });
    }
    const events = await call("GET", `/api/training/events?job_id=${id}&limit=1000`, rita.key);
    expect(events.events.filter((e: any) => e.type === "training.progress")).toHaveLength(garbage.length);
    // A sensible point after all that still counts, and more garbage leaves it as it was.
    await post(box, id, [progress(10, 20)]);
    const good = await job(id);
    expect(good.expected_end_method).toBe("progress");
    await post(box, id, [progress(11, 1e15), progress("x", 20)]);
    expect((await job(id)).expected_end_at).toBe(good.expected_end_at);
    expect((await finish(id, "completed")).status).toBe(200);
  });
});
