import type { Database } from "../../db/client";

/**
 * Deletes terminal entries (completed, failed, cancelled) completed more than `days` days ago,
 * with their approval requests and what their runs kept (run-keep.ts); active entries are never touched. One batch. It has no effects
 * to apply: the entries it removes ended long ago (their watchers and webhooks with them).
 *
 * @example
 * const deleted = await cleanupQueue(db, 30);
 */
export async function cleanupQueue(db: Database, days: number, now = new Date()): Promise<number> {
  const cutoff = new Date(now.getTime() - days * 86_400_000).toISOString();
  const terminal = `status IN ('completed', 'failed', 'cancelled') AND completed_at IS NOT NULL AND completed_at < ?`;
  const kept = (table: string) => ({
    sql: `DELETE FROM ${table} WHERE job_id IN (SELECT job_id FROM queue_entries WHERE ${terminal})`,
    args: [cutoff],
  });
  const [, , , , deleted] = await db.$client.batch(
    [
      kept("run_points"),
      kept("run_images"),
      kept("kept_runs"),
      { sql: `DELETE FROM approval_requests WHERE entry_id IN (SELECT id FROM queue_entries WHERE ${terminal})`, args: [cutoff] },
      { sql: `DELETE FROM queue_entries WHERE ${terminal}`, args: [cutoff] },
    ],
    "write",
  );
  return deleted!.rowsAffected;
}
