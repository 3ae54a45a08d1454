import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import {
  canonicalCategories,
  METRIC_TEMPLATES,
  MetricsConfig,
  MetricsConfigUpdate,
  MetricsPreviewQuery,
  MetricTemplateParam,
  type MetricCategory,
} from "../../shared/schemas/metrics";
import type { AppEnv } from "../app-env";
import { auditLater, changedFields } from "../audit/trail";
import { ApiError } from "../errors";
import { collectorOf } from "../metrics/collector-types";
import { EXPOSITION_CONTENT_TYPE, renderExposition } from "../metrics/exposition";
import { gatherMetrics } from "../metrics/gather";
import { trackedClientWindowMs } from "../metrics/tally";
import { createRouter } from "../router";
import { getSetting, setSetting } from "../settings-store";
import { error, json, jsonBody } from "./openapi";

/** Metrics export: the Prometheus scrape, its configuration, templates and preview (admin). */
export const metricsRoutes = createRouter();

const tags = ["Metrics"];
const exposition = { description: "Prometheus text exposition format 0.0.4", content: { "text/plain": { schema: z.string() } } };
const errors = {
  401: error("No valid credential"),
  403: error("Not an admin"),
  422: error("Invalid request: names the unknown category or template"),
};

async function readMetricsConfig(c: Context<AppEnv>): Promise<MetricsConfig> {
  const stored = await getSetting(c.get("db"), "metrics");
  return { prometheus_enabled: stored.prometheus_enabled, prometheus_categories: canonicalCategories(stored.prometheus_categories) };
}

async function saveMetricsConfig(
  c: Context<AppEnv>,
  previous: MetricsConfig,
  next: MetricsConfig,
  details: Record<string, unknown> = {},
): Promise<void> {
  await setSetting(c.get("db"), "metrics", next);
  auditLater(c, {
    event_type: "metrics_config_changed",
    target: "metrics",
    details: { ...details, ...next, changed: changedFields(previous, next) },
  });
}

async function renderCategories(c: Context<AppEnv>, categories: readonly MetricCategory[]) {
  const families = await gatherMetrics(canonicalCategories(categories), {
    db: c.get("db"),
    collector: collectorOf(c.env),
    startedAt: c.get("config").startedAt,
    clientWindowMs: trackedClientWindowMs(c.get("config")),
  });
  return c.text(renderExposition(families), 200, { "Content-Type": EXPOSITION_CONTENT_TYPE, "Cache-Control": "no-store" });
}

metricsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/metrics/prometheus",
    tags,
    summary: "Prometheus scrape (admin, or the metrics scrape token)",
    description:
      "The configured categories in the text exposition format. Authenticate with an admin's key or session, or with `Authorization: Bearer <METRICS_SCRAPE_TOKEN>`. While export is disabled (the default) this answers 404 with code `metrics_disabled`.",
    security: [{ bearer: [] }, { apiKey: [] }, { session: [] }],
    responses: { 200: exposition, 401: errors[401], 403: errors[403], 404: error("Export is disabled (code metrics_disabled)") },
  }),
  async (c) => {
    const config = await readMetricsConfig(c);
    if (!config.prometheus_enabled) {
      throw new ApiError(
        404,
        "metrics_disabled",
        'Prometheus export is disabled: enable it with PUT /api/cloud/metrics/config {"prometheus_enabled": true}',
      );
    }
    return renderCategories(c, config.prometheus_categories);
  },
);

metricsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/metrics/config",
    tags,
    summary: "The metrics configuration (admin)",
    description:
      "`prometheus_enabled` (default false: the scrape answers 404 `metrics_disabled`) and `prometheus_categories` (default jobs, http, health).",
    responses: { 200: json(MetricsConfig, "Configuration"), 401: errors[401], 403: errors[403] },
  }),
  async (c) => c.json(await readMetricsConfig(c), 200),
);

metricsRoutes.openapi(
  createRoute({
    method: "put",
    path: "/api/cloud/metrics/config",
    tags,
    summary: "Change the metrics configuration (admin)",
    description:
      "Send either field or both; a field left out keeps its value. Categories are stored without duplicates, in exposition order. Nothing changes when any category is unknown.",
    request: jsonBody(MetricsConfigUpdate),
    responses: { 200: json(MetricsConfig, "The configuration now in force"), ...errors },
  }),
  async (c) => {
    const previous = await readMetricsConfig(c);
    const body = c.req.valid("json");
    const next: MetricsConfig = {
      prometheus_enabled: body.prometheus_enabled ?? previous.prometheus_enabled,
      prometheus_categories: canonicalCategories(body.prometheus_categories ?? previous.prometheus_categories),
    };
    await saveMetricsConfig(c, previous, next);
    return c.json(next, 200);
  },
);

metricsRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/cloud/metrics/config/templates/{template}",
    tags,
    summary: "Apply a category template (admin)",
    description:
      "minimal: jobs. standard: jobs, http, health. security: jobs, http, rate_limits, audit, approvals. full: every category. Replaces the categories; whether export is enabled does not change.",
    request: { params: MetricTemplateParam },
    responses: { 200: json(MetricsConfig, "The configuration now in force"), ...errors },
  }),
  async (c) => {
    const { template } = c.req.valid("param");
    const previous = await readMetricsConfig(c);
    const next: MetricsConfig = { ...previous, prometheus_categories: canonicalCategories(METRIC_TEMPLATES[template]) };
    await saveMetricsConfig(c, previous, next, { template });
    return c.json(next, 200);
  },
);

metricsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/metrics/config/preview",
    tags,
    summary: "Render categories without changing the configuration (admin)",
    description:
      "What the scrape would answer with these categories, whether or not export is enabled. No `categories`: the configured ones.",
    request: { query: MetricsPreviewQuery },
    responses: { 200: exposition, ...errors },
  }),
  async (c) => {
    const categories = c.req.valid("query").categories ?? (await readMetricsConfig(c)).prometheus_categories;
    return renderCategories(c, categories);
  },
);
