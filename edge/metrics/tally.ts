import type { Config } from "../config";
import type { HttpBatch } from "./collector-types";

/**
 * A client counts as tracked (service_rate_limit_tracked_clients) while its latest request that
 * the rate limiter counted is at most one default rate-limit period old (RATE_LIMIT_PERIOD, 60 s
 * unless configured).
 */
export function trackedClientWindowMs(config: Pick<Config, "rateLimit">): number {
  return config.rateLimit.defaultRule.periodSeconds * 1000;
}

/** One answered request, as the HTTP metrics middleware saw it. */
export interface AnsweredRequest {
  /** `<METHOD>_<route pattern>`, e.g. `POST_/api/queue/{job_id}/cancel`. */
  endpoint: string;
  status: number;
  latencyMs: number;
  /** The client address, when the rate limiter counted this request (else null). */
  countedClient: string | null;
  /** Whether the rate limiter refused it. */
  limited: boolean;
  /** Epoch ms it was answered. */
  at: number;
}

interface EndpointTally {
  requests: number;
  latencyMsSum: number;
  errors: Map<number, number>;
}

/**
 * An isolate's HTTP figures not yet handed to the collector. Its size is bounded by the route
 * table (endpoint labels are route patterns) and by the clients seen since the last flush.
 */
export class HttpTally {
  private endpoints = new Map<string, EndpointTally>();
  private violations = 0;
  private clients = new Map<string, number>();
  /** Requests added since the last `take`. */
  requests = 0;

  add(request: AnsweredRequest): void {
    this.addEndpoint(request.endpoint, 1, request.latencyMs, request.status >= 400 ? [[request.status, 1]] : []);
    if (request.limited) this.violations++;
    if (request.countedClient !== null) this.seeClient(request.countedClient, request.at);
    this.requests++;
  }

  /** Everything pending as one batch, leaving the tally empty; null when there is nothing. */
  take(): HttpBatch | null {
    if (this.requests === 0) return null;
    const batch: HttpBatch = {
      endpoints: [...this.endpoints].map(([endpoint, t]) => ({
        endpoint,
        requests: t.requests,
        latencyMsSum: t.latencyMsSum,
        errors: [...t.errors],
      })),
      violations: this.violations,
      clients: [...this.clients],
    };
    this.endpoints = new Map();
    this.violations = 0;
    this.clients = new Map();
    this.requests = 0;
    return batch;
  }

  /** Puts back a batch the collector did not accept, so the next flush carries it. */
  restore(batch: HttpBatch): void {
    for (const e of batch.endpoints) {
      this.addEndpoint(e.endpoint, e.requests, e.latencyMsSum, e.errors);
      this.requests += e.requests;
    }
    this.violations += batch.violations;
    for (const [address, at] of batch.clients) this.seeClient(address, at);
  }

  private addEndpoint(endpoint: string, requests: number, latencyMsSum: number, errors: [number, number][]): void {
    let tally = this.endpoints.get(endpoint);
    if (!tally) this.endpoints.set(endpoint, (tally = { requests: 0, latencyMsSum: 0, errors: new Map() }));
    tally.requests += requests;
    tally.latencyMsSum += latencyMsSum;
    for (const [status, count] of errors) tally.errors.set(status, (tally.errors.get(status) ?? 0) + count);
  }

  private seeClient(address: string, at: number): void {
    this.clients.set(address, Math.max(at, this.clients.get(address) ?? 0));
  }
}
