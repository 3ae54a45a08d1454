import type { Context } from "hono";
import type { BudgetStanding } from "../../shared/schemas/spend";
import type { AppEnv } from "../app-env";
import { auditLater } from "../audit/trail";
import type { Submitter } from "../jobs/job";
import { principalOf } from "../middleware/authorize";
import { getSetting } from "../settings-store";
import { announceBudgets } from "../spend/budget-notices";
import { budgetApproval, budgetStanding, budgetText } from "../spend/budgets";
import { notifyContextOf } from "./effects-context";

/**
 * The caller as a submitter, held to their budgets first (edge/spend/budgets.ts): a used-up budget
 * refuses the submission (402 budget_exceeded, audited) or makes it wait for approval; from the
 * warning share on, a real submission is audited as `budget_warning` and the crossing is
 * announced (budget.warning / budget.exceeded, once per budget and period). Returns the submitter and
 * where they stand (null: no budget applies), for the answer's `budget`.
 *
 * @example
 * const { submitter, budget } = await budgetedSubmitter(c, body.dry_run);
 */
export async function budgetedSubmitter(
  c: Context<AppEnv>,
  dryRun: boolean,
): Promise<{ submitter: Submitter; budget: BudgetStanding | null }> {
  const { user } = principalOf(c);
  const submitter: Submitter = { id: user.id, team_id: user.team_id, priority: user.priority, level: user.level };
  const db = c.get("db");
  const budgets = await getSetting(db, "budgets");
  if (!Object.keys(budgets.users).length && !Object.keys(budgets.teams).length) return { submitter, budget: null };
  const budget = await budgetStanding(db, budgets, await getSetting(db, "gpu_prices"), user, Date.now());
  if (budget === null || budget.state === "ok") return { submitter, budget };
  if (!dryRun) {
    // Told at once rather than on the Scheduler's next look (each crossing once: budget-notices.ts),
    // past the answer: the submission does not wait on reading its budgets' spend again.
    c.executionCtx.waitUntil(announceBudgets(notifyContextOf(c), new Date(), { userId: user.id, teamId: user.team_id }));
    auditLater(c, {
      event_type: budget.state === "warning" ? "budget_warning" : "budget_exceeded",
      target: `${budget.scope}:${budget.name}`,
      details: { ...budget, text: budgetText(budget), action: budgets.on_exceeded },
    });
  }
  return { submitter: { ...submitter, budget_approval: budgetApproval(budget, budgets) }, budget };
}
