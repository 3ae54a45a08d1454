import type { Migration } from "./migration";

/**
 * v18: which worker ran each attempt of a job (issue 25), and what each runner says still runs.
 * - job_attempts: one row per job and attempt, written by triggers whenever an entry becomes
 *   running on a worker (admitted, or stored straight as running), so no transition has to
 *   remember it. The edge takes a late event batch of an attempt from the worker that ran it,
 *   after the job moved on (requeued to another box, ended): nothing a trainer printed is lost.
 *   Running entries are backfilled.
 * - workers.running_trainers: the trainers a runner last reported alive, with their attempts
 *   (JSON), so an operator sees one still stopping.
 */
export const v18: Migration = {
  version: 18,
  name: "job_attempts",
  statements: [
    `CREATE TABLE job_attempts (
      job_id TEXT NOT NULL,
      attempt INTEGER NOT NULL,
      worker_id INTEGER NOT NULL,
      started_at TEXT NOT NULL,
      PRIMARY KEY (job_id, attempt)
    )`,
    `INSERT OR IGNORE INTO job_attempts (job_id, attempt, worker_id, started_at)
      SELECT job_id, attempt, worker_id, COALESCE(started_at, updated_at, queued_at) FROM queue_entries WHERE worker_id IS NOT NULL`,
    `CREATE TRIGGER job_attempts_on_insert AFTER INSERT ON queue_entries
      WHEN NEW.status = 'running' AND NEW.worker_id IS NOT NULL
      BEGIN
        INSERT OR IGNORE INTO job_attempts (job_id, attempt, worker_id, started_at)
        VALUES (NEW.job_id, NEW.attempt, NEW.worker_id, COALESCE(NEW.started_at, NEW.queued_at));
      END`,
    `CREATE TRIGGER job_attempts_on_start AFTER UPDATE OF status, worker_id ON queue_entries
      WHEN NEW.status = 'running' AND NEW.worker_id IS NOT NULL
      BEGIN
        INSERT OR IGNORE INTO job_attempts (job_id, attempt, worker_id, started_at)
        VALUES (NEW.job_id, NEW.attempt, NEW.worker_id, COALESCE(NEW.started_at, NEW.updated_at, NEW.queued_at));
      END`,
    `ALTER TABLE workers ADD COLUMN running_trainers TEXT`,
  ],
};
