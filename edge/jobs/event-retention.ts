import type { Database } from "../db/client";
import { getSetting } from "../settings-store";
import { keepRun } from "./run-keep";

/** How many jobs' logs one sweep deletes (each at most a job's cap and its reserve); the next sweep takes the rest. */
const JOBS_PER_SWEEP = 20;

/**
 * Deletes the event logs of jobs that ended more than `retention_days` (GET/PUT
 * /api/admin/event-limits) ago, and of jobs the queue's cleanup removed, with their usage, which
 * frees their owners' quota. A job that ran keeps its run first (run-keep.ts): its metric series
 * and validation images outlive its log. A running, waiting or recently ended job's log is never touched.
 * Called on the Scheduler's alarm; returns the jobs it looked at (those still ended lost their logs).
 *
 * @example
 * await forgetOldEvents(db); // the jobs that ended more than 30 days ago (the default)
 */
export async function forgetOldEvents(db: Database, now = new Date()): Promise<string[]> {
  const { retention_days } = await getSetting(db, "event_limits");
  const cutoff = new Date(now.getTime() - retention_days * 86_400_000).toISOString();
  // Every job with events has a usage row: the rows are the logs to look at.
  const old = await db.$client.execute({
    sql: `SELECT u.job_id, q.started_at IS NOT NULL AS ran FROM job_event_usage u LEFT JOIN queue_entries q ON q.job_id = u.job_id
          WHERE q.job_id IS NULL OR (q.status IN ('completed', 'failed', 'cancelled') AND q.completed_at IS NOT NULL AND q.completed_at < ?)
          LIMIT ?`,
    args: [cutoff, JOBS_PER_SWEEP],
  });
  const jobs = old.rows.map((r) => String(r.job_id));
  if (!jobs.length) return [];
  for (const row of old.rows) if (Number(row.ran) === 1) await keepRun(db, String(row.job_id), now);
  // Checked again as they are deleted: a job resumed meanwhile keeps its log.
  const ended = (table: string) => `${table}.job_id IN (SELECT value FROM json_each(?1)) AND NOT EXISTS (
    SELECT 1 FROM queue_entries q WHERE q.job_id = ${table}.job_id AND (q.completed_at IS NULL OR q.completed_at >= ?2))`;
  const args = [JSON.stringify(jobs), cutoff];
  await db.$client.batch(
    [
      { sql: `DELETE FROM job_events WHERE ${ended("job_events")}`, args },
      { sql: `DELETE FROM job_event_usage WHERE ${ended("job_event_usage")}`, args },
    ],
    "write",
  );
  return jobs;
}
