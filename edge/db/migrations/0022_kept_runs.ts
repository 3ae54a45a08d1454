import type { Migration } from "./migration";

/**
 * v22: what a run keeps once its event log goes (issue 29, Build 3). Retention deletes an ended
 * job's events `retention_days` after it ended (edge/jobs/event-retention.ts); just before it
 * does, the run's metric series and validation images are copied here, so the runs view and
 * compare keep working for it (edge/jobs/run-keep.ts).
 * - kept_runs: one row per kept run, when it was kept.
 * - run_points: one row per reported step: seconds from the job's first event, loss, learning
 *   rate, seconds per step.
 * - run_images: its validation images in order (n from 0), with step, prompt, media type and the
 *   data URI as the event carried it.
 */
export const v22: Migration = {
  version: 22,
  name: "kept_runs",
  statements: [
    `CREATE TABLE kept_runs (job_id TEXT PRIMARY KEY, kept_at TEXT NOT NULL)`,
    `CREATE TABLE run_points (
      job_id TEXT NOT NULL,
      step REAL NOT NULL,
      seconds REAL NOT NULL,
      loss REAL,
      lr REAL,
      step_time REAL,
      PRIMARY KEY (job_id, step)
    )`,
    `CREATE TABLE run_images (
      job_id TEXT NOT NULL,
      n INTEGER NOT NULL,
      step REAL,
      prompt TEXT,
      mime_type TEXT NOT NULL,
      src TEXT NOT NULL,
      PRIMARY KEY (job_id, n)
    )`,
  ],
};
