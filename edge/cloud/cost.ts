import { ApiError } from "../errors";
import { RUNTIME_OPTION, runtimeMinutes } from "../jobs/runtime";

/*
 * Cloud cost arithmetic (README "Cloud training"): the provider bills per second of hardware
 * time, an estimate is shown before each submission, and a spending limit per period caps what
 * is committed (finished jobs' costs plus running and waiting jobs' estimates). Pure: the caller
 * reads the rates, settings and jobs.
 */

/** A count of ten-thousandths of a dollar: costs are compared and rounded there, away from binary fractions. */
const toUnits = (usd: number) => Math.round(Number((usd * 10_000).toPrecision(12)));
const fromUnits = (units: number) => units / 10_000;

/**
 * The run time an estimate assumes, in seconds: the environment's `--max_runtime_minutes` (a
 * number or a numeric string), else `defaultMinutes` - the run time the job may really take, since
 * that is what reaches the trainer. A submission's max_runtime_minutes may raise it (a more
 * careful estimate); only when `mayLower` (an admin) may it lower it: the approval rule and the
 * spending limit are held to this figure, so anyone else asking for less is refused (422
 * runtime_below_environment, naming both figures). A value that is not a whole number of minutes
 * from 1 to 10080 is refused (422 invalid_option).
 *
 * @example
 * expectedSeconds(undefined, { "--max_runtime_minutes": "90" }, 60); // 5400
 * expectedSeconds(120, { "--max_runtime_minutes": "90" }, 60); // 7200
 * expectedSeconds(1, { "--max_runtime_minutes": "90" }, 60); // throws 422 runtime_below_environment
 * expectedSeconds(1, { "--max_runtime_minutes": "90" }, 60, true); // 60
 */
export function expectedSeconds(
  submissionMinutes: number | undefined,
  config: Record<string, unknown>,
  defaultMinutes: number,
  mayLower = false,
): number {
  const asked = runtimeMinutes(submissionMinutes, "max_runtime_minutes");
  const fromEnvironment = runtimeMinutes(config[RUNTIME_OPTION], RUNTIME_OPTION);
  const environment = fromEnvironment ?? runtimeMinutes(defaultMinutes, "default_max_runtime_minutes")!;
  if (asked !== undefined && asked < environment && !mayLower) {
    const source = fromEnvironment !== undefined ? `the environment's ${RUNTIME_OPTION}` : "the default run time of the cloud settings";
    const message = `${asked} is below ${environment} minutes, ${source}: the estimate, the approval rule and the spending limit use the run time the job may really take. Send ${environment} or more, or lower ${RUNTIME_OPTION} in the environment; only an admin may submit a shorter estimate`;
    throw new ApiError(422, "runtime_below_environment", `max_runtime_minutes ${message}`, [{ path: "max_runtime_minutes", message }]);
  }
  return (asked ?? environment) * 60;
}

/**
 * USD for `seconds` at `ratePerSecond`, rounded to 4 decimals (half up).
 *
 * @example
 * costOf(0.0014, 3600); // 5.04
 */
export function costOf(ratePerSecond: number, seconds: number): number {
  if (!(ratePerSecond >= 0 && Number.isFinite(ratePerSecond)) || !(seconds >= 0 && Number.isFinite(seconds)))
    throw new RangeError(`costOf needs a rate and seconds of 0 or more, got ${ratePerSecond} and ${seconds}`);
  return fromUnits(toUnits(ratePerSecond * seconds));
}

const timeOf = (iso: string | null) => {
  const ms = iso === null ? NaN : Date.parse(iso);
  return Number.isNaN(ms) ? null : ms;
};

/**
 * Seconds billed so far. Before the start: 0. Running: whole seconds since `startedAt` (it ticks
 * each second), or the provider's billed seconds when it reports more. Ended (completed, failed or
 * cancelled: a cancel bills the time used): the provider's billed seconds, else the time from
 * start to end. Never negative, whatever the clocks say.
 *
 * @example
 * billedSecondsNow({ startedAt: "2026-11-23T09:00:00Z", completedAt: null, billedSeconds: null }, Date.parse("2026-11-23T09:01:30.900Z")); // 90
 */
export function billedSecondsNow(
  job: { startedAt: string | null; completedAt: string | null; billedSeconds: number | null },
  now: number,
): number {
  const billed = job.billedSeconds !== null && Number.isFinite(job.billedSeconds) ? Math.max(0, job.billedSeconds) : null;
  const started = timeOf(job.startedAt);
  const completed = timeOf(job.completedAt);
  if (started === null) return billed ?? 0;
  const elapsed = (end: number) => Math.max(0, Math.floor((end - started) / 1000));
  if (completed !== null) return billed ?? elapsed(completed);
  return Math.max(billed ?? 0, elapsed(now));
}

/**
 * Start of the spending period holding `now`, in UTC: the day, the ISO week (from Monday), or the
 * calendar month.
 *
 * @example
 * periodStart("week", new Date("2027-01-01T12:00:00Z")).toISOString(); // "2026-12-28T00:00:00.000Z"
 */
export function periodStart(period: "day" | "week" | "month", now: Date): Date {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const d = now.getUTCDate();
  switch (period) {
    case "day":
      return new Date(Date.UTC(y, m, d));
    case "week":
      // getUTCDay: Sunday 0 .. Saturday 6; ISO weeks start on Monday.
      return new Date(Date.UTC(y, m, d - ((now.getUTCDay() + 6) % 7)));
    case "month":
      return new Date(Date.UTC(y, m, 1));
  }
}

/** "$5.04", "$0.0014": cents, or more decimals when a cost is smaller than that. */
function usd(amount: number): string {
  const fixed = amount.toFixed(4).replace(/0{1,2}$/, "");
  return `$${fixed}`;
}

/**
 * Whether `estimateUsd` more fits under the period's limit, given `committedUsd` (spent this
 * period plus running and waiting jobs' estimates). Exactly reaching the limit is allowed. No
 * limit (null): always allowed, remainingUsd null. The message, when refused, says by how much.
 *
 * @example
 * spendingCheck(10, 8.5, 2); // { allowed: false, remainingUsd: 1.5, message: "..." }
 */
export function spendingCheck(
  limitUsd: number | null,
  committedUsd: number,
  estimateUsd: number,
): { allowed: boolean; remainingUsd: number | null; message: string | null } {
  if (limitUsd === null) return { allowed: true, remainingUsd: null, message: null };
  const limit = toUnits(limitUsd);
  const committed = toUnits(committedUsd);
  const estimate = toUnits(estimateUsd);
  const remaining = Math.max(0, limit - committed);
  if (committed + estimate <= limit) return { allowed: true, remainingUsd: fromUnits(remaining), message: null };
  return {
    allowed: false,
    remainingUsd: fromUnits(remaining),
    message:
      `The spending limit of ${usd(fromUnits(limit))} for this period would be exceeded: ${usd(fromUnits(committed))} is already committed ` +
      `(spent plus running and waiting jobs' estimates), ${usd(fromUnits(remaining))} remains, and this job is estimated at ${usd(fromUnits(estimate))}. ` +
      `Shorten its run time, wait for the next period, or ask an admin to raise the limit`,
  };
}
