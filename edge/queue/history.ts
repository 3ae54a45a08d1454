import type { Database } from "../db/client";

/** The timestamps of one queue entry that say when it waited (ISO 8601 UTC text, as stored). */
export interface HistoryJob {
  queued_at: string;
  started_at: string | null;
  completed_at: string | null;
}

/** One bucket of the queue's history, ending at `at` (unix seconds). */
export interface HistoryBucket {
  at: number;
  /** Jobs waiting (pending or blocked) at `at`, or now for the bucket still open. */
  depth: number;
  /** Jobs started within the bucket. */
  started: number;
  /** Mean wait (queued to started) of the jobs started within the bucket; null when none started. */
  mean_wait_seconds: number | null;
}

/** Most entries one history reads: a week of a busy queue; beyond it the oldest buckets undercount. */
export const HISTORY_ROW_LIMIT = 50_000;

/**
 * Bucket length for a window: 5 minutes up to 6 hours, else 30 minutes (at most 336 buckets).
 *
 * @example
 * bucketSecondsFor(24); // 1800
 */
export const bucketSecondsFor = (hours: number): number => (hours <= 6 ? 300 : 1800);

/** The index of the first of the ascending `moments` at or after `t` (moments.length when none). */
function firstAtOrAfter(moments: number[], t: number): number {
  let lo = 0;
  let hi = moments.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (moments[mid]! >= t) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

const seconds = (iso: string | null): number | null => (iso === null ? null : Date.parse(iso) / 1000);

/**
 * The queue's depth and waits over the last `hours`, in buckets whose ends are multiples of the
 * bucket length (so a chart does not shift between reloads); the last bucket ends at or after
 * `now`, and its depth is the depth now. A job waits from queued_at until it starts or ends.
 * A retried job's started_at is cleared when it is requeued, so its earlier run counts as waiting:
 * the history is what the entries still say, not a log.
 *
 * @example
 * queueHistory([{ queued_at: "2026-01-01T00:00:00Z", started_at: null, completed_at: null }], { hours: 1, now: Date.parse("2026-01-01T00:30:00Z") / 1000 });
 */
export function queueHistory(jobs: HistoryJob[], { hours, now }: { hours: number; now: number }): HistoryBucket[] {
  const size = bucketSecondsFor(hours);
  const count = Math.ceil((hours * 3600) / size);
  const lastEnd = Math.ceil(now / size) * size;
  const firstEnd = lastEnd - (count - 1) * size;
  const buckets: HistoryBucket[] = [];
  for (let i = 0; i < count; i++) buckets.push({ at: firstEnd + i * size, depth: 0, started: 0, mean_wait_seconds: null });
  const moments = buckets.map((b) => Math.min(b.at, now));
  // Depth by differences: +1 at the first moment a job waits, -1 at the first it no longer does.
  const changes = new Array<number>(count + 1).fill(0);
  const waitSums = new Array<number>(count).fill(0);

  for (const job of jobs) {
    const queued = seconds(job.queued_at)!;
    const started = seconds(job.started_at);
    const completed = seconds(job.completed_at);
    const waitEnd = Math.min(started ?? Infinity, completed ?? Infinity);
    const from = firstAtOrAfter(moments, queued);
    const to = firstAtOrAfter(moments, waitEnd);
    if (from < to) {
      changes[from]!++;
      changes[to]!--;
    }
    if (started !== null) {
      // Bucket i covers (end - size, end].
      const index = Math.ceil((started - firstEnd) / size);
      if (index >= 0 && index < count) {
        buckets[index]!.started++;
        waitSums[index]! += Math.max(0, started - queued);
      }
    }
  }
  let depth = 0;
  buckets.forEach((bucket, i) => {
    depth += changes[i]!;
    bucket.depth = depth;
    if (bucket.started) bucket.mean_wait_seconds = Math.round((waitSums[i]! / bucket.started) * 10) / 10;
  });
  return buckets;
}

/**
 * Reads the entries that waited or started within the last `hours` (one bounded query) and
 * answers their history (queueHistory).
 *
 * @example
 * const { buckets } = await readQueueHistory(db, 24);
 */
export async function readQueueHistory(db: Database, hours: number, now = Date.now() / 1000) {
  const size = bucketSecondsFor(hours);
  const from = new Date((Math.ceil(now / size) * size - Math.ceil((hours * 3600) / size) * size) * 1000).toISOString();
  const result = await db.$client.execute({
    sql: `SELECT queued_at, started_at, completed_at FROM queue_entries
          WHERE (started_at IS NULL OR started_at > ?1) AND (completed_at IS NULL OR completed_at > ?1)
          ORDER BY id DESC LIMIT ?2`,
    args: [from, HISTORY_ROW_LIMIT],
  });
  const jobs = result.rows.map((r) => ({
    queued_at: String(r.queued_at),
    started_at: r.started_at === null ? null : String(r.started_at),
    completed_at: r.completed_at === null ? null : String(r.completed_at),
  }));
  return { hours, bucket_seconds: size, buckets: queueHistory(jobs, { hours, now }), truncated: jobs.length === HISTORY_ROW_LIMIT };
}
