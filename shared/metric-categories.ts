// The Prometheus export's categories and templates as plain constants, without zod: the dashboard
// (edge/ui/views/metrics.tsx) draws its checkboxes from them, and shared/schemas/metrics.ts builds
// its enums from them (and re-exports them).

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
