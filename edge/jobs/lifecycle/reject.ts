import type { Database } from "../../db/client";
import { decisionStatement, notAwaitingApproval } from "./approve";
import type { Change } from "./effects";
import { explainLostWrite } from "./lost-race";

/**
 * An admin rejects a blocked job: it ends `cancelled` with error_message `Rejected: <reason>`,
 * and the reason is recorded on its approval request. Audited `job_rejected`.
 *
 * @example
 * await applyEffects(effectsOf(c, "rejection"), await rejectJob(db, "job-1", admin.id, "too big for today"));
 */
export async function rejectJob(db: Database, jobId: string, deciderId: number, reason: string): Promise<Change> {
  const now = new Date().toISOString();
  const [done] = await db.$client.batch(
    [
      {
        sql: `UPDATE queue_entries SET status = 'cancelled', completed_at = ?1, updated_at = ?1, error_message = 'Rejected: ' || ?3
              WHERE job_id = ?2 AND status = 'blocked' RETURNING error_message`,
        args: [now, jobId, reason],
      },
      decisionStatement(jobId, deciderId, now, { to: "cancelled", reason }),
    ],
    "write",
  );
  const row = done!.rows[0];
  if (!row) return explainLostWrite(db, jobId, { conflict: notAwaitingApproval(jobId) });
  return {
    jobs: [{ jobId, from: "blocked", to: "cancelled", workerId: null, message: String(row.error_message) }],
    audit: [{ event_type: "job_rejected", target: jobId, details: { reason } }],
  };
}
