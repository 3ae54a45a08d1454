import type { z } from "@hono/zod-openapi";
import { MAX_BATCH_EVENTS, type EventBatch } from "../../shared/schemas/events";
import type { Database } from "../db/client";
import type { Env } from "../env";
import type { Logger } from "../log";
import { appendEvents } from "./events";
import { hubOf, type HubEvent } from "./hub-types";
import { serviceSeq, watchEvents } from "./stall-watch";

/**
 * Stores events in a job's log (appendEvents, in parts of at most MAX_BATCH_EVENTS: a runner's
 * batch is one part, a cloud job's logs may be more), hands those stored to the job's watchers,
 * then moves the job's step rate and expected end. The one way a job's events are recorded: a
 * runner's batch (`workerId` its worker) and a cloud job's provider logs and notices (`workerId`
 * null) alike.
 * What they say of steps and phases moves the job's stall watch (stall-watch.ts); a new step that
 * ends a stall is told by a `training.stall_cleared` event.
 * Watchers see events as soon as they are stored; a hub that cannot be reached only delays them
 * until the watcher reconnects (the log has them), so that is logged, not thrown.
 *
 * @example
 * await recordEvents({ env, db, log }, null, "cloud-1a2b3c4d5e6f", { attempt: 1, events: [{ seq: 0, event: { type: "log", message: "step 1" } }] });
 */
export async function recordEvents(
  ctx: { env: Env; db: Database; log: Logger },
  workerId: number | null,
  jobId: string,
  batch: z.infer<typeof EventBatch>,
): Promise<{ stored: HubEvent[]; added: number; nextIndex: number; dropped: number }> {
  const result = { stored: [] as HubEvent[], added: 0, nextIndex: 0, dropped: 0 };
  let at = 0;
  do {
    const events = batch.events.slice(at, at + MAX_BATCH_EVENTS);
    const { stored, added, nextIndex, dropped, progressWrite } = await appendEvents(ctx.db, workerId, jobId, {
      attempt: batch.attempt,
      events,
    });
    if (stored.length)
      await hubOf(ctx.env, jobId)
        .publish(jobId, stored)
        .catch((e: unknown) => ctx.log.warning("events hub unreachable", { job_id: jobId, error: String(e) }));
    // The job's step rate and expected end, after the watchers have the events (and before the next part is planned).
    if (progressWrite) await ctx.db.$client.execute(progressWrite);
    result.stored.push(...stored);
    result.added += added;
    result.nextIndex = nextIndex;
    result.dropped += dropped;
    at += MAX_BATCH_EVENTS;
  } while (at < batch.events.length);
  const cleared = await watchEvents(ctx.db, jobId, batch.attempt, result.stored);
  if (cleared) {
    const now = Date.now();
    const event = {
      type: "training.stall_cleared",
      title: `Training resumed at step ${cleared.step}`,
      data: { step: cleared.step, stalled_since: cleared.since },
    };
    await recordEvents(ctx, null, jobId, { attempt: batch.attempt, events: [{ seq: serviceSeq(now), event }] });
  }
  return result;
}
