import type { Env, ServiceBinding } from "./env";
import { ApiError } from "./errors";
import { readRateLimitSettings, type RateLimitSettings } from "./ratelimit/rate-limit-variables";

export const LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  libsqlUrl: string;
  libsqlAuthToken: string | undefined;
  libsqlBridge: ServiceBinding | undefined;
  environment: "development" | "production";
  logLevel: LogLevel;
  logFormat: "json" | "text";
  publicUrl: URL | undefined;
  /** Epoch ms the service counts its uptime from. */
  startedAt: number;
  /** RATE_LIMIT_CALLS, RATE_LIMIT_PERIOD, RATE_LIMIT_LOOPBACK, TRUSTED_PROXIES. */
  rateLimit: RateLimitSettings;
  /** The bearer token Prometheus may scrape with instead of an admin credential (unset: none). */
  metricsScrapeToken: string | undefined;
  /** SETUP_TOKEN: creating the first admin from beyond loopback needs it (unset: impossible). */
  setupToken: string | undefined;
  /** LIVE_KEEPALIVE_SECONDS: how often live streams get a keep-alive and their watchers' leases are renewed. */
  keepAliveMs: number;
  /** SCHEDULER_PASS_SECONDS: the Scheduler's background pass interval (it also passes on every change). */
  passIntervalMs: number;
  /** LIVE_STREAMS_PER_USER: the most live streams one user holds at once over all jobs (edge/jobs/watchers.ts). */
  streamsPerUser: number;
}

/** How often live streams get a keep-alive and their watchers' leases are renewed, unless LIVE_KEEPALIVE_SECONDS says otherwise. */
export const KEEPALIVE_MS = 15_000;
/** The Scheduler's background pass (and its housekeeping) interval, unless SCHEDULER_PASS_SECONDS says otherwise. */
export const PASS_INTERVAL_MS = 5_000;

const isolateStartedAt = Date.now();
const cache = new WeakMap<Env, Config>();

/** Reads the bindings once per Env object; a bad value is a deployment mistake and says which. */
export function readConfig(env: Env): Config {
  const cached = cache.get(env);
  if (cached) return cached;
  if (!env.LIBSQL_URL) throw new ApiError(500, "misconfigured", "LIBSQL_URL is not set");
  const logLevel = (env.SERVICE_LOG_LEVEL ?? "INFO").toUpperCase();
  const environment = env.SERVICE_ENV === "development" ? "development" : "production";
  const config: Config = {
    libsqlUrl: env.LIBSQL_URL,
    libsqlAuthToken: env.LIBSQL_AUTH_TOKEN || undefined,
    libsqlBridge: env.LIBSQL_BRIDGE,
    environment,
    logLevel: (LOG_LEVELS as readonly string[]).includes(logLevel) ? (logLevel as LogLevel) : "INFO",
    logFormat: env.SERVICE_LOG_FORMAT?.toLowerCase() === "text" ? "text" : "json",
    publicUrl: env.SERVICE_PUBLIC_URL ? new URL(env.SERVICE_PUBLIC_URL) : undefined,
    startedAt: env.SERVICE_STARTED_AT ? Date.parse(env.SERVICE_STARTED_AT) : isolateStartedAt,
    rateLimit: readRateLimitSettings(env, environment),
    metricsScrapeToken: env.METRICS_SCRAPE_TOKEN || undefined,
    setupToken: env.SETUP_TOKEN || undefined,
    keepAliveMs: positiveSeconds(env, "LIVE_KEEPALIVE_SECONDS", KEEPALIVE_MS / 1000) * 1000,
    passIntervalMs: positiveSeconds(env, "SCHEDULER_PASS_SECONDS", PASS_INTERVAL_MS / 1000) * 1000,
    streamsPerUser: streamsPerUser(env.LIVE_STREAMS_PER_USER),
  };
  cache.set(env, config);
  return config;
}

/** A variable of positive seconds (fractions allowed), `fallback` when unset. */
function positiveSeconds(env: Env, name: "LIVE_KEEPALIVE_SECONDS" | "SCHEDULER_PASS_SECONDS", fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const seconds = Number(raw);
  if (!Number.isFinite(seconds) || seconds <= 0)
    throw new ApiError(500, "misconfigured", `${name} must be a positive number of seconds, not ${JSON.stringify(raw)}`);
  return seconds;
}

/** The most live streams one user holds at once, unless LIVE_STREAMS_PER_USER says otherwise (edge/jobs/watchers.ts). */
export const STREAMS_PER_USER = 10;

/** LIVE_STREAMS_PER_USER: a whole number from 1 to 100,000, STREAMS_PER_USER when unset. */
function streamsPerUser(raw: string | undefined): number {
  if (raw === undefined || raw === "") return STREAMS_PER_USER;
  const count = Number(raw);
  if (!Number.isSafeInteger(count) || count < 1 || count > 100_000)
    throw new ApiError(500, "misconfigured", `LIVE_STREAMS_PER_USER must be a whole number from 1 to 100000, not ${JSON.stringify(raw)}`);
  return count;
}

/** Secrets the service needs in this configuration, by name, and whether each is set. */
export function requiredSecrets(config: Config): { name: string; present: boolean }[] {
  const remote = !config.libsqlBridge && !/^https?:\/\/(localhost|127\.0\.0\.1|\[::1\])(:|\/|$)/.test(config.libsqlUrl);
  return remote ? [{ name: "LIBSQL_AUTH_TOKEN", present: Boolean(config.libsqlAuthToken) }] : [];
}
