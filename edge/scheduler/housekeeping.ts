import { cloudJobOf } from "../jobs/objects";
import { unpolledCloudJobs } from "../cloud/record";
import type { Database } from "../db/client";
import type { Env } from "../env";
import { forgetOldEvents } from "../jobs/event-retention";
import type { Logger } from "../log";
import { forgetOldWebhooks } from "../cloud/webhook-intake";
import { getSetting } from "../settings-store";
import { abortEndedUploads } from "../storage/sweep";
import { forgetOldHealth } from "../workers/gpu-health";
import { forgetOldKeys } from "../queue/idempotency-keys";
import { sendDue } from "../notifications/deliveries";

/*
 * What the Scheduler's alarm does besides its pass: nothing here hands out capacity, it only
 * keeps the database and the cloud jobs in order on the same beat (5 s; SCHEDULER_PASS_SECONDS).
 */

/**
 * What must not pile up: uploads that ended jobs left open, provider webhooks, ended jobs'
 * events past retention, GPU health samples and idempotency keys past 24 h; and what must not be
 * forgotten: a running cloud job not polled for three poll intervals (its object's alarm lost) is
 * handed back to its object, and notification deliveries due for a retry are sent
 * (edge/notifications/deliveries.ts). A failure is logged; the next alarm tries again.
 *
 * @example
 * await sweepLeftovers(env, db, log);
 */
export async function sweepLeftovers(env: Env, db: Database, log: Logger): Promise<void> {
  const pokeCloudJobs = async () => {
    const interval = (await getSetting(db, "cloud")).poll_interval_seconds;
    for (const jobId of await unpolledCloudJobs(db, Math.max(30, 3 * interval))) await cloudJobOf(env, jobId).poke(jobId);
  };
  await Promise.all([
    abortEndedUploads(db, env.STORAGE),
    forgetOldWebhooks(db),
    forgetOldEvents(db),
    forgetOldHealth(db),
    forgetOldKeys(db),
    pokeCloudJobs(),
    sendDue(env, db),
  ]).catch((error: unknown) => log.warning("sweep failed", { error: String(error) }));
}
