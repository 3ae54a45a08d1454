import type { Context } from "hono";
import type { BudgetStanding } from "../../shared/schemas/spend";
import type { AppEnv } from "../app-env";
import { auditLater } from "../audit/trail";
import type { SubmitOutcome, Submitter } from "../jobs/job";
import { schedulerOf } from "../jobs/objects";
import type { LocalSubmit } from "../../shared/schemas/queue";
import { principalOf } from "../middleware/authorize";
import { getSetting } from "../settings-store";
import { announceBudgets } from "../spend/budget-notices";
import { budgetApproval, budgetStanding, budgetText } from "../spend/budgets";
import { notifyContextOf } from "./effects-context";
import { BoundedMap } from "../../shared/remembered";

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

/**
 * Users a budget applied to at their last submission in this isolate, and when: their next one goes
 * through budgetedSubmitter at once instead of first to the Scheduler. Only a hint of which way to
 * go first: either way every budget that applies is checked, so nothing here can let a job past one.
 */
const BUDGETED_HINT_MS = 60_000;
const budgetedLately = new BoundedMap<number, number>(10_000);

/**
 * A real local submission (POST /api/queue/submit), held to the submitter's budgets as
 * budgetedSubmitter holds it, in fewer reads: the Scheduler's submission group reads the budgets in
 * its own read batch and decides at once a submission no budget applies to (answered without
 * `budget`, as budgetedSubmitter's null standing is); one a budget applies to comes back with
 * nothing stored and goes through budgetedSubmitter and `submit`.
 *
 * @example
 * const { outcome, budget } = await submitWithinBudget(c, body);
 */
export async function submitWithinBudget(
  c: Context<AppEnv>,
  body: LocalSubmit,
): Promise<{ outcome: SubmitOutcome; budget: BudgetStanding | null }> {
  const { user } = principalOf(c);
  const scheduler = schedulerOf(c.env);
  const hinted = budgetedLately.get(user.id);
  if (hinted === undefined || Date.now() - hinted > BUDGETED_HINT_MS) {
    const submitter: Submitter = { id: user.id, team_id: user.team_id, priority: user.priority, level: user.level };
    const claim = c.get("idempotencyClaim");
    const outcome = await scheduler.submitUnlessBudgeted(submitter, body, claim && { userId: claim.userId, key: claim.key });
    if (outcome !== "budgeted") {
      budgetedLately.delete(user.id);
      // Stored with the job as the answer this route is about to send (answered without `budget`).
      if (claim && outcome.status !== "invalid") claim.answered = true;
      return { outcome, budget: null };
    }
    budgetedLately.set(user.id, Date.now());
  }
  const { submitter, budget } = await budgetedSubmitter(c, false);
  return { outcome: await scheduler.submit(submitter, body), budget };
}
