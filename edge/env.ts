import type { StorageBucket } from "./bucket";
import type { DurableObjectBindings } from "./durable-objects";

/** A service binding, as far as this code uses one (workerd's Fetcher, or Miniflare's in Node). */
export interface ServiceBinding {
  fetch(request: Request): Promise<Response>;
}

/**
 * The Worker's bindings, as declared in wrangler.toml (production) and by edge/local (local);
 * the Durable Objects' come from edge/durable-objects.ts. Only edge/config.ts reads the
 * variables; everything else receives a typed Config.
 */
export interface Env extends DurableObjectBindings {
  /** libSQL URL: https://<db>.turso.io, libsql://…, or http://libsql.internal locally. */
  LIBSQL_URL: string;
  /** Secret: libSQL auth token for a remote database. */
  LIBSQL_AUTH_TOKEN?: string;
  /** Local default only: the host process's Hrana server, as a service binding. */
  LIBSQL_BRIDGE?: ServiceBinding;
  /** Local default only: the host's webhook fetcher, which resolves names and refuses private addresses (edge/local/webhook-outbound.ts). */
  WEBHOOK_OUTBOUND?: ServiceBinding;
  /**
   * Local default only: the host's fetcher for provider API calls (edge/local/provider-outbound.ts), which applies
   * the provider's TLS and proxy settings (a Worker has no proxy and verifies certificates itself). Only
   * edge/cloud/outbound.ts calls it.
   */
  PROVIDER_OUTBOUND?: ServiceBinding;
  /**
   * Local default only: the host's secrets (edge/local/secret-host.ts): one secret by name from the host process's
   * environment or its secret files, never a listing. Only edge/cloud/secrets.ts calls it.
   */
  SECRETS_HOST?: ServiceBinding;
  SERVICE_ENV?: string;
  SERVICE_LOG_LEVEL?: string;
  SERVICE_LOG_FORMAT?: string;
  SERVICE_PUBLIC_URL?: string;
  /** R2: uploaded datasets (and, later, storage endpoint objects and archives). */
  STORAGE: StorageBucket;
  /** Local default only: when the host process started (ISO 8601), for uptime. */
  SERVICE_STARTED_AT?: string;
  /** Local default only: this start's secret the client front sends with every request (edge/middleware/front-only.ts). */
  SERVICE_FRONT_TOKEN?: string;
  /** Local only: the host's token for its start-up call (edge/host-call.ts); unset when deployed. */
  SERVICE_HOST_TOKEN?: string;
  /** Rate limiting (the API document's "Rate limiting"): the default rule's calls (0: off) and period in seconds. */
  RATE_LIMIT_CALLS?: string;
  RATE_LIMIT_PERIOD?: string;
  /** `1`: count loopback clients in development too (production always counts them). */
  RATE_LIMIT_LOOPBACK?: string;
  /** Peers whose X-Forwarded-For / X-Real-IP name the client: addresses, CIDRs, `loopback`, or `none`. */
  TRUSTED_PROXIES?: string;
  /** Secret: a bearer token that may scrape GET /api/cloud/metrics/prometheus (the API document's "Metrics"). */
  METRICS_SCRAPE_TOKEN?: string;
  /** Secret: the one-time token that creating the first admin needs (README "First run, with curl"). */
  SETUP_TOKEN?: string;
  /** Seconds: the timeout of provider calls whose http_timeout is left at the default 30. */
  SERVICE_HTTP_TIMEOUT?: string;
  /** Seconds between the keep-alives of live streams, which also renew their watchers' leases (default 15; tests shorten it). */
  /** Seconds between the Scheduler's background passes (default 5; tests shorten it). */
  SCHEDULER_PASS_SECONDS?: string;
  LIVE_KEEPALIVE_SECONDS?: string;
  /** The most live streams (job events, the queue's changes) one user holds at once (default 10; a benchmark raises it). */
  LIVE_STREAMS_PER_USER?: string;
  /** Seconds an open circuit breaker waits before letting calls try again (default 60; tests shorten it). */
  CIRCUIT_BREAKER_RESET_SECONDS?: string;
  /** HashiCorp Vault (the last secret source, README "Cloud training"): its address, token and KV v2 path (default secret/data/training-service). */
  VAULT_ADDR?: string;
  /** Secret: the Vault token. */
  VAULT_TOKEN?: string;
  VAULT_SECRET_PATH?: string;
}
