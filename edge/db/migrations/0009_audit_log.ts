import type { Migration } from "./migration";

/**
 * v9: the audit trail. Append-only; each row carries the previous row's hash and its own, so an
 * edited or removed row breaks the chain (GET /api/audit/verify). `id` is assigned by the writer
 * as the previous id + 1: two writers racing for the same place collide on the primary key, and
 * the loser re-reads the tail and retries, so the chain never forks.
 */
export const v9: Migration = {
  version: 9,
  name: "audit_log",
  statements: [
    `CREATE TABLE audit_log (
      id INTEGER PRIMARY KEY,
      occurred_at TEXT NOT NULL,
      event_type TEXT NOT NULL,
      actor_user_id INTEGER,
      actor TEXT,
      client_ip TEXT,
      user_agent TEXT,
      target TEXT,
      details TEXT NOT NULL DEFAULT '{}',
      prev_hash TEXT NOT NULL,
      hash TEXT NOT NULL
    )`,
    `CREATE INDEX audit_log_event_type ON audit_log (event_type, id)`,
    `CREATE INDEX audit_log_occurred_at ON audit_log (occurred_at)`,
  ],
};
