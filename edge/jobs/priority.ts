/*
 * A waiting job's priority: the order every Scheduler pass considers jobs in, and
 * the figure the queue's listing shows.
 */

/** Priority added per full `starvation_threshold_minutes` waited, up to the cap. */
export const STARVATION_BOOST_PER_THRESHOLD = 10;
/** At most one level's worth from viewer to admin: a long-waiting job ties the top and, older, wins. */
export const STARVATION_BOOST_CAP = 30;

/**
 * The priority a job is scheduled by at `now`: its override, else its owner's priority, plus the
 * starvation boost for each full `thresholdMinutes` it has waited (none when 0).
 *
 * @example
 * effectivePriority({ priority: 10, priorityOverride: null, queuedAt: Date.now() - 3_600_000 }, Date.now(), 30); // 30
 */
export function effectivePriority(
  job: { priority: number; priorityOverride: number | null; queuedAt: number },
  now: number,
  thresholdMinutes: number,
): number {
  const base = job.priorityOverride ?? job.priority;
  if (thresholdMinutes <= 0) return base;
  const thresholds = Math.floor((now - job.queuedAt) / (thresholdMinutes * 60_000));
  return base + Math.min(STARVATION_BOOST_CAP, Math.max(0, thresholds) * STARVATION_BOOST_PER_THRESHOLD);
}
