import type { InStatement } from "@libsql/client/web";
import { and, eq, inArray, ne } from "drizzle-orm";
import type { ConcurrencySettings } from "../../shared/schemas/queue";
import type { Database } from "../db/client";
import { queueEntries, workers } from "../db/schema";
import { getSetting } from "../settings";
import type { Admission, PendingJob, PlanInput, RunningJob, WorkerView } from "./plan";

/*
 * The Scheduler DO's reads and writes. Reads build a plan's input from libSQL; writes apply a
 * plan as one batch of conditional statements, so a job cancelled meanwhile is simply not
 * started, and a crash leaves either the whole pass or none of it.
 */

export interface SchedulerState extends Omit<PlanInput, "now"> {
  limits: ConcurrencySettings;
  /** The local box's worker id, when one is registered. */
  localWorkerId: number | null;
}

export const ONLINE_STATUSES = ["IDLE", "busy", "draining"] as const;

const parseJson = <T>(text: string | null, fallback: T): T => (text ? (JSON.parse(text) as T) : fallback);

/** Everything a pass needs, read fresh. */
export async function loadState(db: Database): Promise<SchedulerState> {
  const [limits, pendingRows, runningRows, workerRows] = await Promise.all([
    getSetting(db, "concurrency"),
    db
      .select({
        id: queueEntries.id,
        jobId: queueEntries.jobId,
        userId: queueEntries.userId,
        teamId: queueEntries.teamId,
        priority: queueEntries.priority,
        priorityOverride: queueEntries.priorityOverride,
        queuedAt: queueEntries.queuedAt,
        jobType: queueEntries.jobType,
        numProcesses: queueEntries.numProcesses,
        target: queueEntries.target,
        workerLabels: queueEntries.workerLabels,
        deviceIds: queueEntries.deviceIds,
        anyGpu: queueEntries.anyGpu,
      })
      .from(queueEntries)
      .where(eq(queueEntries.status, "pending")),
    db
      .select({ id: queueEntries.id, userId: queueEntries.userId, teamId: queueEntries.teamId, jobType: queueEntries.jobType, allocatedGpus: queueEntries.allocatedGpus, workerId: queueEntries.workerId })
      .from(queueEntries)
      .where(eq(queueEntries.status, "running")),
    db.select().from(workers).where(ne(workers.status, "offline")),
  ]);
  const localBox = workerRows.find((w) => w.role === "local") ?? null;
  const localWorkerId = localBox?.id ?? null;
  const busyWorkers = new Set(runningRows.map((r) => r.workerId).filter((id) => id !== null));
  const pending: PendingJob[] = pendingRows.map((r) => ({
    ...r,
    queuedAt: Date.parse(r.queuedAt),
    jobType: r.jobType === "local" ? "local" : "cloud",
    target: r.target === "worker" || r.target === "local" ? r.target : "auto",
    workerLabels: parseJson<Record<string, string> | null>(r.workerLabels, null),
    deviceIds: parseJson<number[] | null>(r.deviceIds, null),
    anyGpu: r.anyGpu === 1,
  }));
  const running: RunningJob[] = runningRows.map((r) => ({
    id: r.id,
    userId: r.userId,
    teamId: r.teamId,
    jobType: r.jobType === "local" ? "local" : "cloud",
    allocatedGpus: parseJson<number[]>(r.allocatedGpus, []),
    workerId: r.workerId === localWorkerId ? null : r.workerId,
  }));
  const remote: WorkerView[] = workerRows
    .filter((w) => w.role !== "local" && w.status !== "connecting" && w.status !== "draining")
    .map((w) => ({
      id: w.id,
      labels: parseJson<Record<string, string>>(w.labels, {}),
      gpuCount: parseJson<unknown[]>(w.gpus, []).length,
      idle: w.status === "IDLE" && !busyWorkers.has(w.id),
      idleSince: Date.parse(w.idleSince ?? w.registeredAt ?? w.createdAt),
    }));
  const localOnline = localBox !== null && (localBox.status === "IDLE" || localBox.status === "busy");
  const localDevices = localOnline ? parseJson<{ index: number }[]>(localBox.gpus, []).map((g) => g.index) : null;
  return { limits, pending, running, localDevices, workers: remote, localWorkerId };
}

/** The statements that start the admitted jobs; each only if the job is still pending. */
export function admissionStatements(admitted: Admission[], localWorkerId: number | null, now: string): InStatement[] {
  const statements: InStatement[] = [];
  for (const a of admitted) {
    const workerId = a.workerId ?? (a.gpus !== null ? localWorkerId : null);
    statements.push({
      sql: `UPDATE queue_entries SET status = 'running', started_at = ?, allocated_gpus = ?, worker_id = ?, updated_at = ? WHERE id = ? AND status = 'pending'`,
      args: [now, a.gpus === null ? null : JSON.stringify(a.gpus), workerId, now, a.id],
    });
    if (a.workerId !== null) statements.push(workerBusyStatement(a.workerId, a.jobId));
  }
  return statements;
}

/** A remote worker becomes busy only if its job really started. */
export function workerBusyStatement(workerId: number, jobId: string): InStatement {
  return {
    sql: `UPDATE workers SET status = 'busy' WHERE id = ? AND status = 'IDLE'
          AND EXISTS (SELECT 1 FROM queue_entries WHERE job_id = ? AND status = 'running' AND worker_id = ?)`,
    args: [workerId, jobId, workerId],
  };
}

/**
 * Takes workers silent past the timeout offline, and puts the running jobs of every offline
 * worker back in the queue (attempt + 1) or, at max_attempts, fails them. Their GPUs are freed
 * with them, since allocations live on the running entries. Returns the workers taken offline.
 */
export async function sweepOfflineWorkers(db: Database, timeoutSeconds: number, now: Date): Promise<{ id: number; name: string }[]> {
  const cutoff = new Date(now.getTime() - timeoutSeconds * 1000).toISOString();
  const stamp = now.toISOString();
  const [gone] = await db.$client.batch(
    [
      {
        sql: `UPDATE workers SET status = 'offline' WHERE status IN ('IDLE', 'busy', 'draining') AND last_heartbeat < ? RETURNING id, name`,
        args: [cutoff],
      },
      {
        sql: `UPDATE queue_entries SET status = 'failed', completed_at = ?, updated_at = ?,
                error_message = 'worker ' || COALESCE((SELECT name FROM workers w WHERE w.id = queue_entries.worker_id), '?') || ' went offline; attempt ' || attempt || ' of ' || max_attempts || ', no retries left'
              WHERE status = 'running' AND attempt >= max_attempts AND worker_id IN (SELECT id FROM workers WHERE status = 'offline')`,
        args: [stamp, stamp],
      },
      {
        sql: `UPDATE queue_entries SET status = 'pending', attempt = attempt + 1, started_at = NULL, allocated_gpus = NULL, updated_at = ?,
                error_message = 'worker ' || COALESCE((SELECT name FROM workers w WHERE w.id = queue_entries.worker_id), '?') || ' went offline during attempt ' || attempt || '; retrying',
                worker_id = NULL
              WHERE status = 'running' AND attempt < max_attempts AND worker_id IN (SELECT id FROM workers WHERE status = 'offline')`,
        args: [stamp],
      },
    ],
    "write",
  );
  return (gone?.rows ?? []).map((r) => ({ id: Number(r.id), name: String(r.name) }));
}

/** The local box shows busy while it runs anything, IDLE otherwise. */
export function localBoxStatusStatement(localWorkerId: number): InStatement {
  return {
    sql: `UPDATE workers SET status = CASE WHEN EXISTS (SELECT 1 FROM queue_entries WHERE worker_id = ?1 AND status = 'running') THEN 'busy' ELSE 'IDLE' END
          WHERE id = ?1 AND status IN ('IDLE', 'busy')`,
    args: [localWorkerId],
  };
}

/** Ids of entries in `ids` that are still pending (after a batch some may have been cancelled). */
export async function stillPending(db: Database, ids: number[]): Promise<Set<number>> {
  if (ids.length === 0) return new Set();
  const rows = await db.select({ id: queueEntries.id }).from(queueEntries).where(and(inArray(queueEntries.id, ids), eq(queueEntries.status, "pending")));
  return new Set(rows.map((r) => r.id));
}
