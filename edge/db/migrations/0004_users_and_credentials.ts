import type { Migration } from "./migration";

/** v4: users with levels, sessions, API keys and service settings. */
export const v4: Migration = {
  version: 4,
  name: "users_and_credentials",
  statements: [
    `CREATE TABLE levels (
      name TEXT PRIMARY KEY,
      label TEXT NOT NULL,
      priority INTEGER NOT NULL
    )`,
    `INSERT INTO levels (name, label, priority) VALUES
      ('admin', 'Urgent', 30), ('lead', 'High', 20), ('researcher', 'Normal', 10), ('viewer', 'Low', 0)`,
    `CREATE TABLE users (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      username TEXT NOT NULL UNIQUE COLLATE NOCASE,
      email TEXT NOT NULL UNIQUE COLLATE NOCASE,
      password_hash TEXT NOT NULL,
      created_at TEXT NOT NULL,
      disabled_at TEXT
    )`,
    `CREATE TABLE user_levels (
      user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      level TEXT NOT NULL REFERENCES levels (name),
      PRIMARY KEY (user_id, level)
    )`,
    `CREATE TABLE sessions (
      token_hash TEXT PRIMARY KEY,
      user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      created_at TEXT NOT NULL,
      expires_at TEXT NOT NULL
    )`,
    `CREATE INDEX sessions_user ON sessions (user_id)`,
    `CREATE TABLE api_keys (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      prefix TEXT NOT NULL UNIQUE,
      key_hash TEXT NOT NULL,
      created_at TEXT NOT NULL,
      expires_at TEXT,
      last_used_at TEXT,
      revoked_at TEXT
    )`,
    `CREATE INDEX api_keys_user ON api_keys (user_id)`,
    `CREATE TABLE settings (
      key TEXT PRIMARY KEY,
      value TEXT NOT NULL,
      updated_at TEXT NOT NULL
    )`,
  ],
};
