import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env";
import { readConfig } from "../config";
import { openDatabase } from "../db/client";
import { createLogger } from "../log";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Sets up each request: configuration, its own database client, a logger stamped with the
 * correlation id (the caller's X-Request-ID when well-formed, else a new UUID, echoed back), and
 * one access-log line when it ends.
 */
export function requestContext(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = Date.now();
    const config = readConfig(c.env);
    const offered = c.req.header("x-request-id");
    const requestId = offered && REQUEST_ID.test(offered) ? offered : crypto.randomUUID();
    const log = createLogger("edge/http", config).withCorrelation(requestId);
    c.set("config", config);
    c.set("requestId", requestId);
    c.set("log", log);
    c.set("db", openDatabase(config));
    c.set("principal", null);
    c.set("worker", null);
    c.set("rateLimit", null);
    await next();
    c.header("X-Request-ID", requestId);
    const status = c.res.status;
    const path = c.req.path;
    const line = `${c.req.method} ${path} ${status}`;
    const extra = { status, duration_ms: Date.now() - started, user_id: c.get("principal")?.user.id ?? null };
    if (status >= 500) log.error(line, extra);
    // Runners ask for work every second or so: their successful asks would drown everything else.
    else if (status < 400 && path === "/api/workers/heartbeat") log.debug(line, extra);
    else log.info(line, extra);
  };
}
