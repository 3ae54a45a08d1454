import type { Database } from "../../db/client";
import { ApiError, notFound } from "../../errors";
import type { JobStatus } from "./effects";

/*
 * A transition's write is conditional (the status it starts from is in its WHERE clause), so a
 * write that changed nothing lost a race or was never allowed. This is the one place that reads
 * the job afterwards and says which, with its real status: 404 no such job, 403 not the
 * caller's, or the transition's own 409.
 */

/** What the lost write was limited to, and the 409 it answers for the job's real status. */
export interface LostWrite {
  /** The write was limited to this owner's job (null or absent: anyone's). */
  ownerId?: number | null;
  /** The 403's detail when the job is someone else's. */
  notOwner?: string;
  /** The write was limited to a job of this worker: another worker's job reads as not found. */
  workerId?: number;
  /** The conflict for the status the job really has. */
  conflict(status: JobStatus): ApiError;
}

/**
 * Reads the job a conditional write left unchanged and throws the answer: 404, 403 or the
 * transition's 409 naming its real status. Never returns.
 *
 * @example
 * if (!done.rows.length) await explainLostWrite(db, jobId, { conflict: (s) => new ApiError(409, "job_started", `Job ${jobId} is ${s}`) });
 */
export async function explainLostWrite(db: Database, jobId: string, lost: LostWrite): Promise<never> {
  const found = await db.$client.execute({ sql: "SELECT status, user_id, worker_id FROM queue_entries WHERE job_id = ?", args: [jobId] });
  const row = found.rows[0];
  if (lost.workerId !== undefined) {
    if (!row || Number(row.worker_id) !== lost.workerId) throw notFound(`Job ${jobId} of this worker`);
  } else if (!row) throw notFound(`Job ${jobId}`);
  const owner = row.user_id === null ? null : Number(row.user_id);
  if (lost.ownerId !== undefined && lost.ownerId !== null && owner !== lost.ownerId) {
    throw new ApiError(403, "forbidden", lost.notOwner ?? "You can act only on your own jobs; a lead or admin can act on any");
  }
  throw lost.conflict(String(row.status) as JobStatus);
}
