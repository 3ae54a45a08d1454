import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env";
import type { Config } from "../config";
import type { Env } from "../env";
import type { Logger } from "../log";
import { collectorOf } from "../metrics/collector-types";
import { HttpTally, trackedClientWindowMs } from "../metrics/tally";
import { routePattern } from "./authorize";

/** An isolate hands its figures to the collector at most this often... */
export const FLUSH_INTERVAL_MS = 1_000;
/** ...unless this many requests are waiting, which go at once. */
export const FLUSH_MAX_REQUESTS = 500;

// Any other method becomes OTHER: a client must not be able to mint label values.
const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Counts and times every request by `<METHOD>_<route pattern>` (an area's own `routeLabel` for
 * its `.all()` routes, `<METHOD>_unmatched` for a 404 with no route), with its error status and
 * the rate limiter's verdict. Figures are summed in the isolate and flushed to the
 * MetricsCollector Durable Object after the response (`waitUntil`): at most once a second, or at
 * once when FLUSH_MAX_REQUESTS are waiting, and always within about a second of the last
 * request. A request never waits on metrics.
 *
 * @example
 * app.use("*", httpMetrics());
 */
export function httpMetrics(): MiddlewareHandler<AppEnv> {
  // One per isolate: the app, and so this middleware, is built once per isolate.
  const tally = new HttpTally();
  let lastFlushAt = 0;
  // When the timed flush waiting in some request's waitUntil is due (0: none).
  let flushDueAt = 0;

  const flush = async (env: Env, config: Config, log: Logger): Promise<void> => {
    lastFlushAt = Date.now();
    const batch = tally.take();
    if (!batch) return;
    try {
      await collectorOf(env).record(batch, trackedClientWindowMs(config));
    } catch (error) {
      tally.restore(batch);
      log.warning("could not flush HTTP metrics; kept for the next flush", { error: String(error) });
    }
  };

  return async (c, next) => {
    const started = performance.now();
    // Errors thrown further down have already become a response (app.onError) when this resumes.
    await next();
    const verdict = c.get("rateLimit");
    const method = METHODS.has(c.req.method) ? c.req.method : "OTHER";
    tally.add({
      endpoint: `${method}_${routePattern(c) ?? c.get("routeLabel") ?? "unmatched"}`,
      status: c.res.status,
      latencyMs: performance.now() - started,
      countedClient: verdict ? (c.get("clientIp") ?? null) : null,
      limited: verdict?.limited ?? false,
      at: Date.now(),
    });
    const config = c.get("config");
    const log = c.get("log");
    const now = Date.now();
    // A timed flush whose request context was torn down never runs; past a grace period, it is
    // given up and the next request schedules another.
    const scheduled = flushDueAt !== 0 && now < flushDueAt + 5 * FLUSH_INTERVAL_MS;
    if (tally.requests >= FLUSH_MAX_REQUESTS || (!scheduled && now - lastFlushAt >= FLUSH_INTERVAL_MS)) {
      c.executionCtx.waitUntil(flush(c.env, config, log));
    } else if (!scheduled) {
      flushDueAt = lastFlushAt + FLUSH_INTERVAL_MS;
      c.executionCtx.waitUntil(
        sleep(flushDueAt - now).then(() => {
          flushDueAt = 0;
          return flush(c.env, config, log);
        }),
      );
    }
  };
}
