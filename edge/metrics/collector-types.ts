import type { Env } from "../env";
import { objectNamed } from "../durable-object-names";

/*
 * What the MetricsCollector Durable Object offers over RPC, apart from its class, so that code
 * type-checked for Node (tests, the route inventory) can name it without the Workers runtime.
 */

/** One isolate's HTTP figures since its previous flush. */
export interface HttpBatch {
  /** Per endpoint label (`<METHOD>_<route pattern>`): requests, summed latency, error responses by status. */
  endpoints: { endpoint: string; requests: number; latencyMsSum: number; errors: [status: number, count: number][] }[];
  /** Requests the rate limiter refused (429). */
  violations: number;
  /** Client addresses with a request the rate limiter counted, and when (epoch ms) the latest arrived. */
  clients: [address: string, lastSeenMs: number][];
}

/** The collector's running totals, merged from every isolate. */
export interface HttpSnapshot {
  endpoints: { endpoint: string; requests: number; latencyMsSum: number }[];
  errors: { endpoint: string; status: number; count: number }[];
  violations: number;
  /** Distinct client addresses with a counted request within the window asked for. */
  trackedClients: number;
}

/** The metrics collector's RPC methods (edge/metrics/collector.ts). */
export interface MetricsApi {
  /** Adds a batch to the totals; clients last seen before `now - clientWindowMs` are forgotten. */
  record(batch: HttpBatch, clientWindowMs: number): Promise<void>;
  snapshot(clientWindowMs: number): Promise<HttpSnapshot>;
}

/**
 * The one collector instance.
 *
 * @example
 * const totals = await collectorOf(c.env).snapshot(60_000);
 */
export function collectorOf(env: Pick<Env, "METRICS">): MetricsApi {
  return objectNamed<MetricsApi>(env.METRICS, "main");
}
