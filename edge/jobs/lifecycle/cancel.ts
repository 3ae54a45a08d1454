import type { Database } from "../../db/client";
import { ApiError } from "../../errors";
import type { Change, JobStatus } from "./effects";
import { explainLostWrite } from "./lost-race";

/** Who cancels, and whether a running job may be cancelled too. */
export interface CancelRequest {
  /** Only this user's job (null: anyone's, for leads and admins). */
  ownerId: number | null;
  /** Who asks: a cancel of someone else's job is audited. */
  actorId: number | null;
  /** false: a running job is refused (POST /api/queue/{id}/cancel); true: it ends too (POST /api/training/cancel). */
  running: boolean;
}

/**
 * Cancels a waiting (pending or blocked) job or, when allowed, a running one. One batch: the
 * status it starts from, read and changed in the same write transaction; a blocked job's approval
 * request is withdrawn; a running job keeps its worker on the entry (its runner is woken to end
 * the trainer) and its GPUs are free at once, since allocations live on running entries. A
 * cancelled running job of the local box holds the local queue (pending local jobs are
 * not started automatically until POST /api/queue/process or a restart).
 *
 * @example
 * const change = await cancelJob(db, "job-1", { ownerId: null, actorId: 1, running: true });
 */
export async function cancelJob(db: Database, jobId: string, request: CancelRequest): Promise<Change & { localQueueHeld: boolean }> {
  const now = new Date().toISOString();
  const [before, done, , held] = await db.$client.batch(
    [
      { sql: "SELECT status FROM queue_entries WHERE job_id = ?", args: [jobId] },
      {
        sql: `UPDATE queue_entries SET status = 'cancelled', completed_at = ?1, updated_at = ?1,
                error_message = CASE WHEN status = 'running' THEN 'Cancelled while running' ELSE COALESCE(error_message, 'Cancelled before it started') END
              WHERE job_id = ?2 AND (status IN ('pending', 'blocked') OR (?4 = 1 AND status = 'running')) AND (?3 IS NULL OR user_id = ?3)
              RETURNING user_id, worker_id, error_message, job_type`,
        args: [now, jobId, request.ownerId, request.running ? 1 : 0],
      },
      {
        sql: `UPDATE approval_requests SET status = 'withdrawn', decided_at = ?1 WHERE job_id = ?2 AND status = 'pending'
              AND EXISTS (SELECT 1 FROM queue_entries WHERE job_id = ?2 AND status = 'cancelled' AND completed_at = ?1)`,
        args: [now, jobId],
      },
      {
        sql: `INSERT INTO settings (key, value, updated_at) SELECT 'local_queue_paused', 'true', ?1
              WHERE ?3 = 1 AND EXISTS (SELECT 1 FROM queue_entries q JOIN workers w ON w.id = q.worker_id
                                       WHERE q.job_id = ?2 AND q.status = 'cancelled' AND q.completed_at = ?1 AND w.role = 'local')
              ON CONFLICT (key) DO UPDATE SET value = 'true', updated_at = ?1
              RETURNING key`,
        args: [now, jobId, request.running ? 1 : 0],
      },
    ],
    "write",
  );
  const row = done!.rows[0];
  if (!row) {
    return explainLostWrite(db, jobId, {
      ownerId: request.ownerId,
      notOwner: "You can cancel only your own jobs; a lead or admin can cancel any",
      conflict: (status) =>
        status === "running"
          ? new ApiError(409, "job_running", `Job ${jobId} is running; stop it with POST /api/training/cancel`)
          : new ApiError(409, "job_finished", `Job ${jobId} is already ${status}`),
    });
  }
  const from = String(before!.rows[0]!.status) as JobStatus;
  const owner = row.user_id === null ? null : Number(row.user_id);
  // A running job's runner is woken to end the trainer.
  const workerId = from === "running" && row.worker_id !== null ? Number(row.worker_id) : null;
  const byOther = request.actorId !== null && owner !== request.actorId;
  return {
    jobs: [
      { jobId, from, to: "cancelled", workerId, message: String(row.error_message), ...(row.job_type === "cloud" ? { cloud: true } : {}) },
    ],
    audit: byOther ? [{ event_type: "job_cancelled", target: jobId, details: { was: from, owner_id: owner } }] : [],
    localQueueHeld: held!.rows.length > 0,
  };
}
