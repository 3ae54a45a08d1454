import { eq, getTableColumns, sql } from "drizzle-orm";
import type { z } from "@hono/zod-openapi";
import type { Worker, WorkerHeartbeat, WorkerRegister } from "../../shared/schemas/workers";
import { constantTimeEqual, randomToken, sha256Hex } from "../auth/crypto";
import type { Database } from "../db/client";
import { compileSelect, queryBuilder } from "../db/compiled";
import { isUniqueViolation } from "../db/errors";
import { workers } from "../db/schema";
import { ApiError, conflict, notFound } from "../errors";

/*
 * GPU boxes and remote workers. An admin creates a worker and receives its token once
 * (`stw_` + 43 random characters, stored as SHA-256, found by its first 12 characters); the
 * runner on the box registers with its inventory and then heartbeats. Statuses: connecting
 * (created, never registered), IDLE, busy (running a job; the local box: running any), draining
 * (takes no new jobs), offline (silent past the heartbeat timeout; set by the Scheduler).
 * A job's end and a worker's removal are job transitions: edge/jobs/lifecycle/.
 */

export const WORKER_TOKEN_PREFIX = "stw_";
const PREFIX_LENGTH = 12;
/** How often runners are asked to heartbeat. */
export const HEARTBEAT_INTERVAL_SECONDS = 15;

type WorkerRow = typeof workers.$inferSelect;

function toWorker(row: WorkerRow, running: string[]): Worker {
  const gpus = JSON.parse(row.gpus) as Worker["gpus"];
  return {
    id: row.id,
    name: row.name,
    role: row.role === "local" ? "local" : "remote",
    status: row.status as Worker["status"],
    gpu_name: gpus[0]?.name ?? null,
    gpu_count: gpus.length,
    gpus,
    labels: JSON.parse(row.labels) as Record<string, string>,
    hostname: row.hostname,
    created_at: row.createdAt,
    registered_at: row.registeredAt,
    last_heartbeat: row.lastHeartbeat,
    current_job: running[0] ?? null,
    running_jobs: running,
    trainers: row.trainers === null ? null : (JSON.parse(row.trainers) as Worker["trainers"]),
    running_trainers: row.runningTrainers === null ? null : (JSON.parse(row.runningTrainers) as Worker["running_trainers"]),
  };
}

/** A fresh worker token, with the lookup prefix and the hash that are stored instead of it. */
export async function newWorkerToken(): Promise<{ token: string; prefix: string; hash: string }> {
  const token = WORKER_TOKEN_PREFIX + randomToken(32);
  return { token, prefix: token.slice(0, PREFIX_LENGTH), hash: await sha256Hex(token) };
}

/** Creates a worker in status `connecting`; the returned token is never shown again. */
export async function createWorker(db: Database, name: string): Promise<Worker & { token: string }> {
  const { token, prefix, hash } = await newWorkerToken();
  try {
    const [row] = await db
      .insert(workers)
      .values({ name, tokenPrefix: prefix, tokenHash: hash, createdAt: new Date().toISOString() })
      .returning();
    return { ...toWorker(row!, []), token };
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict(`A worker named ${name} already exists`);
    throw error;
  }
}

// Compiled once: every runner request (an event batch, a heartbeat) looks its token up, and
// building the select was an eighth of workerd's CPU under bench:followers' event feed.
const workerByPrefix = compileSelect<WorkerRow>(
  queryBuilder
    .select()
    .from(workers)
    .where(eq(workers.tokenPrefix, sql.placeholder("prefix"))),
  Object.keys(getTableColumns(workers)) as (keyof WorkerRow)[],
);

/** The worker a token belongs to, or null. */
export async function findWorkerByToken(db: Database, token: string): Promise<WorkerRow | null> {
  if (!token.startsWith(WORKER_TOKEN_PREFIX) || token.length < PREFIX_LENGTH + 8) return null;
  const [row] = await workerByPrefix(db, { prefix: token.slice(0, PREFIX_LENGTH) });
  if (!row || !constantTimeEqual(await sha256Hex(token), row.tokenHash)) return null;
  return row;
}

async function runningJobs(db: Database): Promise<Map<number, string[]>> {
  const rows = await db.$client.execute(
    "SELECT worker_id, job_id FROM queue_entries WHERE status = 'running' AND worker_id IS NOT NULL ORDER BY started_at, id",
  );
  const byWorker = new Map<number, string[]>();
  for (const r of rows.rows) byWorker.set(Number(r.worker_id), [...(byWorker.get(Number(r.worker_id)) ?? []), String(r.job_id)]);
  return byWorker;
}

export async function listWorkers(db: Database): Promise<Worker[]> {
  const [rows, running] = await Promise.all([db.select().from(workers).orderBy(workers.id), runningJobs(db)]);
  return rows.map((row) => toWorker(row, running.get(row.id) ?? []));
}

/**
 * Records a (re-)registration: inventory, labels, role. A worker that comes back keeps the jobs
 * still running on it; a fresh one starts IDLE. At most one worker may be the local box.
 */
export async function registerWorker(db: Database, worker: WorkerRow, body: z.infer<typeof WorkerRegister>): Promise<Worker> {
  const now = new Date().toISOString();
  try {
    await db.$client.execute({
      sql: `UPDATE workers SET role = ?, labels = ?, gpus = ?, hostname = ?, host_stats = ?, registered_at = ?, last_heartbeat = ?,
              status = CASE WHEN EXISTS (SELECT 1 FROM queue_entries WHERE worker_id = ?8 AND status = 'running') THEN 'busy' ELSE 'IDLE' END,
              idle_since = ?6, trainers = ?9
            WHERE id = ?8`,
      args: [
        body.role,
        JSON.stringify(body.labels),
        JSON.stringify([...body.gpus].sort((a, b) => a.index - b.index)),
        body.hostname ?? null,
        body.host_stats ? JSON.stringify(body.host_stats) : null,
        now,
        now,
        worker.id,
        body.trainers ? JSON.stringify(body.trainers) : null,
      ],
    });
  } catch (error) {
    if (isUniqueViolation(error))
      throw new ApiError(
        409,
        "local_box_taken",
        "Another worker is already registered as this service's local box; register this one with role remote",
      );
    throw error;
  }
  return (await listWorkers(db)).find((w) => w.id === worker.id)!;
}

/** A heartbeat: the worker is alive (an offline one comes back), optionally draining. */
export async function heartbeat(
  db: Database,
  worker: WorkerRow,
  body: z.infer<typeof WorkerHeartbeat>,
): Promise<{ status: Worker["status"]; cameBack: boolean }> {
  if (worker.status === "connecting") throw new ApiError(409, "not_registered", "Register first: POST /api/workers/register");
  const now = new Date().toISOString();
  const result = await db.$client.execute({
    sql: `UPDATE workers SET last_heartbeat = ?1, host_stats = COALESCE(?2, host_stats),
            status = CASE
              WHEN ?3 = 1 THEN 'draining'
              WHEN ?3 IS NULL AND status = 'draining' THEN 'draining'
              WHEN EXISTS (SELECT 1 FROM queue_entries WHERE worker_id = ?4 AND status = 'running') THEN 'busy'
              ELSE 'IDLE' END,
            idle_since = CASE WHEN status = 'IDLE' THEN idle_since ELSE ?1 END,
            running_trainers = COALESCE(?5, running_trainers)
          WHERE id = ?4 RETURNING status`,
    args: [
      now,
      body.host_stats ? JSON.stringify(body.host_stats) : null,
      body.draining === undefined ? null : body.draining ? 1 : 0,
      worker.id,
      body.running ? JSON.stringify(body.running) : null,
    ],
  });
  return { status: String(result.rows[0]!.status) as Worker["status"], cameBack: worker.status === "offline" };
}

/** The running jobs the scheduler has given a worker (what its runner should be running). */
export async function assignmentsOf(db: Database, workerId: number) {
  const rows = await db.$client.execute({
    // The configuration snapshotted at submit, never the live environment: editing or deleting
    // the environment afterwards cannot change what a submitted job runs.
    sql: `SELECT q.job_id, q.config_name, q.allocated_gpus, q.num_processes, q.attempt, q.config_snapshot AS config, q.dataloader_snapshot AS dataloader,
            q.resume_from
          FROM queue_entries q
          WHERE q.worker_id = ? AND q.status = 'running' ORDER BY q.started_at, q.id`,
    args: [workerId],
  });
  return rows.rows.map((r) => ({
    job_id: String(r.job_id),
    config_name: r.config_name === null ? null : String(r.config_name),
    config: r.config === null ? {} : (JSON.parse(String(r.config)) as Record<string, unknown>),
    dataloader: r.dataloader === null || r.dataloader === undefined ? [] : (JSON.parse(String(r.dataloader)) as Record<string, unknown>[]),
    allocated_gpus: r.allocated_gpus === null ? null : (JSON.parse(String(r.allocated_gpus)) as number[]),
    num_processes: Number(r.num_processes),
    attempt: Number(r.attempt),
    ...(r.resume_from === null || r.resume_from === undefined
      ? {}
      : { resume_from: JSON.parse(String(r.resume_from)) as { job_id: string; path: string; step: number | null }[] }),
  }));
}

/**
 * Gives a worker a new token and forgets the old one, which is refused from the next request
 * on. The new token is returned once, like at creation.
 *
 * @example
 * const { token } = await rotateWorkerToken(db, 3);
 */
export async function rotateWorkerToken(db: Database, workerId: number): Promise<Worker & { token: string }> {
  const { token, prefix, hash } = await newWorkerToken();
  const [row] = await db.update(workers).set({ tokenPrefix: prefix, tokenHash: hash }).where(eq(workers.id, workerId)).returning();
  if (!row) throw notFound(`Worker ${workerId}`);
  const running = (await runningJobs(db)).get(workerId) ?? [];
  return { ...toWorker(row, running), token };
}
