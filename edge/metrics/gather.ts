import { JOB_STATUSES } from "../../shared/schemas/queue";
import type { MetricCategory } from "../../shared/schemas/metrics";
import { auditCounts } from "../audit/trail";
import type { Database } from "../db/client";
import type { MetricsApi } from "./collector-types";
import type { MetricFamily, Sample } from "./exposition";
import { FAMILIES } from "./families";
import { PROVIDERS } from "../../shared/providers";
import { breakerStates, breakerStateValue } from "../cloud/breaker";
import { getSetting } from "../settings-store";
import { committedFrom, committedSpendingStatement } from "../cloud/spending";

/** Where the figures live: the database, the collector DO, and when the service started. */
export interface MetricsSources {
  db: Database;
  collector: Pick<MetricsApi, "snapshot">;
  /** Epoch ms the service counts its uptime from. */
  startedAt: number;
  /** How recent a client's counted request must be for it to be tracked (trackedClientWindowMs). */
  clientWindowMs: number;
}

const APPROVAL_STATUSES = ["pending", "approved", "rejected", "withdrawn"];

type Values = Map<string, Sample[]>;

const round = (value: number, digits = 3) => Math.round(value * 10 ** digits) / 10 ** digits;

// Every known status gets a sample (0 included), so a dashboard's series never vanish.
function byStatus(rows: { status: unknown; n: unknown }[], known: readonly string[]): Sample[] {
  const counts = new Map<string, number>(known.map((s) => [s, 0]));
  for (const row of rows) counts.set(String(row.status), Number(row.n));
  return [...counts].map(([status, value]) => ({ labels: { status }, value }));
}

/** Jobs and approvals: one libSQL batch over the queue and the approval requests. */
async function queueFigures(db: Database, values: Values): Promise<void> {
  const [statuses, started, approvals] = await db.$client.batch(
    [
      "SELECT status, count(*) AS n FROM queue_entries GROUP BY status",
      `SELECT coalesce(sum(CASE WHEN c.job_id IS NOT NULL THEN c.cost_usd ELSE q.estimated_cost END), 0) AS cost,
              avg(CASE WHEN q.status = 'completed' AND q.completed_at IS NOT NULL THEN (julianday(q.completed_at) - julianday(q.started_at)) * 86400.0 END) AS duration
       FROM queue_entries q LEFT JOIN cloud_jobs c ON c.job_id = q.job_id WHERE q.started_at IS NOT NULL`,
      "SELECT status, count(*) AS n FROM approval_requests GROUP BY status",
    ],
    "read",
  );
  const statusRows = statuses!.rows as unknown as { status: string; n: number }[];
  const count = (wanted: readonly string[]) => statusRows.filter((r) => wanted.includes(r.status)).reduce((sum, r) => sum + Number(r.n), 0);
  const totals = started!.rows[0]!;
  values.set("service_jobs_total", [{ value: statusRows.reduce((sum, r) => sum + Number(r.n), 0) }]);
  values.set("service_jobs_by_status", byStatus(statusRows, JOB_STATUSES));
  values.set("service_jobs_active", [{ value: count(["pending", "running", "blocked"]) }]);
  values.set("service_cost_usd_total", [{ value: round(Number(totals.cost ?? 0), 4) }]);
  values.set("service_job_duration_seconds_avg", [{ value: round(Number(totals.duration ?? 0)) }]);
  const approvalRows = approvals!.rows as unknown as { status: string; n: number }[];
  values.set("service_approval_requests_pending", [{ value: Number(approvalRows.find((r) => r.status === "pending")?.n ?? 0) }]);
  values.set("service_approval_requests_by_status", byStatus(approvalRows, APPROVAL_STATUSES));
}

/** HTTP and rate limits: the collector's totals from every isolate. */
async function collectorFigures(sources: MetricsSources, values: Values): Promise<void> {
  const totals = await sources.collector.snapshot(sources.clientWindowMs);
  values.set(
    "service_http_requests_total",
    totals.endpoints.map((e) => ({ labels: { endpoint: e.endpoint }, value: e.requests })),
  );
  values.set(
    "service_http_errors_total",
    totals.errors.map((e) => ({ labels: { endpoint_status: `${e.endpoint}_${e.status}` }, value: e.count })),
  );
  values.set(
    "service_http_request_latency_ms_avg",
    totals.endpoints.map((e) => ({ labels: { endpoint: e.endpoint }, value: round(e.latencyMsSum / e.requests) })),
  );
  values.set("service_rate_limit_violations_total", [{ value: totals.violations }]);
  values.set("service_rate_limit_tracked_clients", [{ value: totals.trackedClients }]);
}

/** Circuit breakers: each provider's state (0 closed, 1 half-open, 2 open) and failures counted, for every usable provider. */
async function breakerFigures(db: Database, values: Values): Promise<void> {
  const states = new Map((await breakerStates(db)).map((b) => [b.provider, b]));
  const usable = PROVIDERS.filter((p) => p.kind === "hosted").map((p) => p.name);
  values.set(
    "service_circuit_breaker_state",
    usable.map((provider) => ({ labels: { provider }, value: breakerStateValue[states.get(provider)?.state ?? "closed"] })),
  );
  values.set(
    "service_circuit_breaker_failures_total",
    usable.map((provider) => ({ labels: { provider }, value: states.get(provider)?.failures_total ?? 0 })),
  );
}

/**
 * The spending limit per hosted provider: the percent its jobs committed this period (finished
 * costs plus running estimates), and what is left of the limit (the credit the cloud may still
 * spend). No samples without a limit.
 */
async function providerFigures(db: Database, values: Values): Promise<void> {
  const cloud = await getSetting(db, "cloud");
  const limit = cloud.spending_limit_usd;
  if (limit === null) return;
  const byProvider = await db.$client.execute(committedSpendingStatement(new Date(), true));
  const committed = new Map(
    byProvider.rows.map((r) => [String(r.provider), committedFrom(r as Record<string, unknown>, cloud.spending_period)]),
  );
  const total = [...committed.values()].reduce((a, b) => a + b, 0);
  const hosted = PROVIDERS.filter((p) => p.kind === "hosted").map((p) => p.name);
  values.set(
    "service_cost_limit_percent_used",
    hosted.map((provider) => ({ labels: { provider }, value: limit > 0 ? round(((committed.get(provider) ?? 0) / limit) * 100, 2) : 100 })),
  );
  values.set(
    "service_credit_balance_usd",
    hosted.map((provider) => ({ labels: { provider }, value: round(Math.max(0, limit - total), 4) })),
  );
}

async function auditFigures(db: Database, values: Values): Promise<void> {
  const counts = await auditCounts(db);
  values.set("service_audit_log_entries_total", [{ value: counts.total }]);
  values.set("service_audit_log_entries_24h", [{ value: counts.last24h }]);
}

async function healthFigures(sources: MetricsSources, values: Values): Promise<void> {
  const started = performance.now();
  await sources.db.$client.execute("SELECT 1");
  values.set("service_health_database_latency_ms", [{ value: round(performance.now() - started) }]);
  values.set("service_uptime_seconds", [{ value: round((Date.now() - sources.startedAt) / 1000) }]);
}

/**
 * The families of the given categories, in catalogue order, with their current values read from
 * where each lives (the queue and audit tables, the collector DO, the clock). Only the sources the
 * categories need are asked (the database's latency first, then the rest at once).
 *
 * @example
 * const text = renderExposition(await gatherMetrics(["jobs", "health"], sources));
 */
export async function gatherMetrics(categories: readonly MetricCategory[], sources: MetricsSources): Promise<MetricFamily[]> {
  const wanted = new Set(categories);
  const values: Values = new Map();
  // Timed alone, so the database round trip is not measured queued behind the other queries.
  if (wanted.has("health")) await healthFigures(sources, values);
  await Promise.all([
    wanted.has("jobs") || wanted.has("approvals") ? queueFigures(sources.db, values) : null,
    wanted.has("http") || wanted.has("rate_limits") ? collectorFigures(sources, values) : null,
    wanted.has("audit") ? auditFigures(sources.db, values) : null,
    wanted.has("circuit_breakers") ? breakerFigures(sources.db, values) : null,
    wanted.has("provider") ? providerFigures(sources.db, values) : null,
  ]);
  return FAMILIES.filter((f) => wanted.has(f.category)).map(({ name, type, help }) => ({
    name,
    type,
    help,
    samples: values.get(name) ?? [],
  }));
}
