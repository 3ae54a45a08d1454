import { and, desc, eq, inArray, sql } from "drizzle-orm";
import { ACTIVE_STATUSES, PUBLIC_QUEUE_FIELDS, TERMINAL_STATUSES, type PublicQueueEntry, type QueueEntry, type WaitReason } from "../../shared/schemas/queue";
import type { Database } from "../db/client";
import { queueEntries, users, workers } from "../db/schema";
import { notFound } from "../errors";
import type { WaitInfo } from "../scheduler/types";
import { effectivePriority } from "../scheduler/plan";

export type EntryRow = typeof queueEntries.$inferSelect & { workerName: string | null; owner: string | null };

const parse = <T>(text: string | null): T | null => (text ? (JSON.parse(text) as T) : null);

/** A stored entry as the API shows it, with its live place and reason when it waits. */
export function toQueueEntry(row: EntryRow, wait: Map<number, WaitInfo>, starvationMinutes: number, now = Date.now()): QueueEntry {
  const info = row.status === "pending" ? wait.get(row.id) : undefined;
  let reason: WaitReason | null = null;
  let message: string | null = null;
  if (row.status === "blocked") {
    reason = "awaiting_approval";
    message = "waits for an admin to approve or reject it";
  } else if (row.status === "pending") {
    reason = info?.reason ?? "not_scheduled_yet";
    message = info?.message ?? "submitted moments ago; the next scheduler pass places it";
  }
  return {
    id: row.id,
    job_id: row.jobId,
    user_id: row.userId,
    owner: row.owner,
    team_id: row.teamId,
    provider: row.provider,
    config_name: row.configName,
    priority: row.priority,
    priority_override: row.priorityOverride,
    effective_priority: info?.effectivePriority ?? effectivePriority({ priority: row.priority, priorityOverride: row.priorityOverride, queuedAt: Date.parse(row.queuedAt) }, now, row.status === "pending" ? starvationMinutes : 0),
    status: row.status as QueueEntry["status"],
    position: info?.position ?? null,
    wait_reason: reason,
    wait_message: message,
    queued_at: row.queuedAt,
    started_at: row.startedAt,
    completed_at: row.completedAt,
    estimated_cost: row.estimatedCost,
    requires_approval: row.requiresApproval === 1,
    approval_id: row.approvalId,
    attempt: row.attempt,
    max_attempts: row.maxAttempts,
    error_message: row.errorMessage,
    metadata: parse<Record<string, unknown>>(row.metadata),
    allocated_gpus: parse<number[]>(row.allocatedGpus),
    job_type: row.jobType === "local" ? "local" : "cloud",
    num_processes: row.numProcesses,
    target: row.target as QueueEntry["target"],
    worker_labels: parse<Record<string, string>>(row.workerLabels),
    device_ids: parse<number[]>(row.deviceIds),
    any_gpu: row.anyGpu === 1,
    worker_id: row.workerId,
    worker_name: row.workerName,
  };
}

/**
 * An entry as `scope` (shared/levels.ts ownerScope: null for leads and admins, else the caller's
 * id) may see it: in full when it is theirs to read, else only the public fields.
 *
 * @example
 * const shown = visibleEntry(entry, ownerScope(user));
 */
export function visibleEntry(entry: QueueEntry, scope: number | null): QueueEntry | PublicQueueEntry {
  if (scope === null || entry.user_id === scope) return entry;
  return Object.fromEntries(PUBLIC_QUEUE_FIELDS.map((field) => [field, entry[field]])) as PublicQueueEntry;
}

function selectEntries(db: Database) {
  return db
    .select({ entry: queueEntries, workerName: workers.name, owner: users.username })
    .from(queueEntries)
    .leftJoin(workers, eq(workers.id, queueEntries.workerId))
    .leftJoin(users, eq(users.id, queueEntries.userId));
}

const flatten = (r: { entry: typeof queueEntries.$inferSelect; workerName: string | null; owner: string | null }): EntryRow => ({ ...r.entry, workerName: r.workerName, owner: r.owner });

/** Entries by status (active ones by default), scheduling order first, newest terminal last. */
export async function listEntries(db: Database, options: { status?: string; limit: number; includeCompleted: boolean }): Promise<{ rows: EntryRow[]; total: number }> {
  const statuses = options.status ? [options.status] : options.includeCompleted ? [...ACTIVE_STATUSES, ...TERMINAL_STATUSES] : [...ACTIVE_STATUSES];
  const where = inArray(queueEntries.status, statuses);
  const order = sql`CASE ${queueEntries.status} WHEN 'running' THEN 0 WHEN 'pending' THEN 1 WHEN 'blocked' THEN 2 ELSE 3 END`;
  const [rows, [count]] = await Promise.all([
    selectEntries(db)
      .where(where)
      .orderBy(order, desc(sql`COALESCE(${queueEntries.priorityOverride}, ${queueEntries.priority})`), queueEntries.queuedAt, queueEntries.id)
      .limit(options.limit),
    db.select({ n: sql<number>`count(*)` }).from(queueEntries).where(where),
  ]);
  return { rows: rows.map(flatten), total: Number(count?.n ?? 0) };
}

export async function getEntry(db: Database, jobId: string): Promise<EntryRow> {
  const [row] = await selectEntries(db).where(eq(queueEntries.jobId, jobId));
  if (!row) throw notFound(`Job ${jobId}`);
  return flatten(row);
}

/** The active entries of one user. */
export async function userEntries(db: Database, userId: number): Promise<EntryRow[]> {
  const rows = await selectEntries(db)
    .where(and(eq(queueEntries.userId, userId), inArray(queueEntries.status, [...ACTIVE_STATUSES])))
    .orderBy(queueEntries.queuedAt, queueEntries.id);
  return rows.map(flatten);
}
