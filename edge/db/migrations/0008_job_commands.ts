import type { Migration } from "./migration";

/**
 * v8: commands for a running job's trainer (validation, checkpoint, stop, cancel), kept until the
 * runner acknowledges them, so one sent while the runner is unreachable is delivered when it
 * is back.
 */
export const v8: Migration = {
  version: 8,
  name: "job_commands",
  statements: [
    `CREATE TABLE job_commands (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      job_id TEXT NOT NULL,
      worker_id INTEGER NOT NULL,
      command TEXT NOT NULL,
      requested_by INTEGER,
      created_at TEXT NOT NULL,
      acked_at TEXT
    )`,
    `CREATE INDEX job_commands_worker_open ON job_commands (worker_id, acked_at)`,
  ],
};
