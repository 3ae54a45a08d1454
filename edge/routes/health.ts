import { createRoute } from "@hono/zod-openapi";
import pkg from "../../package.json";
import { Health, HealthQuery, Live, Ready } from "../../shared/schemas/health";
import { requiredSecrets } from "../config";
import { currentSchemaVersion } from "../db/migrate";
import { LATEST_SCHEMA_VERSION } from "../db/migrations/index";
import { createRouter } from "../router";
import type { Context } from "hono";
import type { AppEnv } from "../app-env";
import { checkProviders, publicMessage } from "../cloud/provider-checks";

export const health = createRouter();

/** How old a provider check the health answer may reuse: callers polling health do not each call the providers. */
const HEALTH_CHECK_MAX_AGE_S = 10;

/**
 * Each usable provider's credential check with its latency: healthy when they validate, unhealthy
 * while its circuit breaker is open. Public: the message is the service's wording
 * (publicMessage), never the provider's answer.
 */
async function providerHealth(c: Context<AppEnv>): Promise<NonNullable<Health["providers"]>> {
  const checks = await checkProviders({ env: c.env, db: c.get("db"), log: c.get("log") }, HEALTH_CHECK_MAX_AGE_S);
  return checks.map((p) => ({
    name: p.name,
    status: p.breaker_state === "open" ? "unhealthy" : p.valid ? "healthy" : "degraded",
    ...(p.latency_ms === null ? {} : { latency_ms: p.latency_ms }),
    message: p.breaker_state === "open" ? `circuit breaker open; ${publicMessage(p)}` : publicMessage(p),
  }));
}

const tags = ["Health"];

health.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/health",
    tags,
    summary: "Service health with its components",
    description:
      "Public. `status` is `unhealthy` (HTTP 503) when the database is unreachable, `degraded` when it is behind the code's schema version or a needed secret is missing, else `healthy`. `include_providers=true` adds each provider's state and latency, in the service's words only: why a provider's check failed is shown to admins (`GET /api/cloud/providers/{provider}`).",
    request: { query: HealthQuery },
    responses: {
      200: { description: "Healthy or degraded", content: { "application/json": { schema: Health } } },
      503: { description: "Unhealthy", content: { "application/json": { schema: Health } } },
    },
  }),
  async (c) => {
    const config = c.get("config");
    const started = performance.now();
    let database: Health["components"][number];
    try {
      const version = await currentSchemaVersion(c.get("db").$client);
      const latency_ms = Math.round((performance.now() - started) * 100) / 100;
      database =
        version === LATEST_SCHEMA_VERSION
          ? { name: "database", status: "healthy", latency_ms, schema_version: version, latest_schema_version: LATEST_SCHEMA_VERSION }
          : {
              name: "database",
              status: "degraded",
              latency_ms,
              message: `schema version ${version}, code expects ${LATEST_SCHEMA_VERSION}: run the migrations`,
              schema_version: version,
              latest_schema_version: LATEST_SCHEMA_VERSION,
            };
    } catch (error) {
      c.get("log").error("health: database unreachable", { error: String(error) });
      database = { name: "database", status: "unhealthy", message: "database unreachable", latest_schema_version: LATEST_SCHEMA_VERSION };
    }
    const missing = requiredSecrets(config)
      .filter((s) => !s.present)
      .map((s) => s.name);
    const secrets: Health["components"][number] = missing.length
      ? { name: "secrets", status: "degraded", message: `missing: ${missing.join(", ")}` }
      : { name: "secrets", status: "healthy", message: "all required secrets are set" };
    const components = [database, secrets];
    const status = components.some((x) => x.status === "unhealthy")
      ? "unhealthy"
      : components.some((x) => x.status === "degraded")
        ? "degraded"
        : "healthy";
    const body: Health = {
      status,
      version: pkg.version,
      uptime_seconds: Math.round((Date.now() - config.startedAt) / 10) / 100,
      timestamp: new Date().toISOString(),
      components,
      ...(c.req.valid("query").include_providers ? { providers: await providerHealth(c) } : {}),
    };
    return c.json(body, status === "unhealthy" ? 503 : 200);
  },
);

health.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/health/live",
    tags,
    summary: "Liveness: the Worker answers",
    description: '`{"status":"ok"}` while the Worker answers; it reads nothing else. Never rate limited.',
    responses: { 200: { description: "Alive", content: { "application/json": { schema: Live } } } },
  }),
  (c) => c.json({ status: "ok" as const }),
);

health.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/health/ready",
    tags,
    summary: "Readiness: the database is reachable and migrated",
    description: "200 once the database is reachable and migrated to the code's schema version, else 503. Never rate limited.",
    responses: {
      200: { description: "Ready", content: { "application/json": { schema: Ready } } },
      503: { description: "Not ready, with the reason", content: { "application/json": { schema: Ready } } },
    },
  }),
  async (c) => {
    try {
      const version = await currentSchemaVersion(c.get("db").$client);
      if (version === LATEST_SCHEMA_VERSION) return c.json({ status: "ready" as const }, 200);
      return c.json(
        { status: "not_ready" as const, detail: `database schema is at version ${version}, expected ${LATEST_SCHEMA_VERSION}` },
        503,
      );
    } catch {
      return c.json({ status: "not_ready" as const, detail: "database unreachable" }, 503);
    }
  },
);
