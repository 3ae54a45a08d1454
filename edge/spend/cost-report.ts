import type { InStatement } from "@libsql/client/web";
import type { CostReport, GpuPrices } from "../../shared/schemas/spend";
import type { Database } from "../db/client";
import { ApiError } from "../errors";
import { jobSpend, type JobUsage } from "./pricing";

/*
 * GET /api/cost: every started job's GPU-hours and cost, local and cloud together, grouped by
 * user, team, environment or provider over a period. A job counts in the period its end falls in
 * (a running job: now, with its cost so far).
 */

export type CostGroupBy = CostReport["by"];

/** Whose jobs: everyone's, one user's or one team's. */
export type CostFilter = { userId?: number; teamId?: string };

type Row = Record<string, unknown>;
const text = (v: unknown) => (v === null || v === undefined ? null : String(v));

const DAY = 86_400_000;
const RELATIVE = /^(\d{1,6})([mhdw])$/;

/**
 * A period bound: `30d`, `12h`, `2w`, `90m` before `now`, or an ISO date or time. Anything else is
 * refused (422 invalid_period) naming the parameter.
 *
 * @example
 * periodBound("since", "30d", Date.parse("2026-11-27T00:00:00Z")); // Date.parse("2026-10-28T00:00:00Z")
 */
export function periodBound(name: string, value: string, now: number): number {
  const relative = RELATIVE.exec(value);
  if (relative) return now - Number(relative[1]) * { m: 60_000, h: 3_600_000, d: DAY, w: 7 * DAY }[relative[2] as "m" | "h" | "d" | "w"];
  const at = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2})?)?$/.test(value) ? Date.parse(value) : NaN;
  if (Number.isNaN(at))
    throw new ApiError(
      422,
      "invalid_period",
      `${name} "${value}" is neither a span before now (30d, 12h, 2w, 90m) nor an ISO date or time`,
      [{ path: `query.${name}`, message: "not 30d, 12h, 2w, 90m or an ISO date" }],
    );
  return at;
}

/**
 * The started jobs whose end (or now, while running) falls in [since, until), with what pricing
 * them needs: by the status and completed_at indexes, never a scan of every entry.
 */
function usageStatement(since: string, until: string, now: string, filter: CostFilter): InStatement {
  const args: (string | number)[] = [since, until, now];
  let where = "";
  if (filter.userId !== undefined) {
    args.push(filter.userId);
    where += ` AND q.user_id = ?${args.length}`;
  }
  if (filter.teamId !== undefined) {
    args.push(filter.teamId);
    where += ` AND q.team_id = ?${args.length}`;
  }
  return {
    sql: `SELECT q.job_type, q.provider, q.config_name, q.team_id, u.username, q.started_at, q.completed_at, q.allocated_gpus,
                 w.name AS worker_name, w.role AS worker_role, w.gpus AS worker_gpus, c.cost_usd, c.billed_seconds, c.hardware
          FROM queue_entries q
          LEFT JOIN users u ON u.id = q.user_id
          LEFT JOIN workers w ON w.id = q.worker_id
          LEFT JOIN cloud_jobs c ON c.job_id = q.job_id
          WHERE q.started_at IS NOT NULL AND ((q.status = 'running' AND ?3 >= ?1 AND ?3 < ?2)
            OR (q.status IN ('completed', 'failed', 'cancelled') AND q.completed_at >= ?1 AND q.completed_at < ?2))${where}`,
    args,
  };
}

function usageOf(row: Row): JobUsage {
  const workerName = text(row.worker_name);
  return {
    jobType: row.job_type === "cloud" ? "cloud" : "local",
    startedAt: String(row.started_at),
    completedAt: text(row.completed_at),
    allocatedGpus: row.allocated_gpus ? (JSON.parse(String(row.allocated_gpus)) as number[] | null) : null,
    worker:
      workerName === null
        ? null
        : {
            name: workerName,
            role: row.worker_role === "local" ? "local" : "remote",
            gpus: JSON.parse(String(row.worker_gpus ?? "[]")) as { index: number; name: string }[],
          },
    cloud:
      row.hardware === null || row.hardware === undefined
        ? null
        : {
            costUsd: Number(row.cost_usd ?? 0),
            billedSeconds: row.billed_seconds === null ? null : Number(row.billed_seconds),
            hardware: String(row.hardware),
          },
  };
}

/** The group a job falls in. */
function groupKey(row: Row, by: CostGroupBy): string {
  switch (by) {
    case "user":
      return text(row.username) ?? "(none)";
    case "team":
      return text(row.team_id) ?? "(none)";
    case "environment":
      return text(row.config_name) ?? "(none)";
    case "provider":
      if (row.job_type === "cloud") return text(row.provider) ?? "(none)";
      return row.worker_role === "local" ? "local" : row.worker_name === null ? "(none)" : "worker";
  }
}

const hours = (gpuSeconds: number) => Math.round((gpuSeconds / 3600) * 10_000) / 10_000;

/**
 * The report over [since, until) (epoch ms), grouped `by`, of the jobs `filter` names.
 *
 * @example
 * const report = await costReport(db, prices, { by: "user", since, until, now: Date.now(), filter: {}, scope: "all" });
 */
export async function costReport(
  db: Database,
  prices: GpuPrices,
  query: { by: CostGroupBy; since: number; until: number; now: number; filter: CostFilter; scope: CostReport["scope"] },
): Promise<CostReport> {
  const iso = (ms: number) => new Date(ms).toISOString();
  if (query.until <= query.since)
    throw new ApiError(422, "invalid_period", `until (${iso(query.until)}) must be after since (${iso(query.since)})`, [
      { path: "query.until", message: "not after since" },
    ]);
  const result = await db.$client.execute(usageStatement(iso(query.since), iso(query.until), iso(query.now), query.filter));
  const groups = new Map<string, { gpuSeconds: number; costUnits: number; jobs: number }>();
  const total = { gpuSeconds: 0, costUnits: 0, jobs: 0 };
  for (const row of result.rows as unknown as Row[]) {
    const spend = jobSpend(usageOf(row), prices, query.now);
    const key = groupKey(row, query.by);
    const group = groups.get(key) ?? { gpuSeconds: 0, costUnits: 0, jobs: 0 };
    for (const sum of [group, total]) {
      sum.gpuSeconds += spend.gpuSeconds;
      sum.costUnits += spend.costUnits;
      sum.jobs += 1;
    }
    groups.set(key, group);
  }
  const shaped = (g: typeof total) => ({ gpu_hours: hours(g.gpuSeconds), cost: g.costUnits / 10_000, jobs: g.jobs });
  return {
    by: query.by,
    since: iso(query.since),
    until: iso(query.until),
    currency: "USD",
    scope: query.scope,
    groups: [...groups]
      .sort(([ka, a], [kb, b]) => b.costUnits - a.costUnits || (ka < kb ? -1 : ka > kb ? 1 : 0))
      .map(([key, g]) => ({ key, ...shaped(g) })),
    total: shaped(total),
  };
}

/**
 * What `filter`'s jobs cost from `since` to now, in USD (a budget's use this period).
 *
 * @example
 * await spentSince(db, prices, { userId: 7 }, periodStart("month", new Date()).getTime(), Date.now()); // 123.45
 */
export async function spentSince(db: Database, prices: GpuPrices, filter: CostFilter, since: number, now: number): Promise<number> {
  const report = await costReport(db, prices, { by: "user", since, until: now + 1, now, filter, scope: "all" });
  return report.total.cost;
}
