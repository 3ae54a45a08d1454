import type { Database } from "../../db/client";
import { ApiError } from "../../errors";
import type { Change, JobStatus } from "./effects";
import { explainLostWrite } from "./lost-race";

/**
 * Sets (or, with null, clears) the priority override of a job that has not started; the job
 * stays where it is (pending or blocked), and the Scheduler re-orders the queue. Audited
 * `priority_overridden`.
 *
 * @example
 * await applyEffects(effectsOf(c, "priority"), await prioritiseJob(db, "job-1", 25));
 */
export async function prioritiseJob(db: Database, jobId: string, priority: number | null): Promise<Change> {
  const done = await db.$client.execute({
    sql: `UPDATE queue_entries SET priority_override = ?, updated_at = ? WHERE job_id = ? AND status IN ('pending', 'blocked') RETURNING status`,
    args: [priority, new Date().toISOString(), jobId],
  });
  const row = done.rows[0];
  if (!row) {
    const conflict = (status: string) =>
      new ApiError(409, "job_started", `Job ${jobId} is ${status}; only waiting jobs can be re-prioritised`);
    return explainLostWrite(db, jobId, { conflict });
  }
  const status = String(row.status) as JobStatus;
  return {
    jobs: [{ jobId, from: status, to: status, workerId: null }],
    audit: [{ event_type: "priority_overridden", target: jobId, details: { priority } }],
  };
}
