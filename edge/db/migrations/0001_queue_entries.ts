import type { Migration } from "./migration";

/** v1: the queue as it began - one table of jobs ordered by priority and submission time. */
export const v1: Migration = {
  version: 1,
  name: "queue_entries",
  statements: [
    `CREATE TABLE queue_entries (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      job_id TEXT NOT NULL UNIQUE,
      user_id INTEGER,
      provider TEXT DEFAULT 'replicate',
      config_name TEXT,
      priority INTEGER NOT NULL DEFAULT 10,
      status TEXT NOT NULL DEFAULT 'pending',
      position INTEGER NOT NULL DEFAULT 0,
      queued_at TEXT NOT NULL,
      started_at TEXT,
      completed_at TEXT,
      estimated_cost REAL NOT NULL DEFAULT 0.0,
      error_message TEXT,
      metadata TEXT
    )`,
    `CREATE INDEX queue_entries_status_priority ON queue_entries (status, priority DESC, queued_at)`,
    `CREATE INDEX queue_entries_user_status ON queue_entries (user_id, status)`,
  ],
};
