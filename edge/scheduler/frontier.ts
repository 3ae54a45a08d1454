import { effectivePriority, STARVATION_BOOST_CAP, STARVATION_BOOST_PER_THRESHOLD } from "../jobs/priority";
import type { PendingJob, PlanInput, Waiting } from "./plan";
import type { ActiveEntry } from "./store";

/*
 * What a submission group needs of the last full plan to decide its new jobs without planning
 * the whole queue again (a deep queue's plan costs a sort of every waiting job).
 *
 * In a plan, a waiting job acts on the jobs behind it only by the capacity it takes (admitted) or
 * holds (a reservation). Between two full plans, as long as nothing frees capacity (no job ends,
 * limits, workers, paused state, running jobs' expected ends and the cloud spending committed all
 * as they were: `signature`) and only submissions change the queue, a job the full plan kept
 * waiting for a limit or for busy capacity stays waiting: the counts it waited on only grew. So
 * the new jobs are decided by a plan over themselves, what runs, and the "movers": the waiting
 * jobs that hold a reservation or were kept from free capacity by one (reservations are planned
 * again, so they may move), and those whose starvation boost changes before the frontier expires
 * (FRONTIER_MS), which may reserve or move ahead. Their places in the whole queue come from the full
 * plan's order (binary search) and the new jobs stored since.
 */

/** How long a full plan serves submission groups; the timer pass (5 s) makes a new one first. */
export const FRONTIER_MS = 10_000;

/** A waiting job's place in the scheduling order: effective priority (highest first), queued, id. */
export interface OrderKey {
  priority: number;
  queuedAt: number;
  id: number;
}

/** Negative when `a` comes before `b` in the scheduling order. */
export const compareKeys = (a: OrderKey, b: OrderKey) => b.priority - a.priority || a.queuedAt - b.queuedAt || a.id - b.id;

/** How many of `sorted` (in scheduling order) come before `key`. */
export function countBefore(sorted: readonly OrderKey[], key: OrderKey): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareKeys(sorted[mid]!, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class Frontier {
  /** New jobs stored waiting since the full plan, in scheduling order. */
  private readonly since: OrderKey[] = [];

  private constructor(
    /** When the full plan ran (epoch ms). */
    readonly at: number,
    /** What the plan's capacity was (capacitySignature). */
    readonly signature: string,
    /** The entries' generation it was made at (ActiveEntries.generation). */
    readonly generation: number,
    /** Ids of the waiting jobs a group must plan again (see above). */
    readonly movers: ReadonlySet<number>,
    /** Ids of the running jobs, and of the new jobs started since. */
    readonly running: Set<number>,
    /** The full plan's waiting jobs, in its order, as keys once made (`order`). */
    private made: OrderKey[] | { waiting: Waiting[]; pending: PendingJob[]; now: number },
  ) {}

  /**
   * From a full plan: its input, its waiting jobs (less any rejected), the ids of what runs once
   * its admissions are written, and `stored`, each plan id's stored id (new jobs had placeholders).
   *
   * @example
   * const frontier = Frontier.of(input, sorted.waiting, runningIds, signature, active.generation, (id) => realIds.get(id) ?? id);
   */
  static of(
    input: PlanInput,
    waiting: Waiting[],
    running: Iterable<number>,
    signature: string,
    generation: number,
    stored: (id: number) => number | undefined,
  ): Frontier {
    const threshold = input.limits.starvation_threshold_minutes * 60_000;
    const movers = new Set<number>();
    const mover = (id: number) => {
      const real = stored(id);
      if (real !== undefined) movers.add(real);
    };
    for (const w of waiting) if (w.expectedStartAt !== undefined || w.reason === "reserved") mover(w.id);
    if (threshold > 0) {
      // A boost step (the first one starts a job's starvation) due before the frontier expires;
      // a job past its last step (most of a deep, old queue) has none.
      const steps = Math.ceil(STARVATION_BOOST_CAP / STARVATION_BOOST_PER_THRESHOLD);
      const from = input.now - 1_000;
      const until = input.now + FRONTIER_MS;
      for (const j of input.pending) {
        if (j.queuedAt + steps * threshold <= from) continue;
        // The first step after `from`: is it due by `until`?
        const k = Math.max(1, Math.floor((from - j.queuedAt) / threshold) + 1);
        if (k <= steps && j.queuedAt + k * threshold <= until) mover(j.id);
      }
    }
    return new Frontier(input.now, signature, generation, movers, new Set(running), { waiting, pending: input.pending, now: input.now });
  }

  /** The full plan's waiting jobs' keys, in its order: made when a group first needs places. */
  private get order(): OrderKey[] {
    if (Array.isArray(this.made)) return this.made;
    const { waiting, pending, now } = this.made;
    const queued = new Map<number, number>();
    for (const j of pending) queued.set(j.id, j.queuedAt);
    this.made = waiting.map((w) => ({ priority: w.effectivePriority, queuedAt: queued.get(w.id) ?? now, id: w.id }));
    return this.made;
  }

  /** Whether a group at `now`, over capacity `signature` and entries of `generation`, may use it. */
  serves(now: number, signature: string, generation: number): boolean {
    return now - this.at < FRONTIER_MS && now >= this.at && signature === this.signature && generation === this.generation;
  }

  /** Of the kept entries, those a group plans: the movers still waiting and what runs. */
  entries(all: ReadonlyMap<number, ActiveEntry>): Map<number, ActiveEntry> {
    const planned = new Map<number, ActiveEntry>();
    for (const id of this.movers) {
      const e = all.get(id);
      if (e?.status === "pending") planned.set(id, e);
    }
    for (const id of this.running) {
      const e = all.get(id);
      if (e?.status === "running") planned.set(id, e);
    }
    return planned;
  }

  /** The 1-based place in the whole queue of a new job waiting at `key`, `aheadInGroup` new ones of its group before it. */
  positionOf(key: OrderKey, aheadInGroup: number): number {
    return countBefore(this.order, key) + countBefore(this.since, key) + aheadInGroup + 1;
  }

  /** A job's place in the full plan, moved back by the new jobs stored waiting ahead of it since. */
  shifted(position: number): number {
    const key = this.order[position - 1];
    return key ? position + countBefore(this.since, key) : position;
  }

  /** Records a group's new jobs: those started, and those stored waiting with their keys. */
  add(started: number[], waiting: OrderKey[]): void {
    for (const id of started) this.running.add(id);
    for (const key of waiting) this.since.splice(countBefore(this.since, key), 0, key);
  }
}

/** A new job's key at `now` (it has waited nothing yet: no boost). */
export function keyOf(
  job: Pick<PendingJob, "priority" | "priorityOverride" | "queuedAt" | "id">,
  now: number,
  thresholdMinutes: number,
): OrderKey {
  return { priority: effectivePriority(job, now, thresholdMinutes), queuedAt: job.queuedAt, id: job.id };
}
