import { z } from "@hono/zod-openapi";

/** The metric categories, in the order the exposition lists them. */
export const METRIC_CATEGORIES = ["jobs", "http", "rate_limits", "approvals", "audit", "health", "circuit_breakers", "provider"] as const;
export type MetricCategory = (typeof METRIC_CATEGORIES)[number];

/** The configuration templates and the categories each one selects. */
export const METRIC_TEMPLATES = {
  minimal: ["jobs"],
  standard: ["jobs", "http", "health"],
  security: ["jobs", "http", "rate_limits", "audit", "approvals"],
  full: METRIC_CATEGORIES,
} as const satisfies Record<string, readonly MetricCategory[]>;
export type MetricTemplate = keyof typeof METRIC_TEMPLATES;
export const METRIC_TEMPLATE_NAMES = Object.keys(METRIC_TEMPLATES) as MetricTemplate[];

/** Categories without duplicates, in METRIC_CATEGORIES order: the form they are stored and rendered in. */
export function canonicalCategories(categories: readonly MetricCategory[]): MetricCategory[] {
  return METRIC_CATEGORIES.filter((category) => categories.includes(category));
}

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
