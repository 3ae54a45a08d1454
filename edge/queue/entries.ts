import { and, eq, gt, inArray, sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import {
  ACTIVE_STATUSES,
  END_METHODS,
  PUBLIC_QUEUE_FIELDS,
  TERMINAL_STATUSES,
  type PublicQueueEntry,
  type QueueEntry,
  type WaitReason,
} from "../../shared/schemas/queue";
import type { Database } from "../db/client";
import { queueEntries, users, workers } from "../db/schema";
import { ApiError, notFound } from "../errors";
import type { QueueKey, QueueOrder } from "../paging";
import type { WaitInfo } from "../jobs/job";
import { effectivePriority } from "../jobs/priority";
import { maxRuntimeMinutes, RUNTIME_OPTION } from "../jobs/runtime";
import { AWAITING_APPROVAL_BASIS, maxRuntimeBasis, UNKNOWN_RUN_BASIS } from "../jobs/estimate";

export type EntryRow = typeof queueEntries.$inferSelect & { workerName: string | null; owner: string | null };

const parse = <T>(text: string | null): T | null => (text ? (JSON.parse(text) as T) : null);

/** The config snapshot's --max_runtime_minutes as stored (a number, a string, or anything: estimate.ts reads it). */
export function snapshotRuntime(row: Pick<EntryRow, "configSnapshot">): unknown {
  return parse<Record<string, unknown>>(row.configSnapshot)?.[RUNTIME_OPTION];
}

/**
 * How long a waiting entry is expected to run, in minutes to the hundredth, and how that was
 * estimated: as the Scheduler's last plan estimated it (edge/jobs/estimate.ts), else, for one
 * submitted since, its own --max_runtime_minutes (recent runs wait for the next pass).
 */
function expectedMinutes(row: EntryRow, info: WaitInfo | undefined): Pick<QueueEntry, "expected_minutes" | "expected_minutes_method"> {
  const minutes = row.status === "pending" && !info ? maxRuntimeMinutes(snapshotRuntime(row)) : null;
  const estimate =
    row.status !== "pending"
      ? null
      : (info?.expected ?? (minutes === null ? null : { ms: minutes * 60_000, method: "max_runtime" as const }));
  return estimate
    ? { expected_minutes: Math.round(estimate.ms / 600) / 100, expected_minutes_method: estimate.method }
    : { expected_minutes: null, expected_minutes_method: null };
}

/**
 * When a waiting entry is expected to start and how long it is expected to run, each with how it
 * was estimated in words: from the Scheduler's last plan run forward (edge/scheduler/forecast.ts).
 * A blocked entry waits for an approval; one submitted since the last pass waits for the next.
 */
function expectedStart(
  row: EntryRow,
  info: WaitInfo | undefined,
): Pick<QueueEntry, "expected_start_at" | "expected_start_basis" | "expected_run_seconds" | "expected_run_basis"> {
  const none = { expected_start_at: null, expected_start_basis: null, expected_run_seconds: null, expected_run_basis: null };
  if (row.status !== "pending" && row.status !== "blocked") return none;
  const minutes = maxRuntimeMinutes(snapshotRuntime(row));
  const run = info?.expected ?? (minutes === null ? null : { ms: minutes * 60_000, basis: maxRuntimeBasis(minutes) });
  const runs = {
    expected_run_seconds: run === null ? null : Math.round(run.ms / 1000),
    expected_run_basis:
      run?.basis ??
      (row.status === "blocked" || !info ? "unknown until the scheduler places it (then from recent runs, if any)" : UNKNOWN_RUN_BASIS),
  };
  if (row.status === "blocked") return { ...runs, expected_start_at: null, expected_start_basis: AWAITING_APPROVAL_BASIS };
  const start = info?.start;
  return {
    ...runs,
    expected_start_at: typeof start?.at === "number" ? new Date(start.at).toISOString() : null,
    expected_start_basis: start?.basis ?? "unknown until the next scheduler pass (within 5 s)",
  };
}

/** A running entry's stored expected end and its method; none for any other status. */
function expectedEnd(row: EntryRow): Pick<QueueEntry, "expected_end_at" | "expected_end_method"> {
  const method = END_METHODS.find((m) => m === row.expectedEndMethod);
  return row.status === "running" && row.expectedEndAt && method
    ? { expected_end_at: row.expectedEndAt, expected_end_method: method }
    : { expected_end_at: null, expected_end_method: null };
}

/**
 * A stored entry as the API shows it, with its live place, reason and expected run time when it
 * waits (from the Scheduler's last plan), and a running job's expected end.
 */
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
    effective_priority:
      info?.effectivePriority ??
      effectivePriority(
        { priority: row.priority, priorityOverride: row.priorityOverride, queuedAt: Date.parse(row.queuedAt) },
        now,
        row.status === "pending" ? starvationMinutes : 0,
      ),
    status: row.status as QueueEntry["status"],
    position: info?.position ?? null,
    wait_reason: reason,
    wait_message: message,
    stalled_since: row.status === "running" ? row.stalledSince : null,
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
    retry_of: row.retryOf,
    ...expectedEnd(row),
    ...expectedMinutes(row, info),
    ...expectedStart(row, info),
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

const flatten = (r: { entry: typeof queueEntries.$inferSelect; workerName: string | null; owner: string | null }): EntryRow => ({
  ...r.entry,
  workerName: r.workerName,
  owner: r.owner,
});

const statusRank = (status: string) => ({ running: 0, pending: 1, blocked: 2 })[status] ?? 3;
const PRIORITY_SQL = sql`COALESCE(${queueEntries.priorityOverride}, ${queueEntries.priority})`;

/** Where the next page starts after `row` in `order`. */
function keyOf(row: EntryRow, order: QueueOrder): QueueKey {
  if (order === "submitted") return { id: row.id };
  return { rank: statusRank(row.status), priority: row.priorityOverride ?? row.priority, queued_at: row.queuedAt, id: row.id };
}

/**
 * One page of entries by status (active ones by default), after `after` when given: in
 * `scheduling` order (running, pending, blocked, ended; then priority, highest first, queued_at,
 * id) or `submitted` order (id). Keyset paging: a page starts strictly after the last entry of the
 * previous one, so entries that keep their place are listed exactly once however many arrive.
 * `total` counts every entry matching the filters; `next` is null on the last page.
 *
 * The page's reads and its count are one batch, so they see one state of the queue: read one
 * after the other, a job that started between the read of the running entries and that of the
 * pending ones was on neither, and one requeued in between was on both
 * (test/queue/queue-listing-snapshot.test.ts).
 */
export async function listEntries(
  db: Database,
  options: {
    status?: string | null;
    /** Only this user's entries. */
    userId?: number | null;
    limit: number;
    includeCompleted: boolean;
    order: QueueOrder;
    after?: QueueKey;
  },
): Promise<{ rows: EntryRow[]; total: number; next: QueueKey | null }> {
  const statuses = options.status
    ? [options.status]
    : options.includeCompleted
      ? [...ACTIVE_STATUSES, ...TERMINAL_STATUSES]
      : [...ACTIVE_STATUSES];
  const byStatus = inArray(queueEntries.status, statuses);
  const where = options.userId == null ? byStatus : and(byStatus, eq(queueEntries.userId, options.userId))!;
  const after = options.after;
  const count = db
    .select({ n: sql<number>`count(*)` })
    .from(queueEntries)
    .where(where);
  const reads =
    options.order === "submitted"
      ? [
          selectEntries(db)
            .where(after ? and(where, gt(queueEntries.id, after.id)) : where)
            .orderBy(queueEntries.id)
            .limit(options.limit + 1),
        ]
      : schedulingReads(db, statuses, options.userId ?? null, options.limit + 1, after && "rank" in after ? after : undefined);
  const [counted, ...pages] = await db.batch([count, ...reads]);
  const rows = pages.flat();
  const more = rows.length > options.limit;
  const shown = rows.slice(0, options.limit).map(flatten);
  return { rows: shown, total: Number(counted[0]?.n ?? 0), next: more ? keyOf(shown.at(-1)!, options.order) : null };
}

/**
 * The reads whose rows, in turn, are the next `limit` entries in scheduling order after `after`:
 * one status group at a time in rank order (running, pending, blocked, then the ended ones
 * together), each read in the order of the scheduling index (migration 0028), so a page costs its
 * own rows rather than a sort of the whole queue. Each read is limited to what the reads before it
 * left of the page (their rows counted in the database, at most `limit` each), so a page whose
 * running jobs fill it reads no pending ones.
 */
function schedulingReads(
  db: Database,
  statuses: string[],
  userId: number | null,
  limit: number,
  after: Extract<QueueKey, { rank: number }> | undefined,
) {
  const groups = [["running"], ["pending"], ["blocked"], [...TERMINAL_STATUSES] as string[]]
    .map((group) => group.filter((status) => statuses.includes(status)))
    .filter((group, rank) => group.length && (!after || rank >= after.rank));
  const byUser = userId === null ? undefined : eq(queueEntries.userId, userId);
  const earlier: SQL[] = [];
  const reads = [];
  for (const group of groups) {
    const rank = statusRank(group[0]!);
    const byStatus = group.length === 1 ? eq(queueEntries.status, group[0]!) : inArray(queueEntries.status, group);
    const read = (seek: SQL | undefined, orderBy: (SQL | SQLiteColumn)[]) => {
      const where = and(...[byStatus, byUser, seek].filter((f) => f !== undefined))!;
      const left = earlier.length
        ? sql`max(0, ${limit}${sql.join(earlier.map((w) => sql` - (SELECT count(*) FROM (SELECT 1 FROM ${queueEntries} WHERE ${w} LIMIT ${limit}))`))})`
        : limit;
      earlier.push(where);
      // drizzle types limit() as a number, and writes whatever it is given after LIMIT: here an expression.
      return selectEntries(db)
        .where(where)
        .orderBy(...orderBy)
        .limit(left as number);
    };
    if (!after || after.rank !== rank) {
      // Within a group: priority (highest first), queued_at, id: the order of the scheduling index.
      reads.push(read(undefined, [sql`${PRIORITY_SQL} DESC`, queueEntries.queuedAt, queueEntries.id]));
      continue;
    }
    // The seek past the previous page's last entry as two ranges of the index: the rest of its
    // priority, then the lower priorities. One `p < x OR (p = x AND ...)` condition makes SQLite
    // walk the index from the start of the priority, which costs the page's depth.
    reads.push(
      read(
        sql`${PRIORITY_SQL} = ${after.priority} AND (${queueEntries.queuedAt}, ${queueEntries.id}) > (${after.queued_at}, ${after.id})`,
        [queueEntries.queuedAt, queueEntries.id],
      ),
      read(sql`${PRIORITY_SQL} < ${after.priority}`, [sql`${PRIORITY_SQL} DESC`, queueEntries.queuedAt, queueEntries.id]),
    );
  }
  return reads;
}

export async function getEntry(db: Database, jobId: string): Promise<EntryRow> {
  const [row] = await selectEntries(db).where(eq(queueEntries.jobId, jobId));
  if (!row) throw notFound(`Job ${jobId}`);
  return flatten(row);
}

/**
 * The id of the user named `username`, for filtering by owner; 404 `no_such_user` when there is none.
 *
 * @example
 * const userId = await userIdNamed(db, "alice");
 */
export async function userIdNamed(db: Database, username: string): Promise<number> {
  const [row] = await db.select({ id: users.id }).from(users).where(eq(users.username, username));
  if (!row) throw new ApiError(404, "no_such_user", `No user named ${username}`);
  return row.id;
}

/** The active entries of one user. */
export async function userEntries(db: Database, userId: number): Promise<EntryRow[]> {
  const rows = await selectEntries(db)
    .where(and(eq(queueEntries.userId, userId), inArray(queueEntries.status, [...ACTIVE_STATUSES])))
    .orderBy(queueEntries.queuedAt, queueEntries.id);
  return rows.map(flatten);
}
