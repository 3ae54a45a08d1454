import type { Migration } from "./migration";

/**
 * v13 (issue 12, ownership): each job keeps the configuration it was submitted with
 * (`config_snapshot`, `dataloader_snapshot`: the runner launches from these, never from the live
 * environment), and the active environment is per user. Jobs still waiting or running get the
 * live environment's configuration as their snapshot; every existing user keeps the one global
 * active environment as their own.
 */
export const v13: Migration = {
  version: 13,
  name: "ownership_and_snapshots",
  statements: [
    `ALTER TABLE queue_entries ADD COLUMN config_snapshot TEXT`,
    `ALTER TABLE queue_entries ADD COLUMN dataloader_snapshot TEXT`,
    `UPDATE queue_entries SET
       config_snapshot = (SELECT e.config FROM environments e WHERE e.name = queue_entries.config_name),
       dataloader_snapshot = (SELECT e.dataloader FROM environments e WHERE e.name = queue_entries.config_name)
     WHERE status IN ('pending', 'running', 'blocked')`,
    `CREATE TABLE active_environments (
      user_id INTEGER PRIMARY KEY REFERENCES users (id),
      environment_id INTEGER NOT NULL REFERENCES environments (id),
      updated_at TEXT NOT NULL
    )`,
    `CREATE INDEX active_environments_environment ON active_environments (environment_id)`,
    `INSERT INTO active_environments (user_id, environment_id, updated_at)
     SELECT u.id, e.id, s.updated_at FROM users u, settings s JOIN environments e ON e.id = CAST(s.value AS INTEGER)
     WHERE s.key = 'active_environment'`,
    `DELETE FROM settings WHERE key = 'active_environment'`,
  ],
};
