import type { Client } from "@libsql/client";
import { MIGRATIONS, type Migration } from "./migrations/index";

/*
 * A small migrator instead of drizzle-kit's: the schema version must be a plain integer the
 * health check can report (e.g. "v3 adds GPU allocation fields"), and the same code must run
 * from Node (start-up, deploy) over any libSQL client. Each version is one write batch, so a
 * failure leaves the database at the previous version.
 */

const CREATE_VERSION_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at TEXT NOT NULL
)`;

/** The highest schema version applied, 0 for an empty database. */
export async function currentSchemaVersion(client: Client): Promise<number> {
  const exists = await client.execute(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`);
  if (exists.rows.length === 0) return 0;
  const result = await client.execute(`SELECT COALESCE(MAX(version), 0) AS version FROM schema_migrations`);
  return Number(result.rows[0]?.version ?? 0);
}

/**
 * Applies every migration above the database's version (up to `upTo`, for tests that build old
 * databases), in order, each atomically. Returns the versions applied.
 *
 * @example
 * const applied = await applyMigrations(client); // [] when already current
 */
export async function applyMigrations(
  client: Client,
  {
    upTo = Infinity,
    migrations = MIGRATIONS,
    onApply,
  }: { upTo?: number; migrations?: readonly Migration[]; onApply?: (m: Migration) => void } = {},
): Promise<number[]> {
  await client.execute(CREATE_VERSION_TABLE);
  const from = await currentSchemaVersion(client);
  const applied: number[] = [];
  for (const migration of migrations) {
    if (migration.version <= from || migration.version > upTo) continue;
    onApply?.(migration);
    await client.batch(
      [
        ...migration.statements,
        // In the same batch: a migrator racing another fails (on the altered table or this
        // primary key) and rolls back instead of applying the version twice.
        {
          sql: `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
          args: [migration.version, migration.name, new Date().toISOString()],
        },
      ],
      "write",
    );
    applied.push(migration.version);
  }
  return applied;
}
