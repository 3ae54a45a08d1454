import type { Database } from "../db/client";

/*
 * "The active job": the job a training request is about when it names none (stop, validation/run,
 * checkpoint/run, checkpoints, status and events act on "the active job").
 * It is always among the jobs the caller may read (`scope`: shared/levels.ts ownerScope, null
 * for leads and admins, who read anyone's) and it is the running job started last when there is
 * one. When nothing runs, the three uses need different answers, because each asks something
 * different of the job:
 * - `control` (stop, validation/run, checkpoint/run, checkpoints): a command reaches only a
 *   live trainer, so there is no fallback: no running job means none (the route's 400).
 * - `events` (the event log and its stream): only a job that has started has events, and its
 *   log stays worth reading after it ended, so the job started last.
 * - `status`: what the caller is waiting for, so the job queued first of those still pending.
 */

export type ActiveJobUse = "control" | "events" | "status";

const SELECT = "SELECT job_id, user_id, status FROM queue_entries";
const RUNNING_FIRST = "CASE status WHEN 'running' THEN 0 ELSE 1 END";
// Every query binds ?1 = scope. Each is one indexed read (queue_entries_user_status for a scope).
const QUERIES: Record<ActiveJobUse, string> = {
  control: `${SELECT} WHERE status = 'running' AND (?1 IS NULL OR user_id = ?1) ORDER BY started_at DESC, id DESC LIMIT 1`,
  events: `${SELECT} WHERE started_at IS NOT NULL AND (?1 IS NULL OR user_id = ?1) ORDER BY ${RUNNING_FIRST}, started_at DESC, id DESC LIMIT 1`,
  status: `${SELECT} WHERE status IN ('running', 'pending') AND (?1 IS NULL OR user_id = ?1) ORDER BY ${RUNNING_FIRST}, started_at DESC, queued_at, id LIMIT 1`,
};

export interface ActiveJob {
  jobId: string;
  userId: number | null;
  status: string;
}

/**
 * The caller's active job for `use` (see above), or null when there is none.
 *
 * @example
 * const job = await findActiveJob(db, ownerScope(user), "events"); // { jobId: "local-3f9c2a1b04de", userId: 7, status: "running" } | null
 */
export async function findActiveJob(db: Database, scope: number | null, use: ActiveJobUse): Promise<ActiveJob | null> {
  const found = await db.$client.execute({ sql: QUERIES[use], args: [scope] });
  const row = found.rows[0];
  if (!row) return null;
  return { jobId: String(row.job_id), userId: row.user_id === null ? null : Number(row.user_id), status: String(row.status) };
}
