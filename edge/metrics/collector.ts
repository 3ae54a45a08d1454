import { DurableObject } from "cloudflare:workers";
import type { Env } from "../env";
import type { HttpBatch, HttpSnapshot, MetricsApi } from "./collector-types";

/*
 * The metrics collector: one Durable Object (named "main") that every isolate's HTTP metrics
 * middleware flushes its batches into (edge/middleware/http-metrics.ts), so the scrape sees the
 * whole service rather than whichever isolate answered it. The counters live in the object's
 * SQLite storage: a restart or redeploy does not reset them, and Prometheus sees them only grow.
 */
export class MetricsCollector extends DurableObject<Env> implements MetricsApi {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const sql = ctx.storage.sql;
    sql.exec(
      "CREATE TABLE IF NOT EXISTS http_requests (endpoint TEXT PRIMARY KEY, requests INTEGER NOT NULL, latency_ms_sum REAL NOT NULL)",
    );
    sql.exec(
      "CREATE TABLE IF NOT EXISTS http_errors (endpoint TEXT NOT NULL, status INTEGER NOT NULL, errors INTEGER NOT NULL, PRIMARY KEY (endpoint, status))",
    );
    sql.exec("CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)");
    sql.exec("CREATE TABLE IF NOT EXISTS rate_limited_clients (address TEXT PRIMARY KEY, last_seen_ms INTEGER NOT NULL)");
  }

  async record(batch: HttpBatch, clientWindowMs: number): Promise<void> {
    // Synchronous statements only: the object applies them together, no other call in between.
    this.ctx.storage.transactionSync(() => {
      const sql = this.ctx.storage.sql;
      for (const e of batch.endpoints) {
        sql.exec(
          `INSERT INTO http_requests (endpoint, requests, latency_ms_sum) VALUES (?, ?, ?)
           ON CONFLICT (endpoint) DO UPDATE SET requests = requests + excluded.requests, latency_ms_sum = latency_ms_sum + excluded.latency_ms_sum`,
          e.endpoint,
          e.requests,
          e.latencyMsSum,
        );
        for (const [status, count] of e.errors) {
          sql.exec(
            "INSERT INTO http_errors (endpoint, status, errors) VALUES (?, ?, ?) ON CONFLICT (endpoint, status) DO UPDATE SET errors = errors + excluded.errors",
            e.endpoint,
            status,
            count,
          );
        }
      }
      if (batch.violations) {
        sql.exec(
          "INSERT INTO counters (name, value) VALUES ('rate_limit_violations', ?) ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
          batch.violations,
        );
      }
      for (const [address, at] of batch.clients) {
        sql.exec(
          "INSERT INTO rate_limited_clients (address, last_seen_ms) VALUES (?, ?) ON CONFLICT (address) DO UPDATE SET last_seen_ms = max(last_seen_ms, excluded.last_seen_ms)",
          address,
          at,
        );
      }
      sql.exec("DELETE FROM rate_limited_clients WHERE last_seen_ms < ?", Date.now() - clientWindowMs);
    });
  }

  async snapshot(clientWindowMs: number): Promise<HttpSnapshot> {
    const sql = this.ctx.storage.sql;
    const endpoints = sql
      .exec<{ endpoint: string; requests: number; latency_ms_sum: number }>(
        "SELECT endpoint, requests, latency_ms_sum FROM http_requests ORDER BY endpoint",
      )
      .toArray();
    const errors = sql
      .exec<{ endpoint: string; status: number; errors: number }>(
        "SELECT endpoint, status, errors FROM http_errors ORDER BY endpoint, status",
      )
      .toArray();
    const violations =
      sql.exec<{ value: number }>("SELECT value FROM counters WHERE name = 'rate_limit_violations'").toArray()[0]?.value ?? 0;
    const tracked = sql
      .exec<{ n: number }>("SELECT count(*) AS n FROM rate_limited_clients WHERE last_seen_ms >= ?", Date.now() - clientWindowMs)
      .one().n;
    return {
      endpoints: endpoints.map((r) => ({ endpoint: r.endpoint, requests: r.requests, latencyMsSum: r.latency_ms_sum })),
      errors: errors.map((r) => ({ endpoint: r.endpoint, status: r.status, count: r.errors })),
      violations,
      trackedClients: tracked,
    };
  }
}
