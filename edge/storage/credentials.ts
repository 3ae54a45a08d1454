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

/** Where jobs without a provider (local GPUs and remote workers) keep their results. */
export const DEFAULT_OUTPUT_ROOT = "outputs";

export interface IssuedCredentials {
  job_id: string;
  access_key_id: string;
  secret_access_key: string;
  /** The provider's s3_public_url, when it set one: what the job is told to upload to. */
  public_url: string | null;
}

// A job's provider settings (spec 2.8) as SQL sees them: a job without a provider (local GPUs,
// remote workers) may always use the endpoint; a provider's job only when s3_endpoint_enabled.
const ENABLED = `(q.provider IS NULL OR json_extract(ps.settings, '$.s3_endpoint_enabled') = 1)`;
const JOB_WITH_SETTINGS = "queue_entries q LEFT JOIN provider_settings ps ON ps.provider = q.provider";

/**
 * New credentials for an active job (the previous ones revoked), in one batch: 404 unknown job,
 * 403 someone else's (`ownerId` set), 409 not active or its provider's storage endpoint off;
 * nothing changes on any refusal. The job's objects go under the output path in force when its
 * first credentials were issued (the provider's s3_output_path, else DEFAULT_OUTPUT_ROOT), so
 * rotating never moves them.
 */
export async function issueStorageCredentials(db: Database, jobId: string, ownerId: number | null): Promise<IssuedCredentials> {
  const accessKeyId = `STU${randomToken(15).replace(/[-_]/g, "0").toUpperCase()}`;
  const secret = randomToken(30);
  const now = new Date().toISOString();
  // The job is this caller's to act on, active, and allowed the endpoint: what both writes require.
  const mayIssue = `EXISTS (SELECT 1 FROM ${JOB_WITH_SETTINGS} WHERE q.job_id = ? AND (? IS NULL OR q.user_id = ?) AND q.status IN (${ACTIVE.map(() => "?").join(", ")}) AND ${ENABLED})`;
  const mayIssueArgs = [jobId, ownerId, ownerId, ...ACTIVE];
  const outputRoot = `COALESCE(
    (SELECT output_root FROM storage_credentials WHERE job_id = ? ORDER BY created_at LIMIT 1),
    (SELECT json_extract(ps.settings, '$.s3_output_path') FROM ${JOB_WITH_SETTINGS} WHERE q.job_id = ?),
    ?)`;
  const [job, , inserted] = await db.$client.batch(
    [
      { sql: `SELECT q.status, q.user_id, q.provider, ${ENABLED} AS enabled, json_extract(ps.settings, '$.s3_public_url') AS public_url FROM ${JOB_WITH_SETTINGS} WHERE q.job_id = ?`, args: [jobId] },
      { sql: `UPDATE storage_credentials SET revoked_at = ? WHERE job_id = ? AND revoked_at IS NULL AND ${mayIssue}`, args: [now, jobId, ...mayIssueArgs] },
      {
        sql: `INSERT INTO storage_credentials (access_key_id, job_id, secret, created_at, output_root) SELECT ?, ?, ?, ?, ${outputRoot} WHERE ${mayIssue}`,
        args: [accessKeyId, jobId, secret, now, jobId, jobId, DEFAULT_OUTPUT_ROOT, ...mayIssueArgs],
      },
    ],
    "write",
  );
  const row = job!.rows[0];
  if (row === undefined) throw notFound(`Job ${jobId}`);
  if (ownerId !== null && Number(row.user_id) !== ownerId) throw new ApiError(403, "forbidden", `Job ${jobId} is not yours; a lead or admin can issue credentials for any job`);
  if (inserted!.rowsAffected === 0) {
    if (!Number(row.enabled)) throw new ApiError(409, "storage_endpoint_disabled", `The storage endpoint is off for provider ${String(row.provider)}: an admin turns it on with PUT /api/cloud/providers/${String(row.provider)} {"s3_endpoint_enabled": true}`);
    throw new ApiError(409, "job_not_active", `Job ${jobId} is ${String(row.status)}: storage credentials are only issued to pending, blocked or running jobs`);
  }
  return { job_id: jobId, access_key_id: accessKeyId, secret_access_key: secret, public_url: row.public_url === null || row.public_url === undefined ? null : String(row.public_url) };
}

export type CredentialLookup =
  | { jobId: string; secret: string; outputRoot: string; active: true }
  | { jobId: string; active: false; reason: string; code: "ExpiredToken" | "AccessDenied" }
  | null;

/** What an access key id stands for: null when unknown; inactive when revoked, its job ended or its provider's endpoint is off. */
export async function lookupStorageCredentials(db: Database, accessKeyId: string): Promise<CredentialLookup> {
  const result = await db.$client.execute({
    sql: `SELECT c.job_id, c.secret, c.revoked_at, c.output_root, q.status, q.provider, ${ENABLED} AS enabled
          FROM storage_credentials c LEFT JOIN queue_entries q ON q.job_id = c.job_id LEFT JOIN provider_settings ps ON ps.provider = q.provider
          WHERE c.access_key_id = ?`,
    args: [accessKeyId],
  });
  const row = result.rows[0] as Record<string, unknown> | undefined;
  if (!row) return null;
  const jobId = String(row.job_id);
  if (row.revoked_at !== null) return { jobId, active: false, code: "ExpiredToken", reason: "these credentials were replaced by newer ones" };
  const status = row.status === null ? "deleted" : String(row.status);
  if (!(ACTIVE as readonly string[]).includes(status)) return { jobId, active: false, code: "ExpiredToken", reason: `job ${jobId} is ${status}` };
  if (!Number(row.enabled)) return { jobId, active: false, code: "AccessDenied", reason: `the storage endpoint is turned off for provider ${String(row.provider)}` };
  return { jobId, secret: String(row.secret), outputRoot: String(row.output_root), active: true };
}

/**
 * The jobs that have a directory on the storage endpoint (every job that was ever issued
 * credentials: nothing else can write there), with where it lives and whose job it is: one job
 * (`jobId`), one user's jobs (`ownerId`), or all.
 */
export async function storageDirectories(db: Database, only: { jobId?: string; ownerId?: number | null } = {}): Promise<{ jobId: string; outputRoot: string; createdAt: string; userId: number | null }[]> {
  const where: string[] = [];
  const args: (string | number)[] = [];
  if (only.jobId !== undefined) {
    where.push("c.job_id = ?");
    args.push(only.jobId);
  }
  if (only.ownerId !== undefined && only.ownerId !== null) {
    where.push("q.user_id = ?");
    args.push(only.ownerId);
  }
  const result = await db.$client.execute({
    sql: `SELECT c.job_id, c.output_root, MIN(c.created_at) AS created_at, q.user_id FROM storage_credentials c LEFT JOIN queue_entries q ON q.job_id = c.job_id
          ${where.length ? `WHERE ${where.join(" AND ")}` : ""} GROUP BY c.job_id ORDER BY c.job_id`,
    args,
  });
  return result.rows.map((row) => ({ jobId: String(row.job_id), outputRoot: String(row.output_root), createdAt: String(row.created_at), userId: row.user_id === null ? null : Number(row.user_id) }));
}
