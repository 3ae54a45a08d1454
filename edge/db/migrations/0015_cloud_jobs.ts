import type { Migration } from "./migration";

/**
 * v15: cloud training.
 * - cloud_jobs: what a cloud job needs beyond its queue entry: the provider's id for the run, the
 *   hardware and its rate at submit, the result destination, the packaging summary the user saw,
 *   the archive's upload progress and file at the provider, the provider's status and times, the
 *   billed seconds and cost, and how much of the provider's log text became job events.
 * - provider_state: each provider's circuit breaker and its last credential check, shared by
 *   every isolate (and shown in the metrics).
 */
export const v15: Migration = {
  version: 15,
  name: "cloud_jobs",
  statements: [
    `CREATE TABLE cloud_jobs (
      job_id TEXT PRIMARY KEY,
      provider TEXT NOT NULL,
      provider_job_id TEXT,
      hardware TEXT NOT NULL,
      rate_usd_per_second REAL NOT NULL,
      expected_seconds INTEGER NOT NULL,
      destination TEXT NOT NULL,
      summary TEXT NOT NULL,
      phase TEXT NOT NULL DEFAULT 'queued',
      archive_bytes INTEGER NOT NULL DEFAULT 0,
      uploaded_bytes INTEGER NOT NULL DEFAULT 0,
      provider_file_id TEXT,
      provider_file_url TEXT,
      archive_deleted_at TEXT,
      provider_status TEXT,
      provider_started_at TEXT,
      provider_completed_at TEXT,
      billed_seconds REAL,
      cost_usd REAL NOT NULL DEFAULT 0,
      cost_final INTEGER NOT NULL DEFAULT 0,
      logs_offset INTEGER NOT NULL DEFAULT 0,
      output TEXT,
      provider_error TEXT,
      submitted_at TEXT,
      last_polled_at TEXT,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
    `CREATE UNIQUE INDEX cloud_jobs_provider_job ON cloud_jobs (provider, provider_job_id) WHERE provider_job_id IS NOT NULL`,
    `CREATE TABLE provider_state (
      provider TEXT PRIMARY KEY,
      breaker_state TEXT NOT NULL DEFAULT 'closed',
      consecutive_failures INTEGER NOT NULL DEFAULT 0,
      half_open_successes INTEGER NOT NULL DEFAULT 0,
      opened_at TEXT,
      failures_total INTEGER NOT NULL DEFAULT 0,
      credentials_valid INTEGER,
      credentials_message TEXT,
      validated_at TEXT,
      validation_latency_ms REAL
    )`,
  ],
};
