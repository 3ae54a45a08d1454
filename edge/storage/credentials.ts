import type { Database } from "../db/client";
import { randomToken } from "../auth/crypto";
import { ApiError, notFound } from "../errors";

/*
 * Per-job credentials for the storage endpoint (spec 5.7). The access key id is the job's upload
 * token; with its secret a job signs S3 requests (SigV4) for its own directory only, and only
 * while the job is active: completion, failure or cancellation ends them without a write, since
 * every check reads the job's status. Issuing again rotates: the earlier pair stops working.
 */

/** Queue statuses in which a job's credentials work. */
const ACTIVE = ["pending", "running", "blocked"] as const;

export interface IssuedCredentials {
  job_id: string;
  access_key_id: string;
  secret_access_key: string;
}

/**
 * New credentials for an active job (the previous ones revoked), in one batch: 404 unknown job,
 * 403 someone else's (`ownerId` set), 409 not active; nothing changes on any refusal.
 */
export async function issueStorageCredentials(db: Database, jobId: string, ownerId: number | null): Promise<IssuedCredentials> {
  const accessKeyId = `STU${randomToken(15).replace(/[-_]/g, "0").toUpperCase()}`;
  const secret = randomToken(30);
  const now = new Date().toISOString();
  // The job is this caller's to act on, and active: what both writes require.
  const mayIssue = `EXISTS (SELECT 1 FROM queue_entries WHERE job_id = ? AND (? IS NULL OR user_id = ?) AND status IN (${ACTIVE.map(() => "?").join(", ")}))`;
  const mayIssueArgs = [jobId, ownerId, ownerId, ...ACTIVE];
  const [job, , inserted] = await db.$client.batch(
    [
      { sql: "SELECT status, user_id FROM queue_entries WHERE job_id = ?", args: [jobId] },
      { sql: `UPDATE storage_credentials SET revoked_at = ? WHERE job_id = ? AND revoked_at IS NULL AND ${mayIssue}`, args: [now, jobId, ...mayIssueArgs] },
      { sql: `INSERT INTO storage_credentials (access_key_id, job_id, secret, created_at) SELECT ?, ?, ?, ? WHERE ${mayIssue}`, args: [accessKeyId, jobId, secret, now, ...mayIssueArgs] },
    ],
    "write",
  );
  const row = job!.rows[0];
  if (row === undefined) throw notFound(`Job ${jobId}`);
  if (ownerId !== null && Number(row.user_id) !== ownerId) throw new ApiError(403, "forbidden", `Job ${jobId} is not yours; a lead or admin can issue credentials for any job`);
  if (inserted!.rowsAffected === 0) throw new ApiError(409, "job_not_active", `Job ${jobId} is ${String(row.status)}: storage credentials are only issued to pending, blocked or running jobs`);
  return { job_id: jobId, access_key_id: accessKeyId, secret_access_key: secret };
}

export type CredentialLookup = { jobId: string; secret: string; active: true } | { jobId: string; active: false; reason: string } | null;

/** What an access key id stands for: null when unknown; inactive when revoked or its job ended. */
export async function lookupStorageCredentials(db: Database, accessKeyId: string): Promise<CredentialLookup> {
  const result = await db.$client.execute({
    sql: "SELECT c.job_id, c.secret, c.revoked_at, q.status FROM storage_credentials c LEFT JOIN queue_entries q ON q.job_id = c.job_id WHERE c.access_key_id = ?",
    args: [accessKeyId],
  });
  const row = result.rows[0] as Record<string, unknown> | undefined;
  if (!row) return null;
  const jobId = String(row.job_id);
  if (row.revoked_at !== null) return { jobId, active: false, reason: "these credentials were replaced by newer ones" };
  const status = row.status === null ? "deleted" : String(row.status);
  if (!(ACTIVE as readonly string[]).includes(status)) return { jobId, active: false, reason: `job ${jobId} is ${status}` };
  return { jobId, secret: String(row.secret), active: true };
}
