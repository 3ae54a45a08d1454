import type { Database } from "../db/client";
import { randomToken } from "../auth/crypto";
import { ApiError, notFound } from "../errors";

/*
 * Per-job credentials for the storage endpoint. The access key id is the job's upload
 * token; with its secret a job signs S3 requests (SigV4) for its own directory only, and only
 * while the job is active: completion, failure or cancellation ends them without a write, since
 * every check reads the job's status. Issuing again rotates: the earlier pair stops working.
 */

/** Queue statuses in which a job's credentials work. */
const ACTIVE = ["pending", "running", "blocked"] as const;

/** Where jobs without a provider (local GPUs and remote workers) keep their results. */
export const DEFAULT_OUTPUT_ROOT = "outputs";

/** The prefix of every job's own access key id (its upload token); manual key ids may not use it. */
export const UPLOAD_TOKEN_PREFIX = "STU";

export interface IssuedCredentials {
  job_id: string;
  access_key_id: string;
  /** Null when the provider's credentials were configured manually: the job gets them from the server, never the caller. */
  secret_access_key: string | null;
  /** "job": fresh ones for this job; "provider": the provider's manually configured pair. */
  source: "job" | "provider";
  /** The provider's s3_public_url, when it set one: what the job is told to upload to. */
  public_url: string | null;
}

// A job's provider settings as SQL sees them: a job without a provider (local GPUs,
// remote workers) may always use the endpoint; a provider's job only when s3_endpoint_enabled.
const ENABLED = `(q.provider IS NULL OR json_extract(ps.settings, '$.s3_endpoint_enabled') = 1)`;
const MANUAL_KEY = `json_extract(ps.settings, '$.s3_access_key_id')`;
const JOB_WITH_SETTINGS = "queue_entries q LEFT JOIN provider_settings ps ON ps.provider = q.provider";

/**
 * Credentials for an active job, in one batch: 404 unknown job, 403 someone else's (`ownerId`
 * set), 409 not active or its provider's storage endpoint off; nothing changes on any refusal.
 * Fresh ones (the previous revoked) unless the job's provider has credentials configured
 * manually: then those are the job's, and only their key id is returned. Either way the
 * job's directory is fixed at the first issue: the provider's s3_output_path then (else
 * DEFAULT_OUTPUT_ROOT), so a later change of the setting never moves a job's files.
 */
export async function issueStorageCredentials(db: Database, jobId: string, ownerId: number | null): Promise<IssuedCredentials> {
  const accessKeyId = `${UPLOAD_TOKEN_PREFIX}${randomToken(15).replace(/[-_]/g, "0").toUpperCase()}`;
  const secret = randomToken(30);
  const now = new Date().toISOString();
  // The job is this caller's to act on, active, and allowed the endpoint: what every write requires.
  const mayIssue = `EXISTS (SELECT 1 FROM ${JOB_WITH_SETTINGS} WHERE q.job_id = ? AND (? IS NULL OR q.user_id = ?) AND q.status IN (${ACTIVE.map(() => "?").join(", ")}) AND ${ENABLED})`;
  const mayIssueArgs = [jobId, ownerId, ownerId, ...ACTIVE];
  const manual = `(SELECT ${MANUAL_KEY} FROM ${JOB_WITH_SETTINGS} WHERE q.job_id = ?)`;
  const [job] = await db.$client.batch(
    [
      {
        sql: `SELECT q.status, q.user_id, q.provider, ${ENABLED} AS enabled, json_extract(ps.settings, '$.s3_public_url') AS public_url, ${MANUAL_KEY} AS manual_key, ${mayIssue} AS may
              FROM ${JOB_WITH_SETTINGS} WHERE q.job_id = ?`,
        args: [...mayIssueArgs, jobId],
      },
      {
        sql: `UPDATE storage_credentials SET revoked_at = ? WHERE job_id = ? AND revoked_at IS NULL AND ${mayIssue}`,
        args: [now, jobId, ...mayIssueArgs],
      },
      {
        sql: `INSERT INTO storage_credentials (access_key_id, job_id, secret, created_at) SELECT ?, ?, ?, ? WHERE ${mayIssue} AND ${manual} IS NULL`,
        args: [accessKeyId, jobId, secret, now, ...mayIssueArgs, jobId],
      },
      {
        sql: `INSERT OR IGNORE INTO storage_directories (job_id, output_root, created_at)
              SELECT ?, COALESCE((SELECT json_extract(ps.settings, '$.s3_output_path') FROM ${JOB_WITH_SETTINGS} WHERE q.job_id = ?), ?), ? WHERE ${mayIssue}`,
        args: [jobId, jobId, DEFAULT_OUTPUT_ROOT, now, ...mayIssueArgs],
      },
    ],
    "write",
  );
  const row = job!.rows[0];
  if (row === undefined) throw notFound(`Job ${jobId}`);
  if (ownerId !== null && Number(row.user_id) !== ownerId)
    throw new ApiError(403, "forbidden", `Job ${jobId} is not yours; a lead or admin can issue credentials for any job`);
  if (!Number(row.may)) {
    if (!Number(row.enabled))
      throw new ApiError(
        409,
        "storage_endpoint_disabled",
        `The storage endpoint is off for provider ${String(row.provider)}: an admin turns it on with PUT /api/cloud/providers/${String(row.provider)} {"s3_endpoint_enabled": true}`,
      );
    throw new ApiError(
      409,
      "job_not_active",
      `Job ${jobId} is ${String(row.status)}: storage credentials are only issued to pending, blocked or running jobs`,
    );
  }
  const publicUrl = row.public_url === null || row.public_url === undefined ? null : String(row.public_url);
  if (row.manual_key !== null && row.manual_key !== undefined)
    return { job_id: jobId, access_key_id: String(row.manual_key), secret_access_key: null, source: "provider", public_url: publicUrl };
  return { job_id: jobId, access_key_id: accessKeyId, secret_access_key: secret, source: "job", public_url: publicUrl };
}

/** Wait reasons of a job that cannot run as configured (the Scheduler's plan marks them `never`). */
const NEVER_FITS = new Set(["insufficient_gpus", "no_matching_worker", "trainer_unavailable"]);

/**
 * 409 `job_cannot_run` when job `jobId` waits for what nothing here can give it (more GPUs than
 * the box has, no worker with its labels and GPUs): it would never use its credentials, so it
 * gets none. `waiting`: the Scheduler's latest reasons (waitInfo). Other jobs pass.
 */
export async function assertJobCanRun(
  db: Database,
  jobId: string,
  waiting: { id: number; reason: string; message: string }[],
): Promise<void> {
  const found = await db.$client.execute({ sql: "SELECT id FROM queue_entries WHERE job_id = ? AND status = 'pending'", args: [jobId] });
  const row = found.rows[0];
  if (!row) return;
  const wait = waiting.find((w) => w.id === Number(row.id));
  if (wait && NEVER_FITS.has(wait.reason)) {
    throw new ApiError(
      409,
      "job_cannot_run",
      `Job ${jobId} cannot run as configured (${wait.reason}: ${wait.message}), so it gets no storage credentials; cancel it and submit one that fits`,
    );
  }
}

/** Why a signed request is refused before its signature is even checked. */
type Inactive = { active: false; reason: string; code: "ExpiredToken" | "AccessDenied" };

export type CredentialLookup =
  /** One job's own credentials: that job's bucket only. */
  | { kind: "job"; jobId: string; secret: string; outputRoot: string; active: true }
  /** A provider's manually configured credentials: the buckets of that provider's active jobs. */
  | { kind: "provider"; provider: string; secret: string; active: true }
  | (Inactive & { jobId: string })
  | null;

/**
 * What an access key id stands for: null when unknown; inactive when revoked, its job ended or
 * its provider's endpoint is off. A job's own key id starts with UPLOAD_TOKEN_PREFIX; any other is
 * looked for among the providers' manual ones. One query either way.
 */
export async function lookupStorageCredentials(db: Database, accessKeyId: string): Promise<CredentialLookup> {
  if (!accessKeyId.startsWith(UPLOAD_TOKEN_PREFIX)) {
    const manual = await db.$client.execute({
      sql: `SELECT provider, json_extract(settings, '$.s3_secret_access_key') AS secret FROM provider_settings WHERE json_extract(settings, '$.s3_access_key_id') = ?`,
      args: [accessKeyId],
    });
    const provider = manual.rows[0];
    return provider ? { kind: "provider", provider: String(provider.provider), secret: String(provider.secret), active: true } : null;
  }
  const own = await db.$client.execute({
    sql: `SELECT c.job_id, c.secret, c.revoked_at, d.output_root, q.status, q.provider, ${ENABLED} AS enabled
          FROM storage_credentials c LEFT JOIN storage_directories d ON d.job_id = c.job_id
          LEFT JOIN queue_entries q ON q.job_id = c.job_id LEFT JOIN provider_settings ps ON ps.provider = q.provider
          WHERE c.access_key_id = ?`,
    args: [accessKeyId],
  });
  const row = own.rows[0] as Record<string, unknown> | undefined;
  if (!row) return null;
  const jobId = String(row.job_id);
  if (row.revoked_at !== null)
    return { jobId, active: false, code: "ExpiredToken", reason: "these credentials were replaced by newer ones" };
  const status = row.status === null ? "deleted" : String(row.status);
  if (!(ACTIVE as readonly string[]).includes(status))
    return { jobId, active: false, code: "ExpiredToken", reason: `job ${jobId} is ${status}` };
  if (!Number(row.enabled))
    return {
      jobId,
      active: false,
      code: "AccessDenied",
      reason: `the storage endpoint is turned off for provider ${String(row.provider)}`,
    };
  return { kind: "job", jobId, secret: String(row.secret), outputRoot: String(row.output_root ?? DEFAULT_OUTPUT_ROOT), active: true };
}

/**
 * Where job `jobId` keeps its results when a provider's manual credentials address it: only a job
 * of that provider, active, with the endpoint on and a directory (its credentials were issued).
 */
export async function providerJobDirectory(db: Database, provider: string, jobId: string): Promise<{ outputRoot: string } | Inactive> {
  const result = await db.$client.execute({
    sql: `SELECT q.status, q.provider, ${ENABLED} AS enabled, d.output_root FROM ${JOB_WITH_SETTINGS} LEFT JOIN storage_directories d ON d.job_id = q.job_id WHERE q.job_id = ?`,
    args: [jobId],
  });
  const row = result.rows[0];
  if (!row || row.provider !== provider)
    return { active: false, code: "AccessDenied", reason: `bucket ${jobId} is not a job of provider ${provider}` };
  if (!(ACTIVE as readonly string[]).includes(String(row.status)))
    return { active: false, code: "ExpiredToken", reason: `job ${jobId} is ${String(row.status)}` };
  if (!Number(row.enabled))
    return { active: false, code: "AccessDenied", reason: `the storage endpoint is turned off for provider ${provider}` };
  if (row.output_root === null)
    return {
      active: false,
      code: "AccessDenied",
      reason: `job ${jobId} has no storage directory yet: issue its credentials first (POST /api/queue/${jobId}/storage-credentials)`,
    };
  return { outputRoot: String(row.output_root) };
}

/**
 * The jobs that have a directory on the storage endpoint (every job that was ever issued
 * credentials: nothing else can write there), with where it lives and whose job it is: one job
 * (`jobId`), one user's jobs (`ownerId`), one provider's active jobs (`provider`), or all.
 */
export async function storageDirectories(
  db: Database,
  only: { jobId?: string; ownerId?: number | null; provider?: string } = {},
): Promise<{ jobId: string; outputRoot: string; createdAt: string; userId: number | null }[]> {
  const where: string[] = [];
  const args: (string | number)[] = [];
  if (only.jobId !== undefined) {
    where.push("d.job_id = ?");
    args.push(only.jobId);
  }
  if (only.ownerId !== undefined && only.ownerId !== null) {
    where.push("q.user_id = ?");
    args.push(only.ownerId);
  }
  if (only.provider !== undefined) {
    where.push(`q.provider = ? AND q.status IN (${ACTIVE.map(() => "?").join(", ")})`);
    args.push(only.provider, ...ACTIVE);
  }
  const result = await db.$client.execute({
    sql: `SELECT d.job_id, d.output_root, d.created_at, q.user_id FROM storage_directories d LEFT JOIN queue_entries q ON q.job_id = d.job_id
          ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY d.job_id`,
    args,
  });
  return result.rows.map((row) => ({
    jobId: String(row.job_id),
    outputRoot: String(row.output_root),
    createdAt: String(row.created_at),
    userId: row.user_id === null ? null : Number(row.user_id),
  }));
}

/**
 * The credentials a runner hands the trainer of a job it runs: the job's current pair, or fresh
 * ones when it has none, so a runner asking again (a restarted runner, a retried attempt) never
 * revokes the pair a trainer may be using. 404 unless the job is running on `workerId`.
 */
export async function runnerStorageCredentials(db: Database, workerId: number, jobId: string): Promise<IssuedCredentials> {
  const [job, current] = await db.$client.batch(
    [
      { sql: "SELECT 1 FROM queue_entries WHERE job_id = ? AND worker_id = ? AND status = 'running'", args: [jobId, workerId] },
      {
        sql: "SELECT access_key_id, secret FROM storage_credentials WHERE job_id = ? AND revoked_at IS NULL ORDER BY created_at DESC LIMIT 1",
        args: [jobId],
      },
    ],
    "read",
  );
  if (!job!.rows.length) throw notFound(`Running job ${jobId} of this worker`);
  const pair = current!.rows[0];
  if (pair)
    return {
      job_id: jobId,
      access_key_id: String(pair.access_key_id),
      secret_access_key: String(pair.secret),
      source: "job",
      public_url: null,
    };
  return issueStorageCredentials(db, jobId, null);
}
