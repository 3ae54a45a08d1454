import type { Database } from "../db/client";
import { periodStart } from "./cost";

/*
 * What is committed against the cloud spending limit: read by a pass (its capacity), a cloud
 * submission's limit check, a cloud job's budget check and the metrics.
 */

type Row = Record<string, unknown>;

/** True while a cloud spending limit is set. */
const LIMIT_SET = `EXISTS (SELECT 1 FROM settings WHERE key = 'cloud' AND json_extract(value, '$.spending_limit_usd') IS NOT NULL)`;

/**
 * What is committed against the cloud spending limit, for each period at once (the setting read
 * in the same batch picks one): the costs of cloud jobs that ended within the period, plus each
 * running cloud job's estimate or its cost so far, whichever is larger. Two index-backed parts
 * (ended by status and completed_at, running by job type and status), so a pass over 10,000
 * pending jobs reads only the few that count, and none while no limit is set (every pass and
 * submission group reads it). `byProvider`: one row per provider.
 */
export function committedSpendingStatement(now: Date, byProvider = false): { sql: string; args: string[] } {
  const [day, week, month] = (["day", "week", "month"] as const).map((p) => periodStart(p, now).toISOString()) as [string, string, string];
  const ended = (since: number) => `coalesce(sum(CASE WHEN completed_at >= ?${since} THEN cost END), 0)`;
  return {
    sql: `SELECT ${byProvider ? "provider, " : ""}${ended(1)} AS day, ${ended(2)} AS week, ${ended(3)} AS month, coalesce(sum(running), 0) AS running
          FROM (
            SELECT q.provider, q.completed_at, c.cost_usd AS cost, 0 AS running FROM queue_entries q JOIN cloud_jobs c ON c.job_id = q.job_id
            WHERE q.status IN ('completed', 'failed', 'cancelled') AND q.completed_at >= min(?2, ?3) AND q.job_type = 'cloud' AND ${LIMIT_SET}
            UNION ALL
            SELECT q.provider, NULL, 0, max(q.estimated_cost, coalesce(c.cost_usd, 0)) FROM queue_entries q LEFT JOIN cloud_jobs c ON c.job_id = q.job_id
            WHERE q.job_type = 'cloud' AND q.status = 'running' AND ${LIMIT_SET}
          )${byProvider ? " GROUP BY provider" : ""}`,
    args: [day, week, month],
  };
}

/** The committed total of `period` from a row of committedSpendingStatement. */
export function committedFrom(row: Row, period: "day" | "week" | "month"): number {
  return Number(row[period] ?? 0) + Number(row.running ?? 0);
}

/** What is committed against the spending limit this `period`, read on its own (a submission, a cloud job's budget check). */
export async function committedSpending(db: Database, period: "day" | "week" | "month", now: Date): Promise<number> {
  const result = await db.$client.execute(committedSpendingStatement(now));
  return committedFrom((result.rows[0] ?? {}) as Row, period);
}
