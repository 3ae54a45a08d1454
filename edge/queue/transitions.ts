import type { Database } from "../db/client";
import { ApiError, notFound } from "../errors";

/*
 * Each user-driven transition of a queue entry is one conditional write (or one batch): the
 * status it starts from is part of the WHERE clause, so a lost race changes nothing and the
 * caller learns the entry's real state. None of them hands out capacity; the routes nudge the
 * Scheduler afterwards.
 */

async function currentStatus(db: Database, jobId: string): Promise<string> {
  const found = await db.$client.execute({ sql: "SELECT status FROM queue_entries WHERE job_id = ?", args: [jobId] });
  if (!found.rows.length) throw notFound(`Job ${jobId}`);
  return String(found.rows[0]!.status);
}

/** Cancels a job that has not started (pending or blocked). `ownerId` limits it to that user's job. */
export async function cancelJob(db: Database, jobId: string, ownerId: number | null): Promise<void> {
  const now = new Date().toISOString();
  const [done] = await db.$client.batch(
    [
      {
        sql: `UPDATE queue_entries SET status = 'cancelled', completed_at = ?, updated_at = ?, error_message = COALESCE(error_message, 'Cancelled before it started')
              WHERE job_id = ? AND status IN ('pending', 'blocked') AND (?4 IS NULL OR user_id = ?4) RETURNING id`,
        args: [now, now, jobId, ownerId],
      },
      {
        sql: `UPDATE approval_requests SET status = 'withdrawn', decided_at = ? WHERE job_id = ? AND status = 'pending'
              AND EXISTS (SELECT 1 FROM queue_entries WHERE job_id = ?2 AND status = 'cancelled')`,
        args: [now, jobId],
      },
    ],
    "write",
  );
  if (done!.rows.length) return;
  const status = await currentStatus(db, jobId);
  if (ownerId !== null && (await ownerOf(db, jobId)) !== ownerId) throw new ApiError(403, "forbidden", "You can cancel only your own jobs; a lead or admin can cancel any");
  if (status === "running") throw new ApiError(409, "job_running", `Job ${jobId} is running; stop it with POST /api/training/cancel`);
  throw new ApiError(409, "job_finished", `Job ${jobId} is already ${status}`);
}

async function ownerOf(db: Database, jobId: string): Promise<number | null> {
  const found = await db.$client.execute({ sql: "SELECT user_id FROM queue_entries WHERE job_id = ?", args: [jobId] });
  const value = found.rows[0]?.user_id;
  return value === null || value === undefined ? null : Number(value);
}

/** An admin's decision on a blocked job: approve makes it pending, reject ends it with the reason. */
export async function decideApproval(db: Database, jobId: string, deciderId: number, decision: { approve: true } | { approve: false; reason: string }): Promise<void> {
  const now = new Date().toISOString();
  const entryUpdate = decision.approve
    ? { sql: `UPDATE queue_entries SET status = 'pending', updated_at = ?1 WHERE job_id = ?2 AND status = 'blocked' RETURNING id`, args: [now, jobId] }
    : {
        sql: `UPDATE queue_entries SET status = 'cancelled', completed_at = ?1, updated_at = ?1, error_message = 'Rejected: ' || ?3 WHERE job_id = ?2 AND status = 'blocked' RETURNING id`,
        args: [now, jobId, decision.reason],
      };
  const [done] = await db.$client.batch(
    [
      entryUpdate,
      {
        sql: `UPDATE approval_requests SET status = ?1, decided_at = ?2, decided_by = ?3, reason = ?4
              WHERE id = (SELECT approval_id FROM queue_entries WHERE job_id = ?5) AND status = 'pending'
              AND EXISTS (SELECT 1 FROM queue_entries WHERE job_id = ?5 AND status = ?6 AND updated_at = ?2)`,
        args: [decision.approve ? "approved" : "rejected", now, deciderId, decision.approve ? null : decision.reason, jobId, decision.approve ? "pending" : "cancelled"],
      },
    ],
    "write",
  );
  if (done!.rows.length) return;
  const status = await currentStatus(db, jobId);
  throw new ApiError(409, "not_awaiting_approval", `Job ${jobId} is ${status}, not awaiting approval`);
}

/** Sets (or, with null, clears) the priority override of a job that has not started. */
export async function overridePriority(db: Database, jobId: string, priority: number | null): Promise<void> {
  const now = new Date().toISOString();
  const done = await db.$client.execute({
    sql: `UPDATE queue_entries SET priority_override = ?, updated_at = ? WHERE job_id = ? AND status IN ('pending', 'blocked') RETURNING id`,
    args: [priority, now, jobId],
  });
  if (done.rows.length) return;
  const status = await currentStatus(db, jobId);
  throw new ApiError(409, "job_started", `Job ${jobId} is ${status}; only waiting jobs can be re-prioritised`);
}

/** Deletes terminal entries completed more than `days` days ago; active entries are never touched. */
export async function cleanupQueue(db: Database, days: number, now = new Date()): Promise<number> {
  const cutoff = new Date(now.getTime() - days * 86_400_000).toISOString();
  const terminal = `status IN ('completed', 'failed', 'cancelled') AND completed_at IS NOT NULL AND completed_at < ?`;
  const [, deleted] = await db.$client.batch(
    [
      { sql: `DELETE FROM approval_requests WHERE entry_id IN (SELECT id FROM queue_entries WHERE ${terminal})`, args: [cutoff] },
      { sql: `DELETE FROM queue_entries WHERE ${terminal}`, args: [cutoff] },
    ],
    "write",
  );
  return deleted!.rowsAffected;
}
