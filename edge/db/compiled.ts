import type { InArgs } from "@libsql/client/web";
import { fillPlaceholders } from "drizzle-orm";
import { QueryBuilder } from "drizzle-orm/sqlite-core";
import type { Database } from "./client";

/** drizzle's query builder without a database, for statements compiled once at load. */
export const queryBuilder = new QueryBuilder();

/**
 * A SELECT built with drizzle (so its columns are checked against the schema) and compiled to SQL
 * once; each run only binds its `sql.placeholder`s. For the hot paths: in workerd, building a
 * query costs more CPU than the libSQL round trip it feeds. Values come back as libSQL gives
 * them (no drizzle column decoders), in the order of `fields`, the keys of the selection.
 *
 * @example
 * const byName = compileSelect<{ id: number }>(queryBuilder.select({ id: users.id }).from(users).where(eq(users.username, sql.placeholder("name"))), ["id"]);
 * const [row] = await byName(db, { name: "alice" });
 */
export function compileSelect<Row extends Record<string, unknown>>(
  query: { toSQL(): { sql: string; params: unknown[] } },
  fields: readonly (keyof Row & string)[],
) {
  const { sql, params } = query.toSQL();
  return async (db: Database, values: Record<string, unknown>): Promise<Row[]> => {
    const result = await db.$client.execute({ sql, args: fillPlaceholders(params, values) as InArgs });
    return result.rows.map((row) => Object.fromEntries(fields.map((field, i) => [field, row[i]])) as Row);
  };
}
