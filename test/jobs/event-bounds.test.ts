// Bounds on job events (issue 26, item 5) over real HTTP: a job that posts 100,000 events stores at
// most its cap, once truncated, its end still stored and summarised, while another user's job
// stores normally; a user's jobs together stop at their quota; ended jobs' events go after the
// retention, running jobs' never; admins set the limits. Beside them, admitEvents as a pure function.
import { createClient } from "@libsql/client";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { admitEvents, RESERVE_EVENTS } from "../../edge/jobs/event-bounds";
import { EVENT_LIMITS_DEFAULTS } from "../../shared/schemas/events";
import { registerWorker } from "../helpers/boxes";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
const users: Record<string, { key: string; id: number }> = {};
const workers: Record<string, { id: number; token: string }> = {};
const gpus = [{ index: 0, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }];

async function call(method: string, path: string, key: string, json?: unknown) {
  const reply = await t.call(method, path, { auth: { key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
}
const setLimits = (limits: Record<string, number>) => call("PUT", "/api/admin/event-limits", admin.key, limits);

/** A job of `user` running on the worker of `pool` (each pool's worker runs one job at a time). */
async function running(user: string, pool: string): Promise<string> {
  const answer = await call("POST", "/api/queue/submit", users[user]!.key, {
    config_name: "plain",
    target: "worker",
    worker_labels: { pool },
  });
  expect(answer).toMatchObject({ status: "running", worker_id: workers[pool]!.id });
  return answer.job_id as string;
}

const seqs = new Map<string, number>();
/** Posts events as the runner of `pool` would, numbered on from the last; the raw reply. */
function post(pool: string, job: string, events: Record<string, unknown>[]) {
  const from = seqs.get(job) ?? 0;
  seqs.set(job, from + events.length);
  return t.call("POST", `/api/workers/jobs/${job}/events`, {
    json: { attempt: 1, events: events.map((event, i) => ({ seq: from + i, event })) },
    auth: { bearer: workers[pool]!.token },
  });
}
const logs = (n: number, text = "a line of the trainer's output") =>
  Array.from({ length: n }, (_, i) => ({ type: "log", message: `${text} ${i}` }));
const finish = (pool: string, job: string) =>
  t.call("POST", `/api/workers/jobs/${job}/finish`, {
    json: { status: "completed", exit_code: 0 },
    auth: { bearer: workers[pool]!.token },
  });

/** Every event of a job, page by page. */
async function allEvents(job: string, key = admin.key): Promise<any[]> {
  const events: any[] = [];
  for (let index = 0; ;) {
    const page = await call("GET", `/api/training/events?job_id=${job}&since_index=${index}&limit=1000`, key);
    if (!page.events.length) return events;
    events.push(...page.events);
    index = page.next_index;
  }
}

async function database<T>(use: (db: ReturnType<typeof createClient>) => Promise<T>): Promise<T> {
  const db = createClient({ url: `file:${join(t.dataDir, "service.db")}` });
  try {
    return await use(db);
  } finally {
    db.close();
  }
}
/** What the job's log takes in the database: its events and their bytes. */
const stored = (job: string) =>
  database(async (db) => {
    const row = (
      await db.execute({
        sql: "SELECT COUNT(*) AS n, COALESCE(SUM(length(CAST(payload AS BLOB))), 0) AS bytes FROM job_events WHERE job_id = ?",
        args: [job],
      })
    ).rows[0]!;
    return { events: Number(row.n), bytes: Number(row.bytes) };
  });
const databaseBytes = () =>
  database(async (db) => {
    const pages = Number((await db.execute("PRAGMA page_count")).rows[0]![0]);
    return pages * Number((await db.execute("PRAGMA page_size")).rows[0]![0]);
  });

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  for (const name of ["rita", "oscar", "una", "victor"])
    users[name] = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", name);
  await call("POST", "/api/queue/concurrency", admin.key, { worker_heartbeat_timeout_seconds: 86_400, user_max_concurrent: 10 });
  await call("POST", "/api/configs/environments", admin.key, { name: "plain" });
  await call("PUT", "/api/configs/plain", admin.key, { config: { "--num_processes": 1 } });
  // The environment is the admin's; researchers may run it.
  for (const pool of ["a", "b"]) {
    workers[pool] = await registerWorker(t, admin.key, `box-${pool}`, "remote", gpus, { pool });
  }
});
afterAll(async () => {
  await t?.stop();
});

describe("a job's event cap", () => {
  it("stores at most the cap of a job posting 100,000 events, says so once, keeps its end, while another user's job stores normally", async () => {
    await setLimits({ max_events_per_job: 2_000, max_bytes_per_job: 1024 * 1024 });
    const flood = await running("rita", "a");
    const normal = await running("oscar", "b");

    // The legitimate use first: it stores everything.
    const mine = await post("b", normal, [{ type: "training.started" }, ...logs(499)]);
    expect(mine.body).toMatchObject({ stored: 500, dropped: 0 });

    // 100,000 events as a runner sends them (500 a batch): every batch is taken (200), none refused.
    let taken = 0;
    let dropped = 0;
    let atCap = 0;
    for (let batch = 0; batch < 200; batch++) {
      const reply = await post(
        "a",
        flood,
        logs(500).map((e, i) =>
          i % 10 === 0 ? { type: "training.progress", data: { step: batch * 50 + i / 10, total_steps: 10_000 } } : e,
        ),
      );
      expect(reply.status).toBe(200);
      taken += reply.body.stored;
      dropped += reply.body.dropped;
      if (batch === 9) atCap = await databaseBytes();
    }
    expect(taken).toBe(2_000);
    expect(dropped).toBe(98_000);
    const held = await stored(flood);
    // The cap and its notice; the 90,000 events after the tenth batch did not grow the database.
    expect(held.events).toBe(2_001);
    expect(held.bytes).toBeLessThanOrEqual(1024 * 1024);
    expect((await databaseBytes()) - atCap).toBeLessThan(256 * 1024);

    // The other user's job, meanwhile and after, stores normally.
    expect((await post("b", normal, logs(500))).body).toMatchObject({ stored: 500, dropped: 0 });

    // The end still stored past the cap; the job says what was dropped, and so does its log when it ends.
    expect((await post("a", flood, [{ type: "training.completed", title: "Training completed" }])).body).toMatchObject({
      stored: 1,
      dropped: 0,
    });
    expect((await finish("a", flood)).status).toBe(200);
    // The summary comes with the job's end (its events hub), just after the answer.
    const events = await until("the summary", async () => {
      const all = await allEvents(flood);
      return all.at(-1)?.type === "events.summary" && all;
    });
    const notices = events.filter((e) => e.type === "events.truncated");
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatchObject({ index: 2_000, data: { reason: "job_events", stored_events: 2_000, max_events_per_job: 2_000 } });
    expect(events.slice(-2).map((e) => e.type)).toEqual(["training.completed", "events.summary"]);
    expect(events.at(-1)).toMatchObject({ data: { dropped_events: 98_000, stored_events: 2_002 } });
    const status = await call("GET", `/api/training/status?job_id=${flood}`, users.rita!.key);
    expect(status).toMatchObject({ status: "completed", events: 2_003, events_dropped: 98_000, events_bytes: (await stored(flood)).bytes });

    const other = await allEvents(normal);
    expect(other).toHaveLength(1_000);
    expect(other.filter((e) => e.type.startsWith("events."))).toEqual([]);
    expect(await call("GET", `/api/training/status?job_id=${normal}`, users.oscar!.key)).toMatchObject({
      events: 1_000,
      events_dropped: 0,
    });
    expect((await finish("b", normal)).status).toBe(200);
  });

  it("keeps lifecycle events past the cap only up to a reserve: a flood of them is bounded too", async () => {
    await setLimits({ max_events_per_job: 100, max_bytes_per_job: 1024 * 1024 });
    const job = await running("rita", "a");
    let taken = 0;
    for (let batch = 0; batch < 6; batch++) {
      const reply = await post(
        "a",
        job,
        Array.from({ length: 500 }, (_, i) => ({ type: "checkpoint.saved", data: { path: `output/checkpoint-${batch * 500 + i}` } })),
      );
      expect(reply.status).toBe(200);
      taken += reply.body.stored;
    }
    // The cap, then the reserve (the notice takes one place of it).
    expect(taken).toBe(100 + RESERVE_EVENTS - 1);
    expect((await stored(job)).events).toBe(100 + RESERVE_EVENTS);
    expect((await finish("a", job)).status).toBe(200);
  });

  it("holds a running job's next batch to a cap lowered since its last one", async () => {
    // Consecutive batches of one runner are planned from the log as the last one left it (one
    // round trip): a change of the limits in between must still count.
    await setLimits({ max_events_per_job: 1_000, max_bytes_per_job: 1024 * 1024 });
    const job = await running("una", "b");
    expect((await post("b", job, logs(10))).body).toMatchObject({ stored: 10, dropped: 0 });
    expect((await post("b", job, logs(10))).body).toMatchObject({ stored: 10, dropped: 0 });
    await setLimits({ max_events_per_job: 25, max_bytes_per_job: 1024 * 1024 });
    expect((await post("b", job, logs(10))).body).toMatchObject({ stored: 5, dropped: 5 });
    expect((await stored(job)).events).toBe(26); // 25 and the notice
    await setLimits({ max_events_per_job: 1_000, max_bytes_per_job: 1024 * 1024 });
    expect((await finish("b", job)).status).toBe(200);
  });

  it("answers a resent batch past the cap as taken, storing nothing twice", async () => {
    await setLimits({ max_events_per_job: 10, max_bytes_per_job: 1024 * 1024 });
    const job = await running("oscar", "a");
    const batch = { attempt: 1, events: logs(20).map((event, seq) => ({ seq, event })) };
    const send = () => t.call("POST", `/api/workers/jobs/${job}/events`, { json: batch, auth: { bearer: workers.a!.token } });
    expect((await send()).body).toMatchObject({ stored: 10, dropped: 10 });
    expect((await send()).status).toBe(200);
    expect((await stored(job)).events).toBe(11);
    expect((await allEvents(job)).filter((e) => e.type === "events.gap" || e.type === "events.truncated")).toHaveLength(1);
    expect((await finish("a", job)).status).toBe(200);
  });
});

describe("a user's event quota", () => {
  it("stops storing a user's jobs' events at their quota, saying so in each, while another user's jobs store", async () => {
    await setLimits({ ...EVENT_LIMITS_DEFAULTS, max_bytes_per_user: 100_000 });
    const line = "x".repeat(200);
    const first = await running("una", "a");
    for (let i = 0; i < 3; i++) expect((await post("a", first, logs(200, line))).status).toBe(200);
    const held = await stored(first);
    expect(held.bytes).toBeLessThanOrEqual(100_000 + 1024);
    expect((await allEvents(first)).find((e) => e.type === "events.truncated")).toMatchObject({ data: { reason: "user_bytes" } });
    expect((await finish("a", first)).status).toBe(200);

    // Her next job starts over the quota: nothing but lifecycle events, and the notice.
    const second = await running("una", "a");
    expect((await post("a", second, logs(100, line))).body).toMatchObject({ stored: 0, dropped: 100 });
    expect((await post("a", second, [{ type: "training.completed" }])).body).toMatchObject({ stored: 1, dropped: 0 });
    expect((await allEvents(second)).map((e) => [e.type, e.data?.reason])).toEqual([
      ["events.truncated", "user_bytes"],
      ["training.completed", undefined],
    ]);
    expect((await finish("a", second)).status).toBe(200);

    // Another user, the same use, well within their own quota.
    const his = await running("victor", "b");
    expect((await post("b", his, logs(200, line))).body).toMatchObject({ stored: 200, dropped: 0 });
    expect((await finish("b", his)).status).toBe(200);
    await setLimits(EVENT_LIMITS_DEFAULTS);
  });
});

describe("many running jobs of one user", () => {
  it("store batches posted to all of them at once, each event once, and keep the user's quota exact under them", async () => {
    await call("POST", "/api/queue/concurrency", admin.key, { max_concurrent: 30, user_max_concurrent: 20 });
    // A remote worker runs one job at a time: a box each.
    const boxes = Array.from({ length: 12 }, (_, i) => `many${i}`);
    for (const pool of boxes) {
      workers[pool] = await registerWorker(t, admin.key, `box-${pool}`, "remote", gpus, { pool });
    }
    const line = "x".repeat(200);

    // Well within the limits: four rounds of a batch to each of 12 jobs at once, every batch taken.
    users.quinn = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "quinn");
    const jobs: string[] = [];
    for (const pool of boxes) jobs.push(await running("quinn", pool));
    for (let round = 0; round < 4; round++) {
      const replies = await Promise.all(jobs.map((job, i) => post(boxes[i]!, job, logs(25, line))));
      expect(replies.map((r) => [r.status, r.body.stored])).toEqual(jobs.map(() => [200, 25]));
    }
    for (const [i, job] of jobs.entries()) {
      expect((await allEvents(job)).map((e) => e.index)).toEqual(Array.from({ length: 100 }, (_, i) => i));
      expect((await finish(boxes[i]!, job)).status).toBe(200);
    }

    // A quota reached while 12 jobs post at once: it fills to within one event, never past.
    const quota = 60_000;
    await setLimits({ ...EVENT_LIMITS_DEFAULTS, max_bytes_per_user: quota });
    users.wes = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "wes");
    const hers: string[] = [];
    for (const pool of boxes) hers.push(await running("wes", pool));
    for (let round = 0; round < 3; round++) {
      const replies = await Promise.all(hers.map((job, i) => post(boxes[i]!, job, logs(25, line))));
      expect(replies.map((r) => r.status)).toEqual(hers.map(() => 200));
    }
    const bytes = await database(async (db) => {
      const row = await db.execute({
        sql: `SELECT COALESCE(SUM(length(CAST(payload AS BLOB))), 0) AS bytes FROM job_events
              WHERE job_id IN (SELECT value FROM json_each(?)) AND type = 'log'`,
        args: [JSON.stringify(hers)],
      });
      return Number(row.rows[0]!.bytes);
    });
    expect(bytes).toBeLessThanOrEqual(quota);
    expect(bytes).toBeGreaterThan(quota - 300); // one event of these is about 250 bytes
    for (const [i, job] of hers.entries()) expect((await finish(boxes[i]!, job)).status).toBe(200);
    await setLimits(EVENT_LIMITS_DEFAULTS);
    await call("POST", "/api/queue/concurrency", admin.key, { max_concurrent: 5, user_max_concurrent: 10 });
  }, 120_000);
});

describe("retention of ended jobs' events", () => {
  it("deletes the events of a job that ended more than retention_days ago, never those of a running or recently ended job", async () => {
    const old = await running("oscar", "a");
    await post("a", old, logs(50));
    expect((await finish("a", old)).status).toBe(200);
    const recent = await running("oscar", "a");
    await post("a", recent, logs(50));
    expect((await finish("a", recent)).status).toBe(200);
    const live = await running("oscar", "a");
    await post("a", live, logs(50));
    // Ended 40 days ago; the running one started as long ago.
    const longAgo = new Date(Date.now() - 40 * 86_400_000).toISOString();
    await database(async (db) => {
      await db.execute({ sql: "UPDATE queue_entries SET completed_at = ? WHERE job_id = ?", args: [longAgo, old] });
      await db.execute({ sql: "UPDATE queue_entries SET started_at = ?, queued_at = ? WHERE job_id = ?", args: [longAgo, longAgo, live] });
    });
    // The Scheduler's sweep (every 5 s) deletes them, with what they counted.
    await until("the old job's events to go", async () => (await stored(old)).events === 0, { timeoutMs: 15_000, everyMs: 250 });
    expect(await allEvents(old)).toEqual([]);
    expect((await call("GET", `/api/training/status?job_id=${old}`, users.oscar!.key)).events_bytes).toBe(0);
    expect((await stored(recent)).events).toBe(50);
    expect((await stored(live)).events).toBe(50);
    expect((await post("a", live, logs(1))).body).toMatchObject({ stored: 1 });
    expect((await finish("a", live)).status).toBe(200);
  });
});

describe("the event limits setting", () => {
  it("is read and changed by admins only, field by field, checked, and audited", async () => {
    const path = "/api/admin/event-limits";
    expect((await t.call("GET", path, { auth: { key: users.rita!.key } })).status).toBe(403);
    expect((await t.call("PUT", path, { json: { retention_days: 1 }, auth: { key: users.rita!.key } })).status).toBe(403);
    expect(await call("GET", path, admin.key)).toEqual(EVENT_LIMITS_DEFAULTS);
    for (const bad of [{ retention_days: 0 }, { max_events_per_job: -1 }, { max_bytes_per_job: 1.5 }, { unknown: 1 }])
      expect((await t.call("PUT", path, { json: bad, auth: { key: admin.key } })).status, JSON.stringify(bad)).toBe(422);
    expect(await call("GET", path, admin.key)).toEqual(EVENT_LIMITS_DEFAULTS);
    expect(await call("PUT", path, admin.key, { retention_days: 90 })).toEqual({ ...EVENT_LIMITS_DEFAULTS, retention_days: 90 });
    expect(await call("GET", path, admin.key)).toEqual({ ...EVENT_LIMITS_DEFAULTS, retention_days: 90 });
    await until("the audit entry", async () => {
      const entries = (await call("GET", "/api/audit?event_type=event_limits_changed", admin.key)).entries as any[];
      return entries.some((e) => e.details.after?.retention_days === 90);
    });
    await setLimits(EVENT_LIMITS_DEFAULTS);
  });
});

describe("admitEvents", () => {
  const limits = { max_events_per_job: 3, max_bytes_per_job: 1000, max_bytes_per_user: 10_000, retention_days: 30 };
  const log = { type: "log", bytes: 100 };
  const end = { type: "training.completed", bytes: 50 };
  const fresh = { events: 0, bytes: 0, truncatedAt: null };

  it("stores everything within the caps", () => {
    expect(admitEvents(fresh, 0, limits, [log, log, end])).toEqual({
      stored: [true, true, true],
      truncation: null,
      dropped: { events: 0, bytes: 0 },
    });
  });

  it("truncates at the event cap with one notice, then keeps lifecycle events and drops the rest", () => {
    const plan = admitEvents(fresh, 0, limits, [log, log, log, log, end, log]);
    expect(plan.stored).toEqual([true, true, true, false, true, false]);
    expect(plan.truncation).toMatchObject({
      before: 3,
      at: { events: 3, bytes: 300 },
      event: { type: "events.truncated", data: { reason: "job_events" } },
    });
    expect(plan.dropped).toEqual({ events: 2, bytes: 200 });
  });

  it("names the byte cap and the user quota when they are what is reached", () => {
    expect(admitEvents(fresh, 0, limits, [{ type: "log", bytes: 1001 }]).truncation?.event).toMatchObject({
      data: { reason: "job_bytes" },
    });
    expect(admitEvents(fresh, 9_950, limits, [log]).truncation?.event).toMatchObject({ data: { reason: "user_bytes", user_bytes: 9_950 } });
    // A job without an owner is under no user quota.
    expect(admitEvents(fresh, null, limits, [log]).stored).toEqual([true]);
  });

  it("gives a log truncated before no second notice, and lifecycle events only up to the reserve", () => {
    const truncated = { events: 3, bytes: 300, truncatedAt: { events: 3, bytes: 300 } };
    expect(admitEvents(truncated, 0, limits, [log, end])).toEqual({
      stored: [false, true],
      truncation: null,
      dropped: { events: 1, bytes: 100 },
    });
    const full = { events: 3 + RESERVE_EVENTS, bytes: 300, truncatedAt: { events: 3, bytes: 300 } };
    expect(admitEvents(full, 0, limits, [end]).stored).toEqual([false]);
  });
});
