import type { MetricCategory } from "../../shared/schemas/metrics";
import type { MetricFamily } from "./exposition";

/** What a family is, apart from its values: the catalogue the scrape renders in this order. */
export interface FamilyInfo extends Omit<MetricFamily, "samples"> {
  category: MetricCategory;
}

/*
 * The exported names (the API document's "Metrics" table). Two kinds of them break Prometheus
 * naming conventions on purpose, as they are the service's published names: `_ms` instead of
 * base-unit seconds, and `_total` on gauges (service_jobs_total and
 * service_cost_usd_total are read from the queue table, which cleanup shrinks, so they are not
 * monotonic). `promtool check metrics` reports exactly those two kinds of finding.
 */
export const FAMILIES: readonly FamilyInfo[] = [
  {
    category: "jobs",
    name: "service_jobs_total",
    type: "gauge",
    help: "Queue entries of any status held in the queue (finished entries leave it at cleanup)",
  },
  { category: "jobs", name: "service_jobs_by_status", type: "gauge", help: "Queue entries by status" },
  { category: "jobs", name: "service_jobs_active", type: "gauge", help: "Queue entries pending, running or blocked (awaiting approval)" },
  {
    category: "jobs",
    name: "service_cost_usd_total",
    type: "gauge",
    help: "Cost in USD of the jobs that have started: cloud jobs billed seconds times their rate (growing while they run), others their estimate",
  },
  {
    category: "jobs",
    name: "service_job_duration_seconds_avg",
    type: "gauge",
    help: "Average run time in seconds (start to completion) of completed queue entries",
  },
  { category: "http", name: "service_http_requests_total", type: "counter", help: "HTTP requests answered, by METHOD_route-pattern" },
  {
    category: "http",
    name: "service_http_errors_total",
    type: "counter",
    help: "HTTP responses with a 4xx or 5xx status, by METHOD_route-pattern_status",
  },
  {
    category: "http",
    name: "service_http_request_latency_ms_avg",
    type: "gauge",
    help: "Average time in milliseconds to answer (response headers ready), by METHOD_route-pattern, since the counters started",
  },
  {
    category: "rate_limits",
    name: "service_rate_limit_violations_total",
    type: "counter",
    help: "Requests refused by the rate limiter (HTTP 429)",
  },
  {
    category: "rate_limits",
    name: "service_rate_limit_tracked_clients",
    type: "gauge",
    help: "Distinct client addresses with a request the rate limiter counted within the last rate-limit period (RATE_LIMIT_PERIOD, 60 s by default)",
  },
  {
    category: "approvals",
    name: "service_approval_requests_pending",
    type: "gauge",
    help: "Approval requests waiting for an admin's decision",
  },
  { category: "approvals", name: "service_approval_requests_by_status", type: "gauge", help: "Approval requests by status" },
  { category: "audit", name: "service_audit_log_entries_total", type: "counter", help: "Entries in the audit trail (append-only)" },
  { category: "audit", name: "service_audit_log_entries_24h", type: "gauge", help: "Audit trail entries recorded in the last 24 hours" },
  { category: "health", name: "service_uptime_seconds", type: "gauge", help: "Seconds since the service started" },
  {
    category: "health",
    name: "service_health_database_latency_ms",
    type: "gauge",
    help: "Round trip in milliseconds of a SELECT 1 to the database, measured at this scrape",
  },
  {
    category: "circuit_breakers",
    name: "service_circuit_breaker_state",
    type: "gauge",
    help: "Circuit breaker state per hosted cloud provider (0 closed, 1 half-open, 2 open)",
  },
  {
    category: "circuit_breakers",
    name: "service_circuit_breaker_failures_total",
    type: "counter",
    help: "Failed calls (no answer, timeout, 5xx) counted by the circuit breaker per hosted cloud provider",
  },
  {
    category: "provider",
    name: "service_cost_limit_percent_used",
    type: "gauge",
    help: "Percent of the cloud spending limit this period committed by each provider's jobs (finished costs plus running estimates); only with a limit set",
  },
  {
    category: "provider",
    name: "service_credit_balance_usd",
    type: "gauge",
    help: "USD left of the cloud spending limit this period (the credit jobs may still spend); only with a limit set",
  },
];
