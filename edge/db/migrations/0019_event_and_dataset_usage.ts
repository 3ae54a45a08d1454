import type { Migration } from "./migration";

/**
 * v19: what each job's event log and each user's dataset folders hold (issue 26, "Bounds").
 * - job_event_usage: per job, the events and payload bytes stored, those counted and not stored
 *   (past the job's cap or its owner's quota), and where truncation began (the log's size then;
 *   null while the job has dropped nothing), with the job's owner so a user's total is one
 *   indexed sum. Written in the same batch as every stored event (edge/jobs/events.ts).
 *   Backfilled from the events already stored.
 * - dataset_usage: per folder owner, the bytes and files (folder markers included) under the
 *   top-level dataset folders they own, reserved before each write (edge/datasets/quota.ts).
 *   Owners start at zero: files uploaded before this version are not counted.
 */
export const v19: Migration = {
  version: 19,
  name: "event_and_dataset_usage",
  statements: [
    `CREATE TABLE job_event_usage (
      job_id TEXT PRIMARY KEY,
      user_id INTEGER,
      events INTEGER NOT NULL DEFAULT 0,
      bytes INTEGER NOT NULL DEFAULT 0,
      dropped INTEGER NOT NULL DEFAULT 0,
      dropped_bytes INTEGER NOT NULL DEFAULT 0,
      truncated_events INTEGER,
      truncated_bytes INTEGER
    )`,
    `CREATE INDEX job_event_usage_user ON job_event_usage (user_id)`,
    `INSERT INTO job_event_usage (job_id, user_id, events, bytes)
      SELECT e.job_id, (SELECT q.user_id FROM queue_entries q WHERE q.job_id = e.job_id), COUNT(*), SUM(length(CAST(e.payload AS BLOB)))
      FROM job_events e GROUP BY e.job_id`,
    `CREATE TABLE dataset_usage (
      user_id INTEGER PRIMARY KEY,
      bytes INTEGER NOT NULL DEFAULT 0,
      files INTEGER NOT NULL DEFAULT 0
    )`,
  ],
};
