import type { Database } from "../../db/client";
import type { Change } from "./effects";
import { interruptedChanges, requeueOrFail } from "./requeue-or-fail";

/**
 * Takes workers silent past the heartbeat timeout offline, and sends the running jobs of every
 * offline worker through the retry-or-fail rule (requeue-or-fail.ts). One batch. Run by the
 * Scheduler at the start of each pass; returns the workers it took offline with the change.
 *
 * A worker's silence is counted from the later of its last heartbeat and `upSince`, when the edge
 * (the Scheduler) started: while the edge was down nobody could reach it, so an outage longer than
 * the timeout takes no healthy worker offline, and its jobs are not run a second time.
 *
 * @example
 * const swept = await sweepSilentWorkers(db, 90, new Date(), startedAt);
 */
export async function sweepSilentWorkers(
  db: Database,
  timeoutSeconds: number,
  now: Date,
  upSince = 0,
): Promise<Change & { workers: { id: number; name: string }[] }> {
  if (now.getTime() - upSince < timeoutSeconds * 1000) return { workers: [], jobs: [] };
  const cutoff = new Date(now.getTime() - timeoutSeconds * 1000).toISOString();
  const [gone, jobs] = await db.$client.batch(
    [
      {
        sql: `UPDATE workers SET status = 'offline' WHERE status IN ('IDLE', 'busy', 'draining') AND last_heartbeat < ? RETURNING id, name`,
        args: [cutoff],
      },
      requeueOrFail({ offlineWorkers: true, what: "went offline" }, now.toISOString()),
    ],
    "write",
  );
  return {
    workers: gone!.rows.map((r) => ({ id: Number(r.id), name: String(r.name) })),
    jobs: interruptedChanges(jobs!.rows as unknown as Record<string, unknown>[]),
  };
}
