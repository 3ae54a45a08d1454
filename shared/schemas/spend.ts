import { z } from "@hono/zod-openapi";

/*
 * Spend: what GPU time on the service's own boxes costs (GpuPrices), what every job cost grouped
 * (GET /api/cost), and the budgets per user and per team that every submission is held to.
 */

const Usd = z.number().min(0).max(1_000_000);
const WorkerName = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/i, "a worker's name");
const GpuModel = z.string().min(1).max(128);

/** Defaults: nothing priced (every local GPU-hour costs 0 until an admin sets a price). */
export const GPU_PRICES_DEFAULTS = {
  currency: "USD" as const,
  default_usd_per_gpu_hour: 0,
  workers: {} as Record<string, number>,
  gpu_models: {} as Record<string, number>,
};

export const GpuPrices = z
  .object({
    currency: z.literal("USD").openapi({ description: "Every cost is in US dollars, as the cloud providers' rates are" }),
    default_usd_per_gpu_hour: Usd.openapi({
      description: "The price of a GPU-hour on a box with no price of its own and a GPU model without one",
    }),
    workers: z.record(WorkerName, Usd).openapi({ description: "$/GPU-hour by worker (box) name: a box's price wins over its GPU models'" }),
    gpu_models: z
      .record(GpuModel, Usd)
      .openapi({ description: "$/GPU-hour by GPU model as nvidia-smi names it (`NVIDIA H100 80GB HBM3`)" }),
  })
  .openapi("GpuPrices", {
    example: { currency: "USD", default_usd_per_gpu_hour: 1.5, workers: { "gpu-box-1": 2 }, gpu_models: { "NVIDIA H100 80GB HBM3": 3.2 } },
  });
export type GpuPrices = z.infer<typeof GpuPrices>;

export const GpuPricesUpdate = z
  .strictObject({
    default_usd_per_gpu_hour: Usd.optional(),
    workers: z.record(WorkerName, Usd.nullable()).optional().openapi({ description: "Entries to set; null removes one" }),
    gpu_models: z.record(GpuModel, Usd.nullable()).optional().openapi({ description: "Entries to set; null removes one" }),
  })
  .openapi("GpuPricesUpdate", { example: { workers: { "gpu-box-1": 2, "old-box": null } } });
export type GpuPricesUpdate = z.infer<typeof GpuPricesUpdate>;

export const BUDGET_DEFAULTS = {
  period: "month" as "day" | "week" | "month",
  warn_at_percent: 80,
  on_exceeded: "block" as "block" | "require_approval",
  users: {} as Record<string, number>,
  teams: {} as Record<string, number>,
};

const UserIdKey = z.string().regex(/^[1-9]\d{0,9}$/, "a user id");
const TeamKey = z.string().min(1).max(64);

export const Budgets = z
  .object({
    period: z.enum(["day", "week", "month"]).openapi({ description: "The period each budget covers, in UTC (a week from Monday)" }),
    warn_at_percent: z.number().int().min(1).max(100).openapi({ description: "Used at or above this share of a budget: state `warning`" }),
    on_exceeded: z.enum(["block", "require_approval"]).openapi({
      description: "A budget used up: refuse new submissions (402 `budget_exceeded`), or let them wait for an admin's approval",
    }),
    users: z.record(UserIdKey, Usd).openapi({ description: "USD per period by user id" }),
    teams: z.record(TeamKey, Usd).openapi({ description: "USD per period by team id" }),
  })
  .openapi("Budgets", {
    example: { period: "month", warn_at_percent: 80, on_exceeded: "block", users: { "2": 500 }, teams: { vision: 5000 } },
  });
export type Budgets = z.infer<typeof Budgets>;

export const BudgetsUpdate = z
  .strictObject({
    period: Budgets.shape.period.optional(),
    warn_at_percent: Budgets.shape.warn_at_percent.optional(),
    on_exceeded: Budgets.shape.on_exceeded.optional(),
    users: z.record(UserIdKey, Usd.nullable()).optional().openapi({ description: "Budgets to set; null removes one" }),
    teams: z.record(TeamKey, Usd.nullable()).optional().openapi({ description: "Budgets to set; null removes one" }),
  })
  .openapi("BudgetsUpdate", { example: { on_exceeded: "require_approval", users: { "2": 300 } } });
export type BudgetsUpdate = z.infer<typeof BudgetsUpdate>;

/** Where a submitter stands against the tightest budget that applies to them. */
export const BudgetStanding = z
  .object({
    scope: z.enum(["user", "team"]),
    name: z.string().openapi({ description: "The username or the team id" }),
    period: Budgets.shape.period,
    used: z.number().openapi({ description: "USD used this period: ended jobs' costs and running jobs' cost so far" }),
    limit: z.number(),
    state: z.enum(["ok", "warning", "exceeded"]),
  })
  .openapi("BudgetStanding");
export type BudgetStanding = z.infer<typeof BudgetStanding>;

export const COST_GROUPS = ["user", "team", "environment", "provider"] as const;

export const CostQuery = z
  .object({
    by: z.enum(COST_GROUPS).default("user"),
    since: z
      .string()
      .optional()
      .openapi({ description: "`30d`, `12h`, `2w`, `90m` before now, or an ISO date or time; default 30d. `from` is the same" }),
    until: z.string().optional().openapi({ description: "An ISO date or time; default now. `to` is the same" }),
    from: z.string().optional(),
    to: z.string().optional(),
    user: z
      .string()
      .optional()
      .openapi({ description: "Only this username's jobs (leads and admins; a researcher may name only themselves)" }),
    format: z.enum(["json", "csv"]).optional().openapi({ description: "csv: text/csv with a header row (also with Accept: text/csv)" }),
  })
  .openapi("CostQuery");

export const CostGroup = z
  .object({
    key: z
      .string()
      .openapi({ description: "The user's username, the team id, the environment name or the provider; `(none)` when a job has none" }),
    gpu_hours: z.number(),
    cost: z.number(),
    jobs: z.number().int(),
  })
  .openapi("CostGroup");

export const CostReport = z
  .object({
    by: z.enum(COST_GROUPS),
    since: z.string(),
    until: z.string(),
    currency: z.literal("USD"),
    scope: z.enum(["all", "own"]).openapi({ description: "own: a researcher sees only their own jobs" }),
    groups: z.array(CostGroup).openapi({ description: "Largest cost first, then by key" }),
    total: CostGroup.omit({ key: true }),
  })
  .openapi("CostReport", {
    example: {
      by: "user",
      since: "2026-10-28T00:00:00.000Z",
      until: "2026-11-27T00:00:00.000Z",
      currency: "USD",
      scope: "all",
      groups: [{ key: "ada", gpu_hours: 12, cost: 24, jobs: 3 }],
      total: { gpu_hours: 12, cost: 24, jobs: 3 },
    },
  });
export type CostReport = z.infer<typeof CostReport>;
