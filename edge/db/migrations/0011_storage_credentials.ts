import type { Migration } from "./migration";

/**
 * v11: per-job credentials for the S3-compatible storage endpoint. The access key id is the job's
 * upload token; the secret signs SigV4 requests, so it is kept as given (a hash could
 * not verify an HMAC). Valid while the job is active and the row is not revoked.
 */
export const v11: Migration = {
  version: 11,
  name: "storage_credentials",
  statements: [
    `CREATE TABLE storage_credentials (
      access_key_id TEXT PRIMARY KEY,
      job_id TEXT NOT NULL,
      secret TEXT NOT NULL,
      created_at TEXT NOT NULL,
      revoked_at TEXT
    )`,
    `CREATE INDEX storage_credentials_job ON storage_credentials (job_id)`,
  ],
};
