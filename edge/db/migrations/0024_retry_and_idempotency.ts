import type { Migration } from "./migration";

/**
 * v24: retry and continue, and idempotent submits (issue 30, Build 6 and 7).
 * - queue_entries.retry_of: the job a retry continues (POST /api/queue/{job_id}/retry); null for
 *   a submission.
 * - queue_entries.lineage_id: the first job of a chain of retries, shared by all of them; null
 *   for a job nobody retried from (its lineage is itself).
 * - queue_entries.resume_from: the checkpoints the retry may resume from, JSON
 *   `{job_id, output_dir, checkpoints: ["checkpoint-40", ...]}` newest first; the runner takes
 *   the first it still finds.
 * - idempotency_keys: one row per (user, key): the request it answered (route and body hash),
 *   and once answered its status and body; a row without a status is a request in flight.
 *   Swept 24 h after created_at by the Scheduler's housekeeping.
 */
export const v24: Migration = {
  version: 24,
  name: "retry_and_idempotency",
  statements: [
    `ALTER TABLE queue_entries ADD COLUMN retry_of TEXT`,
    `ALTER TABLE queue_entries ADD COLUMN lineage_id TEXT`,
    `ALTER TABLE queue_entries ADD COLUMN resume_from TEXT`,
    `CREATE INDEX queue_entries_lineage ON queue_entries (lineage_id)`,
    `CREATE TABLE idempotency_keys (
      user_id INTEGER NOT NULL,
      key TEXT NOT NULL,
      route TEXT NOT NULL,
      request_hash TEXT NOT NULL,
      status INTEGER,
      body TEXT,
      created_at TEXT NOT NULL,
      PRIMARY KEY (user_id, key)
    )`,
    `CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at)`,
  ],
};
