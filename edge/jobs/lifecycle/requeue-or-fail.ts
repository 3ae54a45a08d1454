import type { InStatement } from "@libsql/client/web";
import type { JobChange } from "./effects";

/*
 * THE "retry or fail" rule: a running job whose trainer
 * died with its runner goes back to pending with attempt + 1, its GPUs and worker freed (the
 * allocations live on running entries), or fails once it has had max_attempts. Used by a runner's
 * `interrupted` report (finish.ts), the offline sweep (sweep-offline.ts), worker removal
 * (remove-worker.ts) and a GPU's quarantine (edge/workers/gpu-health.ts). One statement either way, so a job cannot be retried and failed at once.
 * A retried job's expected end and step rate go with its attempt: the next one starts afresh.
 */

/** Which running jobs were interrupted, and why (the start of their error_message). */
export type Interruption =
  /**
   * A runner reported it: `why` is its own words, `tail` the trainer's last lines (appended).
   * `stalled`: only if a stall asked its trainer to stop (stall_action 'requeue', lifecycle/stall.ts).
   */
  | { jobId: string; workerId: number; why: string; tail?: string; stalled?: true }
  /** The jobs of one worker that is going away. */
  | { workerId: number; what: "was removed" }
  /** The jobs of one worker on these GPUs (a job without devices - a remote worker's - holds them all). */
  | { workerId: number; gpus: number[]; what: string }
  /** The jobs of every offline worker. */
  | { offlineWorkers: true; what: "went offline" };

const RETRY = "attempt < max_attempts";

/**
 * The statement that applies the rule; RETURNING rows for `interruptedChanges`. Put it in the
 * batch that takes the worker away, so the jobs follow in the same transaction.
 *
 * @example
 * const [gone, jobs] = await db.$client.batch([takeOffline, requeueOrFail({ offlineWorkers: true, what: "went offline" }, now)], "write");
 */
export function requeueOrFail(interruption: Interruption, now: string): InStatement {
  // ?1 now, ?2 why (or what happened to the worker), ?3 the tail; the scope's own from ?4 on.
  const [scope, scopeArgs]: [string, (string | number)[]] =
    "jobId" in interruption
      ? [
          `job_id = ?4 AND worker_id = ?5${interruption.stalled ? " AND stall_action = 'requeue'" : ""}`,
          [interruption.jobId, interruption.workerId],
        ]
      : "offlineWorkers" in interruption
        ? ["worker_id IN (SELECT id FROM workers WHERE status = 'offline')", []]
        : "gpus" in interruption
          ? [
              `worker_id = ?4 AND (allocated_gpus IS NULL OR EXISTS (SELECT 1 FROM json_each(queue_entries.allocated_gpus) g
                 WHERE g.value IN (SELECT value FROM json_each(?5))))`,
              [interruption.workerId, JSON.stringify(interruption.gpus)],
            ]
          : ["worker_id = ?4", [interruption.workerId]];
  const workerName = "COALESCE((SELECT name FROM workers w WHERE w.id = queue_entries.worker_id), '?')";
  const why = "why" in interruption ? "?2" : `'worker ' || ${workerName} || ' ' || ?2 || ' during attempt ' || attempt`;
  const outcome = `CASE WHEN ${RETRY} THEN '; retrying (attempt ' || (attempt + 1) || ' of ' || max_attempts || ')' ELSE '; no retries left' END`;
  const tail = "tail" in interruption && interruption.tail ? `\nlast lines:\n${interruption.tail}` : "";
  return {
    // Every right-hand side reads the row as it was before this UPDATE (SQL semantics).
    sql: `UPDATE queue_entries SET
            status = CASE WHEN ${RETRY} THEN 'pending' ELSE 'failed' END,
            error_message = substr(${why} || ${outcome} || ?3, 1, 4000),
            completed_at = CASE WHEN ${RETRY} THEN NULL ELSE ?1 END,
            started_at = CASE WHEN ${RETRY} THEN NULL ELSE started_at END,
            allocated_gpus = CASE WHEN ${RETRY} THEN NULL ELSE allocated_gpus END,
            worker_id = CASE WHEN ${RETRY} THEN NULL ELSE worker_id END,
            attempt = CASE WHEN ${RETRY} THEN attempt + 1 ELSE attempt END,
            expected_end_at = CASE WHEN ${RETRY} THEN NULL ELSE expected_end_at END,
            expected_end_method = CASE WHEN ${RETRY} THEN NULL ELSE expected_end_method END,
            progress_rate = CASE WHEN ${RETRY} THEN NULL ELSE progress_rate END,
            stall_watch = CASE WHEN ${RETRY} THEN NULL ELSE stall_watch END,
            stalled_since = CASE WHEN ${RETRY} THEN NULL ELSE stalled_since END,
            stall_action = NULL,
            updated_at = ?1
          WHERE status = 'running' AND ${scope}
          RETURNING job_id, status, attempt, max_attempts, error_message`,
    args: [now, "why" in interruption ? interruption.why : interruption.what, tail, ...scopeArgs],
  };
}

/** The changes an executed `requeueOrFail` made, from its RETURNING rows. */
export function interruptedChanges(rows: Record<string, unknown>[]): JobChange[] {
  return rows.map((r) => ({
    jobId: String(r.job_id),
    from: "running" as const,
    to: r.status === "pending" ? ("pending" as const) : ("failed" as const),
    // Its runner is gone, or reported the job itself: no runner needs waking.
    workerId: null,
    message: r.error_message === null ? null : String(r.error_message),
    attempt: Number(r.attempt),
    maxAttempts: Number(r.max_attempts),
  }));
}
