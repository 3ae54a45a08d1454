import type { Migration } from "./migration";

/**
 * v7: each job's event log: what its trainer reported, in order, with a
 * dense index per job that polling (`since_index`) and stream resumption (`Last-Event-ID`) use.
 * (attempt, seq) is the runner's own numbering, so a batch sent twice is stored once.
 */
export const v7: Migration = {
  version: 7,
  name: "job_events",
  statements: [
    `CREATE TABLE job_events (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      job_id TEXT NOT NULL,
      idx INTEGER NOT NULL,
      attempt INTEGER NOT NULL,
      seq INTEGER NOT NULL,
      type TEXT NOT NULL,
      payload TEXT NOT NULL,
      created_at TEXT NOT NULL
    )`,
    `CREATE UNIQUE INDEX job_events_job_idx ON job_events (job_id, idx)`,
    `CREATE UNIQUE INDEX job_events_job_attempt_seq ON job_events (job_id, attempt, seq)`,
  ],
};
