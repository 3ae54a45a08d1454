import { createRoute } from "@hono/zod-openapi";
import { levelAtLeast } from "../../shared/levels";
import { costCsv } from "../../shared/cost-csv";
import { Budgets, BudgetsUpdate, CostQuery, CostReport, GpuPrices, GpuPricesUpdate } from "../../shared/schemas/spend";
import { ApiError } from "../errors";
import { principalOf } from "../middleware/authorize";
import { createRouter } from "../router";
import { getSetting } from "../settings-store";
import { costReport, periodBound } from "../spend/cost-report";
import { userIdByName } from "../spend/users";
import { error, json, jsonBody } from "./openapi";
import { patchSetting } from "./setting-patch";

/** Spend: GET /api/cost, and the admin's GPU prices and budgets (edge/routes/api-docs/spend.md). */
export const spendRoutes = createRouter();
const tags = ["Spend"];

/** A table's entries patched to null are removed. */
const withoutNulls = (table: Record<string, number | null>) =>
  Object.fromEntries(Object.entries(table).filter(([, v]) => v !== null)) as Record<string, number>;

spendRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/cost",
    tags,
    summary: "GPU-hours, cost and jobs grouped by user, team, environment or provider over a period",
    description:
      "`since` (or `from`): `30d`, `12h`, `2w`, `90m` before now or an ISO date or time, default 30d; `until` (or `to`): default now. Local and worker jobs priced at the GPU prices (`GET /api/admin/gpu-prices`), cloud jobs at what their provider billed. `format=csv` or `Accept: text/csv`: the same as CSV with a header row. Researchers: their own jobs only (`user` naming someone else: 403 `not_your_cost`); leads and admins: everyone's, or `user`'s. 422 `invalid_period` for a bound that is not a span or an ISO date, or an `until` not after `since`; 404 for an unknown `user`.",
    request: { query: CostQuery },
    responses: {
      200: {
        description: "The report",
        content: { "application/json": { schema: CostReport }, "text/csv": { schema: { type: "string" } } },
      },
      401: error("No valid credential"),
      403: error("A viewer, or a researcher naming another user"),
      404: error("No such user"),
      422: error("A bad grouping or period"),
    },
  }),
  async (c) => {
    const q = c.req.valid("query");
    const { user } = principalOf(c);
    const all = levelAtLeast(user.level, "lead");
    const db = c.get("db");
    let userId: number | undefined = all ? undefined : user.id;
    if (q.user !== undefined) {
      if (!all && q.user !== user.username)
        throw new ApiError(
          403,
          "not_your_cost",
          `Only leads and admins may read another user's cost; you may name only yourself (${user.username})`,
        );
      userId = await userIdByName(db, q.user);
      if (userId === undefined) throw new ApiError(404, "not_found", `No user named "${q.user}"`);
    }
    const now = Date.now();
    const since = periodBound(q.since !== undefined ? "since" : "from", q.since ?? q.from ?? "30d", now);
    const until = q.until ?? q.to;
    const report = await costReport(db, await getSetting(db, "gpu_prices"), {
      by: q.by,
      since,
      until: until === undefined ? now : periodBound(q.until !== undefined ? "until" : "to", until, now),
      now,
      filter: userId === undefined ? {} : { userId },
      scope: all ? "all" : "own",
    });
    const csv = q.format === "csv" || (q.format === undefined && /\btext\/csv\b/.test(c.req.header("accept") ?? ""));
    if (csv)
      return c.body(costCsv(report), 200, {
        "content-type": "text/csv; charset=utf-8",
        "content-disposition": `attachment; filename="cost-by-${report.by}.csv"`,
      });
    return c.json(report, 200);
  },
);

spendRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/admin/gpu-prices",
    tags,
    summary: "The price of a GPU-hour on the service's own boxes (admin)",
    description:
      "By box (`workers`), by GPU model (`gpu_models`) and a default; what `GET /api/cost` and the budgets price local and worker jobs at.",
    responses: { 200: json(GpuPrices, "The prices in force"), 401: error("No valid credential"), 403: error("Not an admin") },
  }),
  async (c) => c.json(await getSetting(c.get("db"), "gpu_prices"), 200),
);

spendRoutes.openapi(
  createRoute({
    method: "put",
    path: "/api/admin/gpu-prices",
    tags,
    summary: "Set GPU-hour prices (admin)",
    description:
      "Any field; `workers` and `gpu_models` entries are set one by one (null removes one), the others keep theirs. Applies to every report from now on, past jobs included (costs are not stored per job). Audited as `gpu_prices_changed` with the prices before and after.",
    request: jsonBody(GpuPricesUpdate),
    responses: {
      200: json(GpuPrices, "The prices now in force"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      422: error("A negative or non-numeric price, or an unknown field"),
    },
  }),
  async (c) =>
    c.json(
      await patchSetting(c, "gpu_prices", c.req.valid("json") as never, "gpu_prices_changed", "GPU prices", (p) => ({
        ...p,
        workers: withoutNulls(p.workers),
        gpu_models: withoutNulls(p.gpu_models),
      })),
      200,
    ),
);

spendRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/admin/budgets",
    tags,
    summary: "Budgets per user and per team (admin)",
    description: "Amounts in USD per period, by user id and by team id; the warning share and what a used-up budget does.",
    responses: { 200: json(Budgets, "The budgets in force"), 401: error("No valid credential"), 403: error("Not an admin") },
  }),
  async (c) => c.json(await getSetting(c.get("db"), "budgets"), 200),
);

spendRoutes.openapi(
  createRoute({
    method: "put",
    path: "/api/admin/budgets",
    tags,
    summary: "Set budgets (admin)",
    description:
      "Any field; `users` and `teams` entries are set one by one (null removes one). `on_exceeded`: `block` (402 `budget_exceeded`) or `require_approval` (the job waits blocked for an admin). Audited as `budgets_changed` with the budgets before and after.",
    request: jsonBody(BudgetsUpdate),
    responses: {
      200: json(Budgets, "The budgets now in force"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      422: error("A bad amount, period, share or key"),
    },
  }),
  async (c) =>
    c.json(
      await patchSetting(c, "budgets", c.req.valid("json") as never, "budgets_changed", "budgets", (b) => ({
        ...b,
        users: withoutNulls(b.users),
        teams: withoutNulls(b.teams),
      })),
      200,
    ),
);
