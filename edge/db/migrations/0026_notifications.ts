import type { Migration } from "./migration";

/**
 * v26: notifications (issue 30, Build 4).
 * - notification_preferences: one row per user who saved theirs: the event kinds they want and
 *   their channels (JSON, shared/schemas/notifications.ts), the webhook's own signing secret.
 * - notification_deliveries: one row per message per channel: its kind, target, outcome, attempts,
 *   last error, when the transition happened, when it was delivered; `next_at` (ms) is when the
 *   next attempt is due and `lease_until` (ms) keeps two senders off the same row.
 * - approval_links: the single-use links sent to admins with approval.needed; `used_at` once used.
 */
export const v26: Migration = {
  version: 26,
  name: "notifications",
  statements: [
    `CREATE TABLE notification_preferences (
      user_id INTEGER PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
      preferences TEXT NOT NULL,
      webhook_secret TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
    `CREATE TABLE notification_deliveries (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      kind TEXT NOT NULL,
      subject TEXT NOT NULL,
      channel TEXT NOT NULL,
      target TEXT NOT NULL,
      message TEXT NOT NULL,
      status TEXT NOT NULL DEFAULT 'pending',
      attempts INTEGER NOT NULL DEFAULT 0,
      last_error TEXT,
      next_at INTEGER NOT NULL,
      lease_until INTEGER,
      event_at TEXT NOT NULL,
      created_at TEXT NOT NULL,
      delivered_at TEXT
    )`,
    `CREATE INDEX notification_deliveries_due ON notification_deliveries (status, next_at)`,
    `CREATE INDEX notification_deliveries_user ON notification_deliveries (user_id, id)`,
    `CREATE TABLE approval_links (
      id TEXT PRIMARY KEY,
      job_id TEXT NOT NULL,
      admin_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      expires_at TEXT NOT NULL,
      used_at TEXT
    )`,
  ],
};
