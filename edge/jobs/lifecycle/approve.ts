import type { InStatement } from "@libsql/client/web";
import type { Database } from "../../db/client";
import { ApiError } from "../../errors";
import type { Change } from "./effects";
import { explainLostWrite } from "./lost-race";

/**
 * Records an admin's decision on the job's approval request, only if the job's own change in
 * the same batch took place (its updated_at is this decision's time). Shared by approve and reject.
 */
type Decision = { to: "pending"; reason?: undefined } | { to: "cancelled"; reason: string };

export function decisionStatement(jobId: string, deciderId: number, now: string, decision: Decision): InStatement {
  return {
    sql: `UPDATE approval_requests SET status = ?1, decided_at = ?2, decided_by = ?3, reason = ?4
          WHERE id = (SELECT approval_id FROM queue_entries WHERE job_id = ?5) AND status = 'pending'
          AND EXISTS (SELECT 1 FROM queue_entries WHERE job_id = ?5 AND status = ?6 AND updated_at = ?2)`,
    args: [decision.to === "pending" ? "approved" : "rejected", now, deciderId, decision.reason ?? null, jobId, decision.to],
  };
}

/** The 409 for a decision on a job that is not blocked. */
export const notAwaitingApproval = (jobId: string) => (status: string) =>
  new ApiError(409, "not_awaiting_approval", `Job ${jobId} is ${status}, not awaiting approval`);

/**
 * An admin approves a blocked job: it becomes pending and is scheduled normally. Audited
 * `job_approved`.
 *
 * @example
 * await applyEffects(effectsOf(c, "approval"), await approveJob(db, "job-1", admin.id));
 */
export async function approveJob(db: Database, jobId: string, deciderId: number): Promise<Change> {
  const now = new Date().toISOString();
  const [done] = await db.$client.batch(
    [
      {
        sql: `UPDATE queue_entries SET status = 'pending', updated_at = ?1 WHERE job_id = ?2 AND status = 'blocked' RETURNING id`,
        args: [now, jobId],
      },
      decisionStatement(jobId, deciderId, now, { to: "pending" }),
    ],
    "write",
  );
  if (!done!.rows.length) return explainLostWrite(db, jobId, { conflict: notAwaitingApproval(jobId) });
  return { jobs: [{ jobId, from: "blocked", to: "pending", workerId: null }], audit: [{ event_type: "job_approved", target: jobId }] };
}
