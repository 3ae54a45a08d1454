import type { Database } from "../../db/client";
import type { Change } from "./effects";
import { interruptedChanges, requeueOrFail } from "./requeue-or-fail";

/**
 * Takes workers silent past the heartbeat timeout offline, and sends the running jobs of every
 * offline worker through the retry-or-fail rule (requeue-or-fail.ts). One batch. Run by the
 * Scheduler at the start of each pass; returns the workers it took offline with the change.
 *
 * @example
 * const swept = await sweepSilentWorkers(db, 90, new Date());
 */
export async function sweepSilentWorkers(
  db: Database,
  timeoutSeconds: number,
  now: Date,
): Promise<Change & { workers: { id: number; name: string }[] }> {
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
