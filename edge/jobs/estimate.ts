import type { DURATION_METHODS, END_METHODS } from "../../shared/schemas/queue";
import { maxRuntimeMinutes } from "./runtime";

/*
 * How long jobs are expected to take, for the planner's backfill and for people reading the
 * queue (issue 17 steps 1 and 2). Pure: the callers read and store the figures.
 *
 * A running job's end comes from its own progress when it reports steps (the best evidence we
 * have), else from what its cloud submission assumed, else from its environment's
 * --max_runtime_minutes, else it is unknown. A waiting job's run time comes from its
 * --max_runtime_minutes, else from the recent runs of the same environment on as many GPUs.
 * Every figure is an estimate: the planner must stay safe when one is wrong.
 */

/** The window the step rate is averaged over: a change of speed shows within minutes, one odd batch barely moves it. */
export const RATE_WINDOW_MS = 120_000;
/** How many recent completed runs of an environment on a GPU count a waiting job's run time is the median of. */
export const RECENT_RUNS = 5;
/**
 * The farthest ahead an estimate may lie. Jobs run a week at most (MAX_RUNTIME_MINUTES), so an
 * end further out than this comes from a trainer's nonsense step counts, not from a forecast.
 */
export const HORIZON_MS = 365 * 24 * 3_600_000;

/** A running job's progress as stored between event batches (queue_entries.progress_rate, JSON). */
export interface ProgressRate {
  /** The last step reported, of `total`. */
  step: number;
  total: number;
  /** Epoch ms the service received that step. */
  at: number;
  /** The averaged time per step, ms. */
  msPerStep: number;
  /** The first point measured from (after the start, or a restart), kept for the first RATE_WINDOW_MS. */
  from?: { step: number; at: number };
}

export type ProgressPoint = Pick<ProgressRate, "step" | "total" | "at">;

export type EndMethod = (typeof END_METHODS)[number];
export type DurationMethod = (typeof DURATION_METHODS)[number];

export interface ExpectedEnd {
  /** Epoch ms. */
  at: number;
  method: EndMethod;
}

export interface ExpectedDuration {
  ms: number;
  method: DurationMethod;
  /** How it was estimated, in words, for people reading the queue. */
  basis: string;
}

/**
 * The words for a run time that is a job's --max_runtime_minutes.
 *
 * @example
 * maxRuntimeBasis(90); // "its --max_runtime_minutes (90)"
 */
export const maxRuntimeBasis = (minutes: number) => `its --max_runtime_minutes (${minutes})`;

/** The expected start of a job that waits for an admin's approval, in words. */
export const AWAITING_APPROVAL_BASIS = "unknown: waits for an admin's approval";

/** Why a waiting job's run time is unknown, in words. */
export const UNKNOWN_RUN_BASIS =
  "unknown: no --max_runtime_minutes, and no completed run of its environment on as many GPUs in the last 30 days";

/** What a running job's end is estimated from. */
export interface RunningFacts {
  /** Epoch ms this attempt started (its admission); null before. */
  startedAt: number | null;
  rate: ProgressRate | null;
  /** The config snapshot's `--max_runtime_minutes`, as stored (a number, a numeric string, or anything else: ignored). */
  maxRuntime: unknown;
  /** A cloud job's run-time allowance (cloud_jobs.expected_seconds) and its provider's start when reported; null for other jobs. */
  cloud: { expectedSeconds: number; providerStartedAt: number | null } | null;
}

/** What a waiting job's run time is estimated from. */
export interface WaitingFacts {
  jobType: "local" | "cloud";
  configName: string | null;
  numProcesses: number;
  maxRuntime: unknown;
  /** The config snapshot's `--max_train_steps`, as stored (a whole number > 0 counts; anything else: ignored). */
  steps?: unknown;
}

const isCount = (n: unknown): n is number => typeof n === "number" && Number.isFinite(n) && n >= 0 && n <= Number.MAX_SAFE_INTEGER;

/**
 * The step and total of a `training.progress` event's data, received at `at`; null unless both
 * are numbers (the trainer's own words: anything else is ignored, never an error).
 *
 * @example
 * progressPoint({ step: 5, total_steps: 20, loss: 0.4 }, Date.now()); // { step: 5, total: 20, at: ... }
 */
export function progressPoint(data: unknown, at: number): ProgressPoint | null {
  if (typeof data !== "object" || data === null) return null;
  const { step, total_steps: total } = data as { step?: unknown; total_steps?: unknown };
  return typeof step === "number" && typeof total === "number" ? { step, total, at } : null;
}

/**
 * The rate after one more progress point.
 *
 * - The first point's rate is the whole time since the attempt started over the steps done, so
 *   dispatch and model loading count: the first estimate errs late, which keeps a reservation
 *   safe rather than promising a GPU too soon.
 * - For RATE_WINDOW_MS from that first point, the average since it: exact for a steady job after
 *   two points, with the loading time left out (an average that started from the first point's
 *   rate would carry it for minutes).
 * - After that, a time-weighted moving average of the rate seen since the previous point, with
 *   weight min(1, dt / 2 min): it forgets the loading time and follows a job that slows down or
 *   speeds up within a few minutes, while one batch that arrived late (the runner sends in
 *   batches) moves it only by its share of the window. Weighting by time rather than per point
 *   makes it independent of how often the runner sends.
 * - A point whose step did not advance (a stall, a resent batch) or without a positive total
 *   changes nothing: a stall shows as an estimate that is passed, which the planner treats as
 *   an overrun.
 * - A step counter that goes backwards (a run resumed from a checkpoint) restarts the rate from
 *   that point: the time per step measured so far is kept (the same model on the same GPUs),
 *   and the next points are measured from there.
 * - A point that would put the end more than HORIZON_MS away is ignored as nonsense.
 *
 * @example
 * let rate = advanceRate(null, { step: 10, total: 100, at: start + 60_000 }, start); // msPerStep 6000
 * rate = advanceRate(rate, { step: 20, total: 100, at: start + 90_000 }, start); // msPerStep 3000: 10 steps since the first point, in 30 s
 */
export function advanceRate(prev: ProgressRate | null, point: ProgressPoint, startedAt: number | null): ProgressRate | null {
  const { step, total, at } = point;
  if (!isCount(step) || !isCount(total) || total <= 0 || !Number.isFinite(at)) return prev;
  let msPerStep: number;
  let from: ProgressRate["from"];
  if (prev === null) {
    if (startedAt === null || step <= 0 || at <= startedAt) return null;
    msPerStep = (at - startedAt) / step;
    from = { step, at };
  } else if (step < prev.step) {
    msPerStep = prev.msPerStep;
    from = { step, at };
  } else if (step === prev.step) {
    return prev;
  } else if (prev.from && at - prev.from.at <= RATE_WINDOW_MS) {
    // Points received with the first one (no time between) say nothing about speed yet.
    msPerStep = at > prev.from.at ? (at - prev.from.at) / (step - prev.from.step) : prev.msPerStep;
    from = prev.from;
  } else {
    // Points received together (dt <= 0) say nothing about speed: the step moves, the rate stays.
    const dt = at - prev.at;
    const seen = dt > 0 ? dt / (step - prev.step) : prev.msPerStep;
    msPerStep = prev.msPerStep + Math.min(1, Math.max(0, dt) / RATE_WINDOW_MS) * (seen - prev.msPerStep);
  }
  const next: ProgressRate = { step, total, at: prev === null || step < prev.step ? at : Math.max(at, prev.at), msPerStep };
  if (from) next.from = from;
  const left = Math.max(0, total - step) * msPerStep;
  return Number.isFinite(left) && left <= HORIZON_MS ? next : prev;
}

/** A stored progress_rate, or null when absent or not one (the column is only written by appendEvents, but JSON is JSON). */
export function parseRate(text: string | null | undefined): ProgressRate | null {
  if (!text) return null;
  try {
    const r = JSON.parse(text) as Partial<ProgressRate>;
    const numbers = (...ns: unknown[]) => ns.every((n) => typeof n === "number" && Number.isFinite(n));
    if (!numbers(r.step, r.total, r.at, r.msPerStep)) return null;
    const rate: ProgressRate = { step: r.step!, total: r.total!, at: r.at!, msPerStep: r.msPerStep! };
    if (r.from && numbers(r.from.step, r.from.at)) rate.from = { step: r.from.step, at: r.from.at };
    return rate;
  } catch {
    return null;
  }
}

/**
 * When a running job is expected to end, and how that was estimated:
 * - "progress": the last point's time plus the steps left at the averaged rate;
 * - "cost_cap": a cloud job's provider start (else its admission) plus the run time its cost
 *   estimate and its owner's consent assumed (cloud_jobs.expected_seconds). Replicate's API
 *   gives no estimate of its own for a training, so that allowance is the best we know;
 * - "max_runtime": the attempt's start plus its environment's --max_runtime_minutes;
 * - null: nothing to go by.
 * `now` bounds the estimate: one more than HORIZON_MS ahead is none.
 *
 * @example
 * expectedEnd({ startedAt: t, rate: null, maxRuntime: "90", cloud: null }, Date.now()); // { at: t + 5_400_000, method: "max_runtime" }
 */
export function expectedEnd(job: RunningFacts, now: number): ExpectedEnd | null {
  const within = (at: number) => Number.isFinite(at) && at <= now + HORIZON_MS;
  if (job.rate) {
    const at = job.rate.at + Math.max(0, job.rate.total - job.rate.step) * job.rate.msPerStep;
    if (within(at)) return { at, method: "progress" };
  }
  if (job.cloud) {
    const start = job.cloud.providerStartedAt ?? job.startedAt;
    const at = start === null ? NaN : start + job.cloud.expectedSeconds * 1000;
    if (within(at)) return { at, method: "cost_cap" };
  }
  const minutes = maxRuntimeMinutes(job.maxRuntime);
  if (minutes !== null && job.startedAt !== null) return { at: job.startedAt + minutes * 60_000, method: "max_runtime" };
  return null;
}

/**
 * A job's expected end as it starts at `startedAt`, before any progress: its cost cap (a cloud
 * job's run-time allowance in seconds) or its max runtime; else the end the plan that started it
 * expected (`admission.expectedEndAt`: its run time from recent runs, which backfilling it relied
 * on), until its progress says better; null when none of these is known.
 *
 * @example
 * endAtStart({ maxRuntime: 30, cloudSeconds: null }, Date.now()); // { at: ..., method: "max_runtime" }
 * endAtStart({ maxRuntime: null, cloudSeconds: null }, now, { expectedEndAt: now + 600_000 }); // { at: now + 600_000, method: "recent_runs" }
 */
export function endAtStart(
  job: { maxRuntime: unknown; cloudSeconds: number | null },
  startedAt: number,
  admission: { expectedEndAt?: number | null } = {},
): ExpectedEnd | null {
  const cloud = job.cloudSeconds === null ? null : { expectedSeconds: job.cloudSeconds, providerStartedAt: null };
  const own = expectedEnd({ startedAt, rate: null, maxRuntime: job.maxRuntime, cloud }, startedAt);
  if (own) return own;
  return typeof admission.expectedEndAt === "number" ? { at: admission.expectedEndAt, method: "recent_runs" } : null;
}

/** A completed run: how long it took, and its --max_train_steps when it had a number of them. */
export interface RecentRun {
  ms: number;
  steps: number | null;
}

/** Completed runs (newest first, at most RECENT_RUNS) by environment and GPU count: see runKey. */
export type RecentRuns = ReadonlyMap<string, readonly RecentRun[]>;

/** A `--max_train_steps` value that counts: a whole number > 0 (or such a numeric string); else null. */
export function trainSteps(raw: unknown): number | null {
  const n = typeof raw === "string" && raw.trim() !== "" ? Number(raw) : raw;
  return typeof n === "number" && Number.isSafeInteger(n) && n > 0 ? n : null;
}

/** The key of RecentRuns for an environment on a number of GPUs (processes). */
export const runKey = (configName: string, numProcesses: number) => `${numProcesses}:${configName}`;

const timeOf = (v: unknown) => (typeof v === "string" ? Date.parse(v) : NaN);

/**
 * RecentRuns from completed local entries' rows (config_name, num_processes, started_at,
 * completed_at, steps: the snapshot's --max_train_steps), newest first as the query orders them:
 * each environment and GPU count keeps its RECENT_RUNS newest runs. A row without both times is skipped.
 *
 * @example
 * recentRuns([{ config_name: "sdxl", num_processes: 2, started_at: "...T10:00:00Z", completed_at: "...T10:30:00Z", steps: 900 }]).get(runKey("sdxl", 2)); // [{ ms: 1_800_000, steps: 900 }]
 */
export function recentRuns(rows: readonly Record<string, unknown>[]): RecentRuns {
  const runs = new Map<string, RecentRun[]>();
  for (const row of rows) {
    if (typeof row.config_name !== "string") continue;
    const ms = timeOf(row.completed_at) - timeOf(row.started_at);
    if (!(ms >= 0)) continue;
    const key = runKey(row.config_name, Number(row.num_processes));
    const list = runs.get(key) ?? [];
    if (list.length < RECENT_RUNS) runs.set(key, [...list, { ms, steps: trainSteps(row.steps) }]);
  }
  return runs;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/**
 * How long a waiting job is expected to run once started: its --max_runtime_minutes
 * ("max_runtime": what its owner allowed, so rather long than short), else from the last
 * RECENT_RUNS completed runs of the same environment on as many GPUs ("recent_runs"; local jobs
 * only, as only their runs are counted), else null. From those runs: its own --max_train_steps
 * times their median time per step when it and they have a number of steps (the time per step is
 * the model's on that hardware, while users change the steps from run to run), else their median
 * run time. Medians, so one run that was stopped early or hung does not skew it.
 *
 * @example
 * expectedDuration({ jobType: "local", configName: "sdxl", numProcesses: 2, maxRuntime: 30 }, new Map()); // { ms: 1_800_000, method: "max_runtime" }
 */
export function expectedDuration(job: WaitingFacts, recent: RecentRuns): ExpectedDuration | null {
  const minutes = maxRuntimeMinutes(job.maxRuntime);
  if (minutes !== null) return { ms: minutes * 60_000, method: "max_runtime", basis: maxRuntimeBasis(minutes) };
  if (job.jobType !== "local" || job.configName === null) return null;
  const runs = recent.get(runKey(job.configName, job.numProcesses));
  if (!runs?.length) return null;
  const steps = trainSteps(job.steps);
  const perStep = runs.flatMap((r) => (r.steps === null ? [] : [r.ms / r.steps]));
  const of = `the last ${runs.length === 1 ? "completed run" : `${runs.length} completed runs`} of ${job.configName} on ${job.numProcesses} GPU(s)`;
  if (steps !== null && perStep.length) {
    const each = median(perStep);
    return {
      ms: steps * each,
      method: "recent_runs",
      basis: `its ${steps} steps × ${(each / 1000).toPrecision(3)} s per step, the ${perStep.length === 1 ? "time" : "median time"} per step of ${of}`,
    };
  }
  return {
    ms: median(runs.map((r) => r.ms)),
    method: "recent_runs",
    basis: `the ${runs.length === 1 ? "run time" : "median run time"} of ${of}`,
  };
}
