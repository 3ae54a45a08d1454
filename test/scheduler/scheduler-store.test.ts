// The Scheduler's writes (the submit and admit transitions, the local box's status) against the
// real schema (migrated), through the same libSQL client and Hrana bridge the stack uses.
import { createClient as createFileClient } from "@libsql/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../edge/db/client";
import { admitJobs } from "../../edge/jobs/lifecycle/admit";
import { writeBatch } from "../../edge/jobs/lifecycle/batch";
import { submitJobs } from "../../edge/jobs/lifecycle/submit";
import { requeueOrFail } from "../../edge/jobs/lifecycle/requeue-or-fail";
import {
  loadCapacity,
  loadEntries,
  loadRecentRuns,
  localBoxStatus,
  needsRecentRuns,
  planInput,
  readForSubmissions,
} from "../../edge/scheduler/store";
import type { NewJob } from "../../edge/jobs/job";
import { openMigratedDb, type MigratedDb } from "../helpers/migrated-db";

const admissionStatements = (...args: Parameters<typeof admitJobs>) => admitJobs(...args).statements;

let migrated: MigratedDb;
let client: MigratedDb["client"];
let dbPath: string;
let db: Database;

beforeAll(async () => {
  migrated = await openMigratedDb();
  client = migrated.client;
  dbPath = migrated.path;
  db = { $client: client } as unknown as Database;
  await client.execute(
    "INSERT INTO workers (name, role, status, token_prefix, token_hash, created_at) VALUES ('far', 'remote', 'IDLE', 'stw_x', 'h', '2026-01-01')",
  );
  const rows = Array.from({ length: 2000 }, (_, i) => ({
    sql: "INSERT INTO queue_entries (job_id, user_id, priority, status, queued_at, job_type) VALUES (?, 1, 10, 'pending', '2026-01-01T00:00:00Z', 'local')",
    args: [`job-${i + 1}`],
  }));
  await client.batch(rows, "write");
});
afterAll(() => migrated.close());

it("starts only the admitted jobs still pending, each with its own GPUs or worker, in one statement", async () => {
  await client.execute("UPDATE queue_entries SET status = 'cancelled' WHERE id = 2");
  const statements = admissionStatements(
    [
      { id: 1, jobId: "job-1", gpus: [0, 1], workerId: null },
      { id: 2, jobId: "job-2", gpus: [2], workerId: null },
      { id: 3, jobId: "job-3", gpus: [], workerId: null },
      { id: 4, jobId: "job-4", gpus: null, workerId: 1 },
    ],
    7,
    "2026-02-02T00:00:00.000Z",
  );
  expect(statements).toHaveLength(2); // the admissions, then the one remote worker taken
  const [admitted] = await client.batch(statements, "write");
  expect(admitted!.rows.map((r) => Number(r.admitted_id)).sort()).toEqual([1, 3, 4]);
  const rows = await client.execute(
    "SELECT id, status, allocated_gpus, worker_id, started_at FROM queue_entries WHERE id <= 5 ORDER BY id",
  );
  expect(rows.rows.map((r) => [r.id, r.status, r.allocated_gpus, r.worker_id, r.started_at])).toEqual([
    [1, "running", "[0,1]", 7, "2026-02-02T00:00:00.000Z"],
    [2, "cancelled", null, null, null],
    [3, "running", "[]", 7, "2026-02-02T00:00:00.000Z"],
    [4, "running", null, 1, "2026-02-02T00:00:00.000Z"],
    [5, "pending", null, null, null],
  ]);
  expect((await client.execute("SELECT status FROM workers WHERE id = 1")).rows[0]!.status).toBe("busy");
  // A second pass over the same admissions changes nothing: none is pending any more.
  const [again] = await client.batch(
    admissionStatements([{ id: 1, jobId: "job-1", gpus: [3], workerId: null }], 7, "2026-03-03T00:00:00.000Z"),
    "write",
  );
  expect(again!.rows).toHaveLength(0);
});

it("admits hundreds at once without walking the pending entries for each", async () => {
  const many = Array.from({ length: 500 }, (_, i) => ({ id: 1000 + i, jobId: `job-${1000 + i}`, gpus: [], workerId: null }));
  // The plan is read on a connection of its own: libsql leaves an EXPLAIN of a write with
  // RETURNING "in progress", and the bridge's connection could then not commit.
  const side = createFileClient({ url: `file:${dbPath}` });
  const plan = await side.execute({
    sql: `EXPLAIN QUERY PLAN ${String((admissionStatements(many, 7, "now")[0] as { sql: string }).sql)}`,
    args: ["now", "[]"],
  });
  side.close();
  expect(plan.rows.map((r) => String(r.detail))).toContain("SEARCH queue_entries USING INTEGER PRIMARY KEY (rowid=?)");
  const [admitted] = await client.batch(admissionStatements(many, 7, "2026-02-02T00:00:00.000Z"), "write");
  expect(admitted!.rows).toHaveLength(500);
});

const newJob = (jobId: string, approvalRule: string | null = null): NewJob => ({
  jobId,
  userId: 1,
  teamId: null,
  priority: 10,
  configName: "env",
  estimatedCost: 0,
  metadata: null,
  approvalRule,
  configSnapshot: { "--num_processes": 2 },
  dataloaderSnapshot: [],
  jobType: "local",
  numProcesses: 2,
  target: "local",
  workerLabels: null,
  deviceIds: null,
  anyGpu: false,
});

const entry = async (jobId: string) => {
  const sql =
    "SELECT id, status, allocated_gpus, worker_id, started_at, requires_approval, approval_id FROM queue_entries WHERE job_id = ?";
  return (await client.execute({ sql, args: [jobId] })).rows[0];
};
const workerStatus = async (name: string) =>
  (await client.execute({ sql: "SELECT status FROM workers WHERE name = ?", args: [name] })).rows[0]!.status;
const addWorker = async (name: string, role: "local" | "remote") => {
  const sql =
    "INSERT INTO workers (name, role, status, token_prefix, token_hash, created_at) VALUES (?, ?, 'IDLE', ?, 'h', '2026-01-01') RETURNING id";
  return Number((await client.execute({ sql, args: [name, role, `stw_${name}`] })).rows[0]!.id);
};

it("does not start, mark busy or report an admitted job that was cancelled meanwhile", async () => {
  const far2 = await addWorker("far-2", "remote");
  await client.execute("UPDATE queue_entries SET status = 'cancelled' WHERE job_id = 'job-1601'");
  const [admitted] = await writeBatch(db, [
    admitJobs(
      [
        { id: 1600, jobId: "job-1600", gpus: [5], workerId: null },
        { id: 1601, jobId: "job-1601", gpus: null, workerId: far2 },
      ],
      7,
      "2026-04-04T00:00:00.000Z",
    ),
  ]);
  expect([...admitted.started]).toEqual([1600]);
  expect(admitted.change).toEqual({ jobs: [{ jobId: "job-1600", from: "pending", to: "running", workerId: 7 }] });
  expect(await entry("job-1601")).toMatchObject({ status: "cancelled", allocated_gpus: null, worker_id: null, started_at: null });
  expect(await workerStatus("far-2")).toBe("IDLE");
});

it("does not start an admitted job on a GPU quarantined since the pass read the capacity; a cleared one it does", async () => {
  // Local box 7's GPU 3 is quarantined after the plan gave it to job-1602; GPU 4 of another box is out too.
  await client.execute(
    "INSERT INTO gpu_quarantines (worker_id, gpu_index, reason, since) VALUES (7, 3, 'Xid 79 in the kernel log', '2026-04-05'), (8, 4, 'x', '2026-04-05')",
  );
  const admit = () =>
    writeBatch(db, [
      admitJobs(
        [
          { id: 1602, jobId: "job-1602", gpus: [2, 3], workerId: null },
          { id: 1603, jobId: "job-1603", gpus: [4], workerId: null },
        ],
        7,
        "2026-04-05T00:00:00.000Z",
      ),
    ]);
  const [admitted] = await admit();
  expect([...admitted.started]).toEqual([1603]); // GPU 4 is out on box 8, not on this one
  expect(await entry("job-1602")).toMatchObject({ status: "pending", allocated_gpus: null, worker_id: null, started_at: null });
  await client.execute("UPDATE gpu_quarantines SET cleared_at = '2026-04-06', cleared_by = 'admin' WHERE worker_id = 7");
  const [again] = await admit();
  expect([...again.started]).toEqual([1602]);
  expect(await entry("job-1602")).toMatchObject({ status: "running", allocated_gpus: "[2,3]", worker_id: 7 });
});

it("stores a submission group as decided: one blocked with its approval request, one running, one pending", async () => {
  const box = await addWorker("box", "local");
  const stamp = "2026-05-05T00:00:00.000Z";
  const [submitted, admitted] = await writeBatch(db, [
    submitJobs(
      [
        { job: newJob("new-blocked", "asks for 2 GPUs; more than 1 needs approval"), to: "blocked" },
        { job: newJob("new-running"), to: "running", admission: { gpus: [0, 1], workerId: null } },
        { job: newJob("new-pending"), to: "pending" },
      ],
      box,
      stamp,
    ),
    admitJobs([], box, stamp),
    localBoxStatus(box),
  ]);
  const [blocked, running, pending] = submitted.stored;
  expect(running!.id).toBe(blocked!.id + 1); // inserted in arrival order
  expect(pending!.id).toBe(running!.id + 1);
  expect(await entry("new-blocked")).toMatchObject({
    id: blocked!.id,
    status: "blocked",
    started_at: null,
    requires_approval: 1,
    approval_id: blocked!.approvalId,
  });
  expect(await entry("new-running")).toMatchObject({
    id: running!.id,
    status: "running",
    allocated_gpus: "[0,1]",
    worker_id: box,
    started_at: stamp,
    approval_id: null,
  });
  expect(await entry("new-pending")).toMatchObject({
    id: pending!.id,
    status: "pending",
    allocated_gpus: null,
    worker_id: null,
    started_at: null,
    approval_id: null,
  });
  expect([running!.approvalId, pending!.approvalId]).toEqual([null, null]);
  const requests = await client.execute("SELECT id, entry_id, job_id, rule, status FROM approval_requests WHERE job_id LIKE 'new-%'");
  expect(requests.rows.map((r) => [r.id, r.entry_id, r.job_id, r.rule, r.status])).toEqual([
    [blocked!.approvalId, blocked!.id, "new-blocked", "asks for 2 GPUs; more than 1 needs approval", "pending"],
  ]);
  expect(submitted.change).toEqual({
    jobs: [
      { jobId: "new-blocked", from: null, to: "blocked", workerId: null },
      { jobId: "new-running", from: null, to: "running", workerId: box },
      { jobId: "new-pending", from: null, to: "pending", workerId: null },
    ],
  });
  expect(admitted.change.jobs).toEqual([]);
  expect(await workerStatus("box")).toBe("busy");
});

it("marks a remote worker busy for a submission that starts on it", async () => {
  const far3 = await addWorker("far-3", "remote");
  const submission = { job: newJob("new-remote"), to: "running" as const, admission: { gpus: null, workerId: far3 } };
  const [submitted] = await writeBatch(db, [submitJobs([submission], null, "2026-05-05T00:00:00.000Z")]);
  expect(await entry("new-remote")).toMatchObject({ status: "running", allocated_gpus: null, worker_id: far3 });
  expect(submitted.change.jobs).toEqual([{ jobId: "new-remote", from: null, to: "running", workerId: far3 }]);
  expect(await workerStatus("far-3")).toBe("busy");
});

it("stores nothing of a pass whose batch fails: a submission reusing a stored job id takes its whole group and the admissions with it", async () => {
  const before = (await client.execute("SELECT count(*) AS n FROM queue_entries")).rows[0]!.n;
  const failing = writeBatch(db, [
    submitJobs(
      [
        { job: newJob("new-fine"), to: "pending" },
        { job: newJob("job-5"), to: "pending" },
      ],
      null,
      "2026-06-06T00:00:00.000Z",
    ),
    admitJobs([{ id: 6, jobId: "job-6", gpus: [0], workerId: null }], 7, "2026-06-06T00:00:00.000Z"),
  ]);
  await expect(failing).rejects.toThrow(/UNIQUE/);
  expect((await client.execute("SELECT count(*) AS n FROM queue_entries")).rows[0]!.n).toBe(before);
  expect(await entry("new-fine")).toBeUndefined();
  expect(await entry("job-6")).toMatchObject({ status: "pending", started_at: null });
});

it("writes nothing and makes no round trip for an empty pass", async () => {
  const calls: unknown[] = [];
  const batch = (...args: Parameters<typeof client.batch>) => (calls.push(args), client.batch(...args));
  const counting = { $client: { batch } } as unknown as Database;
  const [submitted, admitted] = await writeBatch(counting, [submitJobs([], null, "x"), admitJobs([], null, "x"), localBoxStatus(null)]);
  expect(calls).toHaveLength(0);
  expect([submitted.stored, submitted.change.jobs, [...admitted.started], admitted.change.jobs]).toEqual([[], [], [], []]);
});

describe("expected ends and run times (issue 17)", () => {
  const stamp = "2026-07-07T00:00:00.000Z";
  const at = (minutes: number) => new Date(Date.parse(stamp) + minutes * 60_000).toISOString();
  const estimates = async (jobId: string) =>
    (
      await client.execute({
        sql: "SELECT status, expected_end_at, expected_end_method, progress_rate FROM queue_entries WHERE job_id = ?",
        args: [jobId],
      })
    ).rows[0];

  it("stores each admitted job's expected end from its start, and none for a job without one", async () => {
    const ends = new Map([[1700, { at: Date.parse(at(90)), method: "max_runtime" as const }]]);
    await client.execute("UPDATE queue_entries SET progress_rate = '{\"step\":1}' WHERE id = 1700");
    await writeBatch(db, [
      admitJobs(
        [
          { id: 1700, jobId: "job-1700", gpus: [0], workerId: null },
          { id: 1701, jobId: "job-1701", gpus: [1], workerId: null },
        ],
        7,
        stamp,
        ends,
      ),
    ]);
    expect(await estimates("job-1700")).toMatchObject({
      status: "running",
      expected_end_at: at(90),
      expected_end_method: "max_runtime",
      progress_rate: null,
    });
    expect(await estimates("job-1701")).toMatchObject({ status: "running", expected_end_at: null, expected_end_method: null });
  });

  it("stores a submission that starts at once with the end its max runtime or cloud allowance gives, and a waiting one with none", async () => {
    const timed = { ...newJob("est-timed"), configSnapshot: { "--max_runtime_minutes": "30" } };
    const cloud: NewJob = { ...newJob("est-cloud"), jobType: "cloud", numProcesses: 0, cloudSeconds: 3600, provider: "replicate" };
    await writeBatch(db, [
      submitJobs(
        [
          { job: timed, to: "running", admission: { gpus: [2], workerId: null } },
          { job: cloud, to: "running", admission: { gpus: null, workerId: null } },
          { job: { ...timed, jobId: "est-waiting" }, to: "pending" },
        ],
        7,
        stamp,
      ),
    ]);
    expect(await estimates("est-timed")).toMatchObject({ expected_end_at: at(30), expected_end_method: "max_runtime" });
    expect(await estimates("est-cloud")).toMatchObject({ expected_end_at: at(60), expected_end_method: "cost_cap" });
    expect(await estimates("est-waiting")).toMatchObject({ status: "pending", expected_end_at: null, expected_end_method: null });
  });

  it("sends a retried job back to the queue without its expected end or step rate", async () => {
    await client.execute(
      `UPDATE queue_entries SET status = 'running', worker_id = 1, expected_end_at = '${at(5)}', expected_end_method = 'progress',
       progress_rate = '{"step":5,"total":10,"at":1,"msPerStep":1}' WHERE job_id = 'job-1800'`,
    );
    await client.execute(requeueOrFail({ jobId: "job-1800", workerId: 1, why: "the runner restarted" }, stamp));
    expect(await estimates("job-1800")).toEqual({
      status: "pending",
      expected_end_at: null,
      expected_end_method: null,
      progress_rate: null,
    });
  });

  it("reads what the planner's estimates need: the snapshot's max runtime, running ends as stored now, recent runs of the environment", async () => {
    const now = new Date();
    const ago = (minutes: number) => new Date(now.getTime() - minutes * 60_000).toISOString();
    const insert = (jobId: string, status: string, more: Record<string, string | number>) => {
      const fields = {
        job_id: jobId,
        user_id: 1,
        status,
        queued_at: ago(600),
        job_type: "local",
        config_name: "est-env",
        num_processes: 2,
        ...more,
      };
      const names = Object.keys(fields);
      return client.execute({
        sql: `INSERT INTO queue_entries (${names.join(", ")}) VALUES (${names.map(() => "?").join(", ")})`,
        args: Object.values(fields),
      });
    };
    await insert("est-own", "pending", { config_snapshot: '{"--max_runtime_minutes":"45"}' });
    await insert("est-recent", "pending", { config_snapshot: '{"--max_runtime_minutes":"soon"}' });
    await insert("est-running", "running", { started_at: ago(5), expected_end_at: ago(-50), expected_end_method: "max_runtime" });
    await insert("est-done-1", "completed", { started_at: ago(100), completed_at: ago(90) });
    await insert("est-done-2", "completed", { started_at: ago(60), completed_at: ago(40) });
    await insert("est-done-old", "completed", { started_at: ago(31 * 1440 + 1000), completed_at: ago(31 * 1440) });
    await insert("est-other-gpus", "completed", { started_at: ago(30), completed_at: ago(29), num_processes: 1 });

    const { active } = await loadEntries(db, ["est-own", "est-recent", "est-running"]);
    // Progress moved the running job's end after the Scheduler read its entry: the capacity read has it.
    await client.execute({ sql: "UPDATE queue_entries SET expected_end_at = ? WHERE job_id = 'est-running'", args: [ago(-20)] });
    const input = planInput(active, await loadCapacity(db), now.getTime(), await loadRecentRuns(db, now));
    const pending = Object.fromEntries(input.pending.map((p) => [p.jobId, p.expectedMs]));
    expect(pending).toEqual({ "est-own": 45 * 60_000, "est-recent": 15 * 60_000 });
    const running = input.running.find((r) => r.id === active.find((e) => e.job.jobId === "est-running")!.job.id)!;
    expect(running.expectedEndAt).toBe(Date.parse(ago(-20)));
    expect(needsRecentRuns(active)).toBe(true);
    expect(needsRecentRuns(active.filter((e) => e.job.jobId !== "est-recent"))).toBe(false);
  });
});

describe("a cloud job's record", () => {
  const cloudJob = (jobId: string): NewJob => ({
    ...newJob(jobId),
    jobType: "cloud",
    numProcesses: 0,
    target: "auto",
    estimatedCost: 5.04,
    provider: "replicate",
    cloudSeconds: 3600,
    cloud: {
      provider: "replicate",
      hardware: "gpu-a40-large",
      ratePerSecond: 0.0014,
      expectedSeconds: 3600,
      destination: { type: "storage" },
      summary: { files: 1 },
      archiveBytes: 10,
    },
  });
  const count = async (table: string, jobId: string) =>
    Number((await client.execute({ sql: `SELECT count(*) AS n FROM ${table} WHERE job_id = ?`, args: [jobId] })).rows[0]!.n);

  it("is stored in the same write batch as the job, and not at all when the batch fails", async () => {
    const stamp = "2026-08-08T00:00:00.000Z";
    await writeBatch(db, [submitJobs([{ job: cloudJob("cloud-record-1"), to: "pending" }], 7, stamp)]);
    const row = (await client.execute("SELECT * FROM cloud_jobs WHERE job_id = 'cloud-record-1'")).rows[0]!;
    expect([
      row.provider,
      row.hardware,
      row.rate_usd_per_second,
      row.expected_seconds,
      row.destination,
      row.summary,
      row.archive_bytes,
    ]).toEqual(["replicate", "gpu-a40-large", 0.0014, 3600, '{"type":"storage"}', '{"files":1}', 10]);
    expect([row.created_at, row.updated_at]).toEqual([stamp, stamp]);
    // A batch that fails after the job's insert (here: its record exists already) stores neither.
    const again = cloudJob("cloud-record-2");
    await client.execute(
      "INSERT INTO cloud_jobs (job_id, provider, hardware, rate_usd_per_second, expected_seconds, destination, summary, archive_bytes, created_at, updated_at) VALUES ('cloud-record-2', 'replicate', 'h', 0, 0, '{}', '{}', 0, 'x', 'x')",
    );
    await expect(writeBatch(db, [submitJobs([{ job: again, to: "pending" }], 7, stamp)])).rejects.toThrow();
    expect(await count("queue_entries", "cloud-record-2")).toBe(0);
    expect(await count("cloud_jobs", "cloud-record-2")).toBe(1);
  });
});

describe("the capacity version", () => {
  const version = async () => (await readForSubmissions(db, false, [])).version;
  const moves = async (statement: string) => {
    const before = await version();
    await client.execute(statement);
    return (await version()) - before;
  };

  it("moves in the same statement as any change of limits, rules, environments or workers, and not otherwise", async () => {
    expect((await loadCapacity(db)).version).toBe(await version());
    const now = "'2026-09-09T00:00:00Z'";
    // Limits, approval rules, the local queue's pause, the cloud settings.
    expect(
      await moves(`INSERT INTO settings (key, value, updated_at) VALUES ('approval_rules', '{"local_gpu_threshold":2}', ${now})`),
    ).toBe(1);
    expect(await moves(`UPDATE settings SET value = '{"local_gpu_threshold":3}' WHERE key = 'approval_rules'`)).toBe(1);
    expect(await moves(`UPDATE settings SET updated_at = ${now} WHERE key = 'approval_rules'`)).toBe(0);
    expect(await moves(`DELETE FROM settings WHERE key = 'approval_rules'`)).toBe(1);
    expect(await moves(`INSERT INTO settings (key, value, updated_at) VALUES ('webhook_signing_secret', 's', ${now})`)).toBe(0);
    // Environments: created, their options or dataloader changed, renamed, deleted.
    expect(await moves(`INSERT INTO environments (name, created_at, updated_at) VALUES ('versioned', ${now}, ${now})`)).toBe(1);
    expect(await moves(`UPDATE environments SET config = '{"--num_processes":1}' WHERE name = 'versioned'`)).toBe(1);
    expect(await moves(`UPDATE environments SET description = 'x' WHERE name = 'versioned'`)).toBe(0);
    expect(await moves(`DELETE FROM environments WHERE name = 'versioned'`)).toBe(1);
    // Workers: registered, their status, labels or GPUs changed, removed; a heartbeat alone is no change.
    expect(
      await moves(
        "INSERT INTO workers (name, role, status, token_prefix, token_hash, created_at) VALUES ('versioned', 'remote', 'connecting', 'stw_v', 'h', '2026-01-01')",
      ),
    ).toBe(1);
    expect(await moves(`UPDATE workers SET last_heartbeat = ${now} WHERE name = 'versioned'`)).toBe(0);
    expect(await moves(`UPDATE workers SET status = 'draining', last_heartbeat = ${now} WHERE name = 'versioned'`)).toBe(1);
    expect(await moves(`UPDATE workers SET labels = '{"gpu":"a100"}' WHERE name = 'versioned'`)).toBe(1);
    expect(await moves(`DELETE FROM workers WHERE name = 'versioned'`)).toBe(1);
    // The local box between IDLE and busy, the Scheduler's own write as its first job starts or
    // its last ends: a plan reads the box only as online or not (migration v29). A remote worker
    // between the two still moves it (a plan reads whether it is idle), as does the box going offline.
    const box = Number((await client.execute("SELECT id FROM workers WHERE role = 'local'")).rows[0]!.id);
    const boxStatus = async () => {
      const before = await version();
      await writeBatch(db, [localBoxStatus(box)]);
      const status = (await client.execute({ sql: "SELECT status FROM workers WHERE id = ?", args: [box] })).rows[0]!.status;
      return { status, moved: (await version()) - before };
    };
    // Its running jobs set aside, then back: the box goes IDLE, then busy.
    const running = (
      await client.execute({
        sql: "UPDATE queue_entries SET worker_id = NULL WHERE worker_id = ? AND status = 'running' RETURNING id",
        args: [box],
      })
    ).rows.map((r) => Number(r.id));
    expect(running.length).toBeGreaterThan(0);
    expect(await boxStatus()).toEqual({ status: "IDLE", moved: 0 });
    await client.execute({ sql: `UPDATE queue_entries SET worker_id = ? WHERE id IN (${running.join(", ")})`, args: [box] });
    expect(await boxStatus()).toEqual({ status: "busy", moved: 0 });
    expect(await moves(`UPDATE workers SET status = 'offline' WHERE id = ${box}`)).toBe(1);
    expect(await moves(`UPDATE workers SET status = 'busy' WHERE id = ${box}`)).toBe(1);
    expect(await moves(`UPDATE workers SET labels = '{"rack":"2"}' WHERE id = ${box}`)).toBe(1);
    const flip = `UPDATE workers SET status = CASE status WHEN 'busy' THEN 'IDLE' ELSE 'busy' END WHERE name = 'far'`;
    expect(await moves(flip)).toBe(1);
    expect(await moves(flip)).toBe(1);
    // Jobs come and go without it: the Scheduler reads them itself.
    expect(await moves("UPDATE queue_entries SET priority = 11 WHERE id = 1999")).toBe(0);
  });
});
