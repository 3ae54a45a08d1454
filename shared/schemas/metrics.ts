import { z } from "@hono/zod-openapi";
import { METRIC_CATEGORIES, METRIC_TEMPLATE_NAMES, METRIC_TEMPLATES, type MetricTemplate } from "../metric-categories";

// The categories and templates are plain constants in shared/metric-categories.ts (the dashboard reads them without zod).
export { canonicalCategories, METRIC_CATEGORIES, METRIC_TEMPLATE_NAMES, METRIC_TEMPLATES } from "../metric-categories";
export type { MetricCategory, MetricTemplate } from "../metric-categories";

export const MetricCategoryName = z
  .enum(METRIC_CATEGORIES, {
    error: (issue) => `unknown metrics category ${JSON.stringify(issue.input)}: use one of ${METRIC_CATEGORIES.join(", ")}`,
  })
  .openapi({ example: "jobs" });

export const MetricsConfig = z
  .object({
    prometheus_enabled: z
      .boolean()
      .openapi({ description: "Whether GET /api/cloud/metrics/prometheus answers (off by default: it answers 404 while off)" }),
    prometheus_categories: z
      .array(MetricCategoryName)
      .openapi({ description: "The categories the scrape renders, in exposition order", example: [...METRIC_TEMPLATES.standard] }),
  })
  .openapi("MetricsConfig");
export type MetricsConfig = z.infer<typeof MetricsConfig>;

export const MetricsConfigUpdate = z
  .strictObject({
    prometheus_enabled: z.boolean().optional(),
    prometheus_categories: z
      .array(MetricCategoryName)
      .optional()
      .openapi({ description: "Replaces the whole list; duplicates are dropped" }),
  })
  .openapi("MetricsConfigUpdate", { example: { prometheus_enabled: true, prometheus_categories: ["jobs", "http", "health"] } });

export const MetricTemplateParam = z.object({
  template: z
    .enum(METRIC_TEMPLATE_NAMES as [MetricTemplate, ...MetricTemplate[]], {
      error: (issue) => `unknown metrics template ${JSON.stringify(issue.input)}: use one of ${METRIC_TEMPLATE_NAMES.join(", ")}`,
    })
    .openapi({ param: { name: "template", in: "path" }, example: "standard" }),
});

export const MetricsPreviewQuery = z.object({
  categories: z
    // One `categories` parameter arrives as a string, several as an array; a comma list also works.
    .preprocess(
      (value) => (value === undefined ? value : [value].flat().flatMap((item) => String(item).split(","))),
      z.array(MetricCategoryName),
    )
    .optional()
    .openapi({ description: "Categories to render, repeated (`?categories=jobs&categories=http`); none: the configured ones" }),
});
