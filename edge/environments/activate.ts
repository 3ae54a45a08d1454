import { sql } from "drizzle-orm";
import { ownerScope } from "../../shared/levels";
import type { Database } from "../db/client";
import { environments } from "../db/schema";
import { whyUnchanged, type Actor } from "./ownership";

/**
 * 1 when the row of `environments` is `userId`'s active environment, else 0: a column for
 * selects. The active environment is per user (table active_environments, one row per user), so
 * one user's choice never changes what another's forms run.
 */
export const isActiveFor = (userId: number) =>
  sql<number>`EXISTS (SELECT 1 FROM active_environments a WHERE a.user_id = ${userId} AND a.environment_id = ${environments.id})`;

/**
 * Makes the named environment the caller's active one, replacing their previous choice, in one
 * statement that writes only if the environment exists and the caller may change it (its owner,
 * a lead or an admin): else 404 or 403 `not_owner`, and nothing changes.
 *
 * @example
 * await activateEnvironment(db, "portraits", { id: 7, level: "researcher" });
 */
export async function activateEnvironment(db: Database, name: string, actor: Actor): Promise<void> {
  const result = await db.$client.execute({
    sql: `INSERT INTO active_environments (user_id, environment_id, updated_at)
          SELECT ?1, id, ?2 FROM environments WHERE name = ?3 AND (?4 IS NULL OR created_by = ?4)
          ON CONFLICT (user_id) DO UPDATE SET environment_id = excluded.environment_id, updated_at = excluded.updated_at`,
    args: [actor.id, new Date().toISOString(), name, ownerScope(actor)],
  });
  if (result.rowsAffected !== 1) throw await whyUnchanged(db, name);
}
