import type { Database } from "../../db/client";
import type { Change } from "./effects";

/**
 * A cloud job ended at its provider (succeeded, failed, canceled), or could not be sent there:
 * running -> completed, failed or cancelled, with why. One conditional statement: a job already
 * ended (cancelled by its owner meanwhile) is left as it is and the change is empty.
 *
 * @example
 * await applyEffects(ctx, await finishCloudJob(db, "cloud-1a2b", "failed", "the provider refused the archive"));
 */
export async function finishCloudJob(
  db: Database,
  jobId: string,
  to: "completed" | "failed" | "cancelled",
  message: string | null,
): Promise<Change> {
  const now = new Date().toISOString();
  const result = await db.$client.execute({
    sql: `UPDATE queue_entries SET status = ?1, completed_at = ?2, updated_at = ?2, error_message = ?3
          WHERE job_id = ?4 AND job_type = 'cloud' AND status = 'running' RETURNING job_id`,
    args: [to, now, message, jobId],
  });
  if (!result.rows.length) return { jobs: [] };
  return { jobs: [{ jobId, from: "running", to, workerId: null, message, cloud: true }] };
}
