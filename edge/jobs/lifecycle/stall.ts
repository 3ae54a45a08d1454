import type { StallPolicy, StallRules } from "../../../shared/schemas/queue";
import type { Database } from "../../db/client";
import type { Env } from "../../env";
import type { Logger } from "../../log";
import { getSetting } from "../../settings-store";
import { addCommand } from "../commands";
import { channelOf } from "../objects";
import { recordEvents } from "../record-events";
import { parseWatch, stallOf } from "../stall";
import { serviceSeq } from "../stall-watch";
import type { Change, JobChange } from "./effects";
import { notify, publicUrlOf } from "../../notifications/notify";
import { jobFacts } from "./notify-changes";

/*
 * Marking stalled jobs (issue 30, Build 2), on the Scheduler's beat: every running job the stall
 * rule (edge/jobs/stall.ts) finds quiet is marked (stalled_since), told by a `training.stalled`
 * event (its watchers and webhooks hear it), and its owner's policy, else the service's, applies:
 * notify does nothing more; stop_and_requeue asks its trainer to save a checkpoint and stop (the
 * `stop` command) and marks the job so that the stop's end queues it again (finish.ts);
 * fail ends it failed (its runner is woken to end the trainer). Its owner hears of it
 * (job.stalled, edge/notifications/notify.ts) if they asked to, whatever the policy.
 */

const STALLED = `UPDATE queue_entries SET stalled_since = ?1,
                   stall_action = CASE WHEN ?5 = 'stop_and_requeue' THEN 'requeue' ELSE stall_action END
                 WHERE job_id = ?2 AND status = 'running' AND attempt = ?3 AND stalled_since IS NULL AND stall_watch IS ?4
                 RETURNING job_id`;

const FAILED = `UPDATE queue_entries SET status = 'failed', completed_at = ?1, updated_at = ?1, error_message = ?2
                WHERE job_id = ?3 AND status = 'running' AND attempt = ?4 AND stalled_since IS NOT NULL
                RETURNING worker_id, error_message`;

const minutes = (ms: number) => (ms >= 120_000 ? `${Math.round(ms / 60_000)} min` : `${Math.round(ms / 1000)} s`);

/**
 * Marks the running jobs the stall rule finds stalled at `now` and applies their policies;
 * returns the change of the jobs a policy failed. `watchingSince`: when the caller (the
 * Scheduler) started, so time it was down never counts.
 *
 * @example
 * const failed = await markStalledJobs({ env, db, log }, new Date(), startedAt);
 */
export async function markStalledJobs(ctx: { env: Env; db: Database; log: Logger }, now: Date, watchingSince: number): Promise<Change> {
  const { db, log } = ctx;
  const rows = await db.$client.execute(
    `SELECT q.job_id, q.attempt, q.stall_watch, u.stall_policy FROM queue_entries q LEFT JOIN users u ON u.id = q.user_id
     WHERE q.status = 'running' AND q.stalled_since IS NULL AND q.stall_watch IS NOT NULL`,
  );
  if (!rows.rows.length) return { jobs: [] };
  const rules = await getSetting(db, "stall_detection");
  const jobs: JobChange[] = [];
  for (const row of rows.rows) {
    const watch = parseWatch(row.stall_watch);
    if (!watch) continue;
    const verdict = stallOf(watch, rules, now.getTime(), watchingSince);
    if (!verdict.stalled) continue;
    const jobId = String(row.job_id);
    const attempt = Number(row.attempt);
    const policy = policyOf(row.stall_policy, rules);
    const since = new Date(verdict.quietSince).toISOString();
    const marked = await db.$client.execute({ sql: STALLED, args: [since, jobId, attempt, String(row.stall_watch), policy] });
    if (!marked.rows.length) continue;
    const thresholdSeconds = Math.round(verdict.thresholdMs / 1000);
    log.warning("job stalled: no training step", { job_id: jobId, since, last_step: watch.step, threshold_s: thresholdSeconds, policy });
    const event = {
      type: "training.stalled",
      title: `No training step for ${minutes(now.getTime() - verdict.quietSince)} after step ${watch.step} (threshold ${minutes(verdict.thresholdMs)})`,
      level: "warning",
      data: { since, last_step: watch.step, threshold_seconds: thresholdSeconds, policy },
    };
    await recordEvents(ctx, null, jobId, { attempt, events: [{ seq: serviceSeq(now.getTime()), event }] });
    const job = await jobFacts(db, jobId).catch(() => null);
    if (job)
      await notify(
        // The first attempt is not awaited: the pass goes on; a failed one is retried on the beat.
        { db, env: ctx.env, log, publicUrl: publicUrlOf(ctx.env), waitUntil: (work) => void work },
        "job.stalled",
        { userId: job.userId, jobId },
        { ...job.facts, error: null, reason: event.title, stalled_since: since, last_step: watch.step, policy },
      );
    if (policy === "stop_and_requeue") {
      const asked = await addCommand(db, jobId, "stop", { requestedBy: null, ownerId: null }).catch((error: unknown) => {
        log.warning("could not ask a stalled job's trainer to stop", { job_id: jobId, error: String(error) });
        return null;
      });
      if (asked)
        await channelOf(ctx.env, asked.workerId)
          .notify()
          .catch((error: unknown) => log.warning("could not wake a runner", { worker_id: asked.workerId, error: String(error) }));
    }
    if (policy === "fail") {
      const message = `Stalled: no training step since ${since} (step ${watch.step}; threshold ${minutes(verdict.thresholdMs)})`;
      const failed = await db.$client.execute({ sql: FAILED, args: [now.toISOString(), message, jobId, attempt] });
      const f = failed.rows[0];
      if (f) jobs.push({ jobId, from: "running", to: "failed", workerId: f.worker_id === null ? null : Number(f.worker_id), message });
    }
  }
  return { jobs };
}

/** The policy for a job: its owner's own, else the service's default. */
export function policyOf(own: unknown, rules: StallRules): StallPolicy {
  return own === "notify" || own === "stop_and_requeue" || own === "fail" ? own : rules.policy;
}
