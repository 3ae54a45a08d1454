import type { Migration } from "./migration";

/**
 * v14: bounds on what users can make the service hold and whom a dataset folder belongs to.
 * - storage_usage: each job's stored bytes and objects on the storage endpoint, kept beside
 *   every write so the quota is checked in one conditional statement (parts of uploads still in
 *   progress are counted from storage_parts). Jobs start at zero: objects stored before this
 *   version are not counted.
 * - dataset_folders: who created each top-level dataset folder. Folders that existed before
 *   this version have no row: they belong to nobody, so only leads and admins change them.
 * - event_watchers: leases of live event watchers (SSE, WebSocket), so one user's watchers over
 *   all jobs can be counted; a lease lapses unless its events hub renews it.
 * - provider webhooks are deduplicated only when signed: an unsigned delivery must not claim a
 *   webhook-id and so block the genuine, signed one; received_at is indexed for the retention sweep.
 */
export const v14: Migration = {
  version: 14,
  name: "bounds",
  statements: [
    `CREATE TABLE storage_usage (
      job_id TEXT PRIMARY KEY,
      bytes INTEGER NOT NULL DEFAULT 0,
      objects INTEGER NOT NULL DEFAULT 0
    )`,
    `CREATE TABLE dataset_folders (
      name TEXT PRIMARY KEY,
      created_by INTEGER,
      created_at TEXT NOT NULL
    )`,
    `CREATE TABLE event_watchers (
      id TEXT PRIMARY KEY,
      user_id INTEGER NOT NULL,
      job_id TEXT NOT NULL,
      expires_at INTEGER NOT NULL
    )`,
    `CREATE INDEX event_watchers_user ON event_watchers (user_id, expires_at)`,
    `DROP INDEX provider_webhook_events_dedupe`,
    `CREATE UNIQUE INDEX provider_webhook_events_dedupe ON provider_webhook_events (provider, webhook_id) WHERE webhook_id IS NOT NULL AND signed = 1`,
    `CREATE INDEX provider_webhook_events_received ON provider_webhook_events (received_at)`,
  ],
};
