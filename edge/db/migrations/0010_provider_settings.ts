import type { Migration } from "./migration";

/**
 * v10: per-provider settings, one JSON document per provider, edited by admins; and
 * the provider webhooks received (POST /api/webhooks/{provider}), kept for the cloud job tracker,
 * unique per provider and webhook-id so a provider's retry is recorded once.
 */
export const v10: Migration = {
  version: 10,
  name: "provider_settings",
  statements: [
    `CREATE TABLE provider_settings (
      provider TEXT PRIMARY KEY,
      settings TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      updated_by INTEGER
    )`,
    `CREATE TABLE provider_webhook_events (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      provider TEXT NOT NULL,
      webhook_id TEXT,
      received_at TEXT NOT NULL,
      client_ip TEXT,
      signed INTEGER NOT NULL DEFAULT 0,
      payload TEXT NOT NULL,
      processed_at TEXT
    )`,
    `CREATE UNIQUE INDEX provider_webhook_events_dedupe ON provider_webhook_events (provider, webhook_id) WHERE webhook_id IS NOT NULL`,
    `CREATE INDEX provider_webhook_events_recent ON provider_webhook_events (provider, id)`,
  ],
};
