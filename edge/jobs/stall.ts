import type { StallRules } from "../../shared/schemas/queue";

/*
 * THE stall rule (issue 30, Build 2): a running job with no new training step for
 * max(min_seconds, factor x its median time per step), while it is not in a validation or a
 * checkpoint save, is stalled. Pure: the event intake keeps the facts (stall-watch.ts), the
 * Scheduler's housekeeping asks this rule each beat (lifecycle/stall.ts), and the bench
 * (test/bench/stall.ts) asks the same rule on a simulated week.
 */

/** How many recent times per step the median is taken over. */
export const STEP_TIMES_KEPT = 15;

/** What the rule reads of one running attempt (queue_entries.stall_watch, JSON). */
export interface StallWatch {
  /** The last new step, and when the service received it (epoch ms). */
  step: number;
  at: number;
  /** Recent times per step, ms, newest last (at most STEP_TIMES_KEPT). */
  times: number[];
  /** The phase it is in (null: training), and since when (epoch ms); with null, when the last phase ended (0: none yet). */
  phase: "validation" | "checkpoint" | null;
  phaseAt: number;
}

export type StallVerdict =
  | { stalled: false; reason: "in_phase" | "progressing" }
  | {
      stalled: true;
      /** Since when it has been quiet (its last step, a phase's end, or when the detector started; epoch ms). */
      quietSince: number;
      thresholdMs: number;
    };

/** The median of some numbers (null for none). */
export function median(values: number[]): number | null {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * How long a job may go without a step: max(min_seconds, factor x its median time per step).
 *
 * @example
 * stallThresholdMs([2_000, 3_000, 2_500], { min_seconds: 600, factor: 5, policy: "notify" }); // 600_000
 */
export function stallThresholdMs(times: number[], rules: Pick<StallRules, "min_seconds" | "factor">): number {
  return Math.max(rules.min_seconds * 1000, rules.factor * (median(times) ?? 0));
}

/**
 * Whether a job is stalled at `now`. Quiet time counts from the latest of its last step, the end
 * of its last validation or checkpoint, and `watchingSince` (when the detector itself started):
 * while the service was down nobody could hear the job, so an outage is never taken for a stall.
 * In a validation or checkpoint phase it is never stalled.
 *
 * @example
 * stallOf(watch, rules, Date.now(), schedulerStartedAt); // { stalled: true, quietSince, thresholdMs } or { stalled: false, ... }
 */
export function stallOf(
  watch: StallWatch,
  rules: Pick<StallRules, "min_seconds" | "factor">,
  now: number,
  watchingSince = 0,
): StallVerdict {
  if (watch.phase !== null) return { stalled: false, reason: "in_phase" };
  const quietSince = Math.max(watch.at, watch.phaseAt, watchingSince);
  const thresholdMs = stallThresholdMs(watch.times, rules);
  return now - quietSince >= thresholdMs ? { stalled: true, quietSince, thresholdMs } : { stalled: false, reason: "progressing" };
}

/** The phase an event opens or closes, if any: undefined when it says nothing about phases. */
export function phaseOf(type: string): StallWatch["phase"] | undefined {
  switch (type) {
    case "validation.started":
      return "validation";
    case "checkpoint.started":
      return "checkpoint";
    case "validation.completed":
    case "validation.failed":
    case "checkpoint.saved":
    case "checkpoint.failed":
    case "training.progress":
      return null;
    default:
      return undefined;
  }
}

/**
 * The watch after events received at `at`: a new step (higher than the last) moves the step and
 * adds its time per step; phase events open or close a phase. Null before the first step.
 *
 * @example
 * advanceWatch(null, [{ type: "training.progress", step: 1 }], startedAt, Date.now());
 */
export function advanceWatch(
  prev: StallWatch | null,
  events: { type: string; step?: unknown }[],
  startedAt: number,
  at: number,
): StallWatch | null {
  let watch = prev;
  for (const event of events) {
    const step = event.type === "training.progress" && typeof event.step === "number" && Number.isFinite(event.step) ? event.step : null;
    if (step !== null && (watch === null || step > watch.step)) {
      const from = watch ?? { step: 0, at: startedAt };
      const perStep = (at - from.at) / Math.max(1, step - from.step);
      // Steps received together say nothing about speed.
      const times = at > from.at && watch !== null ? [...watch.times, perStep].slice(-STEP_TIMES_KEPT) : (watch?.times ?? []);
      watch = { step, at, times, phase: null, phaseAt: watch?.phase ? at : (watch?.phaseAt ?? 0) };
      continue;
    }
    const phase = phaseOf(event.type);
    if (watch === null || phase === undefined || event.type === "training.progress") continue;
    if (phase !== watch.phase) watch = { ...watch, phase, phaseAt: at };
  }
  return watch;
}

/** A stored watch, or null when absent or not one. */
export function parseWatch(text: unknown): StallWatch | null {
  if (typeof text !== "string") return null;
  try {
    const w = JSON.parse(text) as Partial<StallWatch>;
    const ok =
      typeof w.step === "number" &&
      typeof w.at === "number" &&
      Array.isArray(w.times) &&
      w.times.every((n) => typeof n === "number") &&
      (w.phase === null || w.phase === "validation" || w.phase === "checkpoint") &&
      typeof w.phaseAt === "number";
    return ok ? (w as StallWatch) : null;
  } catch {
    return null;
  }
}
