import { periodStart } from "../cloud/cost";
import { notify, type NotifyContext } from "../notifications/notify";
import { getSetting } from "../settings-store";
import { budgetState, budgetText } from "./budgets";
import { spentSince } from "./cost-report";

/*
 * Telling people their budget is running out (issue 30: budget.warning at the warning share,
 * budget.exceeded at 100 %). A budget's use grows while its jobs run, not only when someone
 * submits, so the Scheduler checks every budget on its beat (at most every CHECK_EVERY_MS) and a
 * submission checks its submitter's own at once. Each crossing is told once per budget, period
 * and state (the budget_notices row is the claim: two checks at once send one notice), to the
 * user a user budget is for, or to every enabled member of a team a team budget is for. A budget
 * told used up this period is not read again until the next period.
 */

/** How often the Scheduler's beat looks at every budget. */
export const CHECK_EVERY_MS = 5_000;

const CLAIM = `INSERT INTO budget_notices (budget, period_start, state, used, budget_limit, noticed_at)
               VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING RETURNING budget`;

/** Which budgets to look at: all of them, or those of one submitter (their own and their team's). */
export type BudgetScope = "all" | { userId: number; teamId: string | null };

/**
 * Announces each budget in `scope` that has newly reached its warning share or 100 % this period;
 * returns how many crossings were announced. Never throws: a failed check is logged.
 *
 * @example
 * await announceBudgets(ctx, new Date(), { userId: 7, teamId: "vision" });
 */
export async function announceBudgets(ctx: NotifyContext, now: Date, scope: BudgetScope): Promise<number> {
  const { db } = ctx;
  try {
    const budgets = await getSetting(db, "budgets");
    const targets: { scope: "user" | "team"; id: string; limit: number }[] = [];
    for (const [id, limit] of Object.entries(budgets.users))
      if (scope === "all" || Number(id) === scope.userId) targets.push({ scope: "user", id, limit });
    for (const [id, limit] of Object.entries(budgets.teams))
      if (scope === "all" || id === scope.teamId) targets.push({ scope: "team", id, limit });
    if (!targets.length) return 0;
    const prices = await getSetting(db, "gpu_prices");
    const start = periodStart(budgets.period, now);
    // A budget already told used up this period has nothing more to tell: its spend is not read again.
    const told = await db.$client.execute({
      sql: "SELECT budget FROM budget_notices WHERE period_start = ? AND state = 'exceeded'",
      args: [start.toISOString()],
    });
    const usedUp = new Set(told.rows.map((r) => String(r.budget)));
    let announced = 0;
    for (const t of targets) {
      if (usedUp.has(`${t.scope}:${t.id}`)) continue;
      const filter = t.scope === "user" ? { userId: Number(t.id) } : { teamId: t.id };
      const used = await spentSince(db, prices, filter, start.getTime(), now.getTime());
      const state = budgetState(used, t.limit, budgets.warn_at_percent);
      if (state === "ok") continue;
      const claimed = await db.$client.execute({
        sql: CLAIM,
        args: [`${t.scope}:${t.id}`, start.toISOString(), state, used, t.limit, now.toISOString()],
      });
      if (!claimed.rows.length) continue;
      announced++;
      const members = await db.$client.execute(
        t.scope === "user"
          ? { sql: "SELECT id, username FROM users WHERE id = ? AND disabled_at IS NULL", args: [Number(t.id)] }
          : { sql: "SELECT id, username FROM users WHERE team_id = ? AND disabled_at IS NULL", args: [t.id] },
      );
      const name = t.scope === "user" ? String(members.rows[0]?.username ?? `user ${t.id}`) : t.id;
      const standing = { scope: t.scope, name, period: budgets.period, used, limit: t.limit, state };
      ctx.log.warning(`budget ${state === "warning" ? "warning" : "exceeded"}`, { budget: `${t.scope}:${t.id}`, used, limit: t.limit });
      const facts = {
        budget: `${t.scope} ${name}`,
        period: budgets.period,
        period_start: start.toISOString(),
        used_usd: Math.round(used * 100) / 100,
        limit_usd: t.limit,
        warn_at_percent: budgets.warn_at_percent,
        on_exceeded: budgets.on_exceeded,
        reason: budgetText(standing),
      };
      for (const m of members.rows)
        await notify(ctx, state === "warning" ? "budget.warning" : "budget.exceeded", { userId: Number(m.id) }, facts);
    }
    return announced;
  } catch (error) {
    ctx.log.warning("could not check the budgets", { error: String(error) });
    return 0;
  }
}
