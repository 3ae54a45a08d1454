import type { Migration } from "./migration";

/**
 * v6: what the scheduler needs - where a job may run (target, label globs, preferred devices),
 * the worker it was given, GPU boxes and remote workers with their tokens, approval requests,
 * and the team a user belongs to (fair share).
 */
export const v6: Migration = {
  version: 6,
  name: "scheduler_and_workers",
  statements: [
    `ALTER TABLE queue_entries ADD COLUMN target TEXT NOT NULL DEFAULT 'auto'`,
    `ALTER TABLE queue_entries ADD COLUMN worker_labels TEXT`,
    `ALTER TABLE queue_entries ADD COLUMN device_ids TEXT`,
    `ALTER TABLE queue_entries ADD COLUMN any_gpu INTEGER NOT NULL DEFAULT 0`,
    `ALTER TABLE queue_entries ADD COLUMN worker_id INTEGER`,
    `ALTER TABLE queue_entries ADD COLUMN updated_at TEXT`,
    `CREATE INDEX queue_entries_worker_status ON queue_entries (worker_id, status)`,
    `CREATE INDEX queue_entries_completed ON queue_entries (status, completed_at)`,
    `ALTER TABLE users ADD COLUMN team_id TEXT`,
    `CREATE TABLE approval_requests (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      entry_id INTEGER NOT NULL,
      job_id TEXT NOT NULL,
      rule TEXT NOT NULL,
      status TEXT NOT NULL DEFAULT 'pending',
      requested_at TEXT NOT NULL,
      decided_at TEXT,
      decided_by INTEGER REFERENCES users (id),
      reason TEXT
    )`,
    `CREATE INDEX approval_requests_entry ON approval_requests (entry_id)`,
    `CREATE TABLE workers (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      name TEXT NOT NULL UNIQUE,
      role TEXT NOT NULL DEFAULT 'remote',
      status TEXT NOT NULL DEFAULT 'connecting',
      labels TEXT NOT NULL DEFAULT '{}',
      gpus TEXT NOT NULL DEFAULT '[]',
      hostname TEXT,
      host_stats TEXT,
      token_prefix TEXT NOT NULL UNIQUE,
      token_hash TEXT NOT NULL,
      created_at TEXT NOT NULL,
      registered_at TEXT,
      last_heartbeat TEXT,
      idle_since TEXT
    )`,
    // At most one box is this service's local GPU box.
    `CREATE UNIQUE INDEX workers_one_local ON workers (role) WHERE role = 'local'`,
  ],
};
