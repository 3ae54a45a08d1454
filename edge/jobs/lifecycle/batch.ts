import type { InStatement, ResultSet } from "@libsql/client/web";
import type { Database } from "../../db/client";

/**
 * A transition's statements for a write batch shared with others, and how to read what it
 * changed from their results (only its own, in order). The Scheduler writes a whole pass - new
 * submissions and admissions - as one batch: all of it is stored, or none.
 */
export interface BatchPart<T> {
  statements: InStatement[];
  read(results: Pick<ResultSet, "rows">[]): T;
}

/**
 * Writes the parts as one batch, in order, and returns each part's reading. No statement: no
 * round trip.
 *
 * @example
 * const [submitted, admitted] = await writeBatch(db, [submitJobs(group, stamp), admitJobs(plan.admitted, localWorkerId, stamp)]);
 */
export async function writeBatch<T extends unknown[]>(db: Database, parts: { [K in keyof T]: BatchPart<T[K]> }): Promise<T> {
  const list = parts as BatchPart<unknown>[];
  const statements = list.flatMap((p) => p.statements);
  const results: Pick<ResultSet, "rows">[] = statements.length ? await db.$client.batch(statements, "write") : [];
  let at = 0;
  return list.map((p) => {
    const own = results.slice(at, (at += p.statements.length));
    return p.read(own);
  }) as T;
}
