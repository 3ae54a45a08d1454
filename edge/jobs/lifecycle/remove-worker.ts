import type { Database } from "../../db/client";
import { notFound } from "../../errors";
import type { Change } from "./effects";
import { interruptedChanges, requeueOrFail } from "./requeue-or-fail";

/**
 * Removes a worker: its running jobs go back to the queue or fail exactly as when a worker goes
 * silent (requeue-or-fail.ts), its unacknowledged commands are dropped, and its row goes, so its
 * token is refused from the next request on. One batch. Audited `worker_removed`.
 *
 * @example
 * const { name, requeued, failed } = await removeWorker(db, 3);
 */
export async function removeWorker(
  db: Database,
  workerId: number,
): Promise<Change & { name: string; requeued: string[]; failed: string[] }> {
  const [gone, released] = await db.$client.batch(
    [
      { sql: "UPDATE workers SET status = 'offline' WHERE id = ? RETURNING name", args: [workerId] },
      requeueOrFail({ workerId, what: "was removed" }, new Date().toISOString()),
      { sql: "DELETE FROM job_commands WHERE worker_id = ? AND acked_at IS NULL", args: [workerId] },
      { sql: "DELETE FROM workers WHERE id = ?", args: [workerId] },
    ],
    "write",
  );
  if (!gone!.rows.length) throw notFound(`Worker ${workerId}`);
  const jobs = interruptedChanges(released!.rows as unknown as Record<string, unknown>[]);
  const name = String(gone!.rows[0]!.name);
  const requeued = jobs.filter((j) => j.to === "pending").map((j) => j.jobId);
  const failed = jobs.filter((j) => j.to === "failed").map((j) => j.jobId);
  return {
    jobs,
    name,
    requeued,
    failed,
    audit: [{ event_type: "worker_removed", target: `worker:${workerId}`, details: { name, requeued, failed } }],
  };
}
