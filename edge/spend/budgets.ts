import type { Budgets, BudgetStanding, GpuPrices } from "../../shared/schemas/spend";
import { periodStart } from "../cloud/cost";
import type { Database } from "../db/client";
import { ApiError } from "../errors";
import { spentSince } from "./cost-report";

/*
 * Budgets per user and per team over every job, local and cloud (README "Spend"): what a user or a
 * team used this period (ended jobs' costs and running jobs' cost so far, as GET /api/cost counts
 * them) against the admin's amount. At warn_at_percent a submission is answered `warning`; a
 * budget used up refuses it (402 budget_exceeded) or lets it wait for an admin's approval. The
 * cloud spending limit (edge/cloud/spending.ts) is a separate, service-wide cap and is unchanged.
 */

const units = (usd: number) => Math.round(Number((usd * 10_000).toPrecision(12)));
const usd = (amount: number) => `$${amount.toFixed(2)}`;

/** The state of `used` against `limit`. */
export function budgetState(used: number, limit: number, warnAtPercent: number): BudgetStanding["state"] {
  if (units(used) >= units(limit)) return "exceeded";
  return units(used) * 100 >= units(limit) * warnAtPercent ? "warning" : "ok";
}

/**
 * Whether a budget applies to `user` (their own or their team's): when none does, budgetStanding
 * is null without reading any spend.
 *
 * @example
 * budgetApplies({ ...budgets, users: { "7": 10 } }, { id: 7, team_id: null }); // true
 */
export function budgetApplies(budgets: Budgets, user: { id: number; team_id: string | null }): boolean {
  return budgets.users[String(user.id)] !== undefined || (user.team_id !== null && budgets.teams[user.team_id] !== undefined);
}

/**
 * Where `user` stands against the budgets that apply to them (their own and their team's): the
 * tightest one (the largest share used), or null when neither has a budget.
 *
 * @example
 * await budgetStanding(db, budgets, prices, { id: 7, username: "ada", team_id: "vision" }, Date.now());
 * // { scope: "team", name: "vision", period: "month", used: 4200, limit: 5000, state: "warning" }
 */
export async function budgetStanding(
  db: Database,
  budgets: Budgets,
  prices: GpuPrices,
  user: { id: number; username: string; team_id: string | null },
  now: number,
): Promise<BudgetStanding | null> {
  const since = periodStart(budgets.period, new Date(now)).getTime();
  const candidates: { scope: "user" | "team"; name: string; limit: number; filter: { userId?: number; teamId?: string } }[] = [];
  const own = budgets.users[String(user.id)];
  if (own !== undefined) candidates.push({ scope: "user", name: user.username, limit: own, filter: { userId: user.id } });
  const team = user.team_id === null ? undefined : budgets.teams[user.team_id];
  if (team !== undefined) candidates.push({ scope: "team", name: user.team_id!, limit: team, filter: { teamId: user.team_id! } });
  let tightest: BudgetStanding | null = null;
  for (const c of candidates) {
    const used = await spentSince(db, prices, c.filter, since, now);
    const standing = {
      scope: c.scope,
      name: c.name,
      period: budgets.period,
      used,
      limit: c.limit,
      state: budgetState(used, c.limit, budgets.warn_at_percent),
    };
    const share = (s: BudgetStanding) => (s.limit === 0 ? Infinity : s.used / s.limit);
    if (tightest === null || share(standing) > share(tightest)) tightest = standing;
  }
  return tightest;
}

/** "the user ada's monthly budget of $10.00 ($10.50 used)". */
export function budgetText(s: BudgetStanding): string {
  const period = { day: "daily", week: "weekly", month: "monthly" }[s.period];
  return `the ${s.scope} ${s.name}'s ${period} budget of ${usd(s.limit)} (${usd(s.used)} used)`;
}

/**
 * What a used-up budget means for a new submission: refused (throws 402 budget_exceeded) when the
 * admin chose `block`, else the approval rule it waits on. Null while the budget is not used up.
 *
 * @example
 * budgetApproval(standing, budgets); // "the user ada's monthly budget of $10.00 ($10.50 used) is used up" | null
 */
export function budgetApproval(standing: BudgetStanding | null, budgets: Budgets): string | null {
  if (standing === null || standing.state !== "exceeded") return null;
  if (budgets.on_exceeded === "require_approval") return `${budgetText(standing)} is used up`;
  throw new ApiError(
    402,
    "budget_exceeded",
    `Not queued: ${budgetText(standing)} is used up. Wait for the next period, or ask an admin to raise it (PUT /api/admin/budgets)`,
  );
}
