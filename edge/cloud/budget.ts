/*
 * The budget a running cloud job may spend (issue 27, Build 5: money is enforced, not estimated).
 * A job was admitted on its estimate (rate x the run time it assumed) under the spending limit;
 * while it runs, its billed cost so far is held against the smaller of that approved estimate and
 * what is left of the limit for it (the limit less what everything else has committed: ended
 * jobs' costs this period and other running jobs' estimates or costs, as
 * edge/cloud/spending.ts committedSpendingStatement counts them). Reaching it, the job is
 * cancelled at its provider, with the `cloud.budget_exceeded` event and the reason as its end.
 * Pure: the cloud job (edge/cloud/cloud-job.ts) reads the figures.
 */

/** The event a job gets when its billed cost reached its budget (stored once: its own sequence number). */
export const BUDGET_EVENT_TYPE = "cloud.budget_exceeded";
/** The budget event's sequence number in the job's log: below zero, apart from the provider's log lines (their byte offsets). */
export const BUDGET_EVENT_SEQ = -1_000_000;

export interface BudgetFigures {
  /** Billed so far (USD, rounded to 4 decimals as costOf does). */
  costUsd: number;
  /** The estimate the job was admitted (or approved) on. */
  estimateUsd: number;
  /** The spending limit of the period; null: none. */
  limitUsd: number | null;
  period: "day" | "week" | "month";
  /** Everything committed this period, this job included (its estimate or its cost, whichever is larger). */
  committedUsd: number;
}

export interface BudgetVerdict {
  /** What was reached: the approved estimate, or what was left of the spending limit. */
  reason: "estimate" | "spending_limit";
  /** The budget (USD) the cost reached. */
  capUsd: number;
  costUsd: number;
  /** The job's end reason (its error_message) and the event's message. */
  message: string;
}

const units = (usd: number) => Math.round(Number((usd * 10_000).toPrecision(12)));
const usd = (amount: number) => `$${amount.toFixed(4).replace(/0{1,2}$/, "")}`;

/**
 * Whether a running job's billed cost has reached its budget: null while it is under, or nothing
 * has been billed yet (a job is never stopped before it ran). Exactly reaching it counts.
 *
 * @example
 * budgetVerdict({ costUsd: 0.084, estimateUsd: 0.084, limitUsd: null, period: "month", committedUsd: 0 })?.reason; // "estimate"
 * budgetVerdict({ costUsd: 2, estimateUsd: 60, limitUsd: 10, period: "month", committedUsd: 68 })?.reason; // "spending_limit"
 */
export function budgetVerdict(figures: BudgetFigures): BudgetVerdict | null {
  const cost = units(figures.costUsd);
  if (cost <= 0) return null;
  const estimate = units(figures.estimateUsd);
  let cap = estimate;
  let reason: BudgetVerdict["reason"] = "estimate";
  if (figures.limitUsd !== null) {
    // What the others have committed: the total less this job's own share.
    const others = units(figures.committedUsd) - Math.max(estimate, cost);
    const left = Math.max(0, units(figures.limitUsd) - others);
    if (left < cap) {
      cap = left;
      reason = "spending_limit";
    }
  }
  if (cost < cap) return null;
  const capUsd = cap / 10_000;
  const costUsd = cost / 10_000;
  const message =
    reason === "estimate"
      ? `cancelled by the service: its billed cost ${usd(costUsd)} reached its approved estimate of ${usd(capUsd)} (the run time it was submitted with); submit it with a longer max_runtime_minutes to let it run longer`
      : `cancelled by the service: its billed cost ${usd(costUsd)} reached what was left for it (${usd(capUsd)}) of the ${figures.period}'s spending limit of ${usd(figures.limitUsd!)}; an admin may raise spending_limit_usd (PUT /api/cloud/settings)`;
  return { reason, capUsd, costUsd, message };
}
