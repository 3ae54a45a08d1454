import type { z } from "@hono/zod-openapi";
import type { JobFinish, JobFinished } from "../../../shared/schemas/workers";
import { plainText } from "../../../shared/terminal-text";
import type { Database } from "../../db/client";
import { ApiError } from "../../errors";
import type { Change } from "./effects";
import { explainLostWrite } from "./lost-race";
import { interruptedChanges, requeueOrFail } from "./requeue-or-fail";

/** What the job is now: pending when an interrupted job went back to the queue. */
type Outcome = z.infer<typeof JobFinished>["status"];

/**
 * A runner reports that a job it ran has ended: completed, failed (error_message: why, and the
 * trainer's last lines), or interrupted (the trainer died with its runner: retry or fail, see
 * requeue-or-fail.ts). Only a running job of this worker changes; its GPUs are freed with it,
 * since allocations live on running entries, and the worker is IDLE again when that was its
 * last job. One batch. The change names no runner to wake: the runner told us. The error and
 * the lines are the trainer's output: stored as plain text (no colour codes, no other controls),
 * since the dashboard and every client show them.
 *
 * @example
 * const change = await finishJob(db, worker.id, "job-1", { status: "completed", exit_code: 0 });
 */
export async function finishJob(
  db: Database,
  workerId: number,
  jobId: string,
  report: z.infer<typeof JobFinish>,
): Promise<Change & { status: Outcome }> {
  const now = new Date().toISOString();
  const tail = plainText((report.last_lines ?? []).slice(-20).join("\n"));
  const why = report.error !== undefined ? plainText(report.error) : `the trainer exited with code ${report.exit_code ?? "unknown"}`;
  const message =
    report.status === "completed" ? null : [why, tail ? `last lines:\n${tail}` : ""].filter(Boolean).join("\n").slice(0, 4000);
  const entryUpdate =
    report.status === "interrupted"
      ? requeueOrFail({ jobId, workerId, why, tail }, now)
      : {
          // A stop a stall asked for (stall_action 'requeue') is not the end: the statement below queues it again.
          sql: `UPDATE queue_entries SET status = ?1, completed_at = ?2, updated_at = ?2, error_message = ?3
                WHERE job_id = ?4 AND worker_id = ?5 AND status = 'running' AND stall_action IS NOT 'requeue'
                RETURNING job_id, status, error_message`,
          args: [report.status, now, message, jobId, workerId],
        };
  const stallRequeue = requeueOrFail({ jobId, workerId, why: "stalled: stopped with a checkpoint", stalled: true }, now);
  const [updated, requeued] = await db.$client.batch(
    [
      entryUpdate,
      stallRequeue,
      // Idle again at once when that was its last job, so the Scheduler can give it the next.
      {
        sql: `UPDATE workers SET status = 'IDLE', idle_since = ?2 WHERE id = ?1 AND status = 'busy'
              AND NOT EXISTS (SELECT 1 FROM queue_entries WHERE worker_id = ?1 AND status = 'running')`,
        args: [workerId, now],
      },
    ],
    "write",
  );
  const stallRows = requeued!.rows as unknown as Record<string, unknown>[];
  if (stallRows.length) {
    const jobs = interruptedChanges(stallRows);
    return { jobs, status: jobs[0]!.to as Outcome };
  }
  const rows = updated!.rows as unknown as Record<string, unknown>[];
  if (!rows.length) {
    const conflict = (status: string) => new ApiError(409, "not_running", `Job ${jobId} is ${status}, not running; nothing was changed`);
    return explainLostWrite(db, jobId, { workerId, conflict });
  }
  const jobs =
    report.status === "interrupted"
      ? interruptedChanges(rows)
      : [{ jobId, from: "running" as const, to: report.status, workerId: null, message }];
  return { jobs, status: jobs[0]!.to as Outcome };
}
