import { sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { environments, settings } from "../db/schema";
import { notFound } from "../errors";

/**
 * The settings key naming the active environment. It holds the environment's id, not its name,
 * so a rename keeps the environment active without touching the setting; one key means at most
 * one environment is ever active.
 */
export const ACTIVE_ENVIRONMENT_SETTING = "active_environment";

/** 1 for the active environment's row, else 0: a column for selects over `environments`. */
export const isActiveColumn = sql<number>`coalesce(${environments.id} = (SELECT CAST(${settings.value} AS INTEGER) FROM ${settings} WHERE ${settings.key} = ${ACTIVE_ENVIRONMENT_SETTING}), 0)`;

/**
 * Makes the named environment the active one, replacing any other, in one statement: the
 * setting is written only if the environment exists, else 404.
 *
 * @example
 * await activateEnvironment(db, "portraits");
 */
export async function activateEnvironment(db: Database, name: string): Promise<void> {
  const result = await db.$client.execute({
    sql: `INSERT INTO settings (key, value, updated_at)
          SELECT ?, CAST(id AS TEXT), ? FROM environments WHERE name = ?
          ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
    args: [ACTIVE_ENVIRONMENT_SETTING, new Date().toISOString(), name],
  });
  if (result.rowsAffected !== 1) throw notFound(`Environment ${JSON.stringify(name)}`);
}
