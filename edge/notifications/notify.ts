import type { Database } from "../db/client";
import type { Logger } from "../log";
import { ADMIN_NOTIFICATION_KINDS, type NotificationKind } from "../../shared/notification-kinds";
import { createApprovalLink } from "./approval-link";
import { queueDeliveries, sendDue, type DeliveryEnv, type QueuedDelivery } from "./deliveries";
import { renderMessage, type Facts } from "./message";
import { readPreferences } from "./preferences";

/*
 * The one entry every feature calls to tell people something: `notify(ctx, kind, subject, facts)`.
 * Who hears of it follows from the kind: approval.needed and gpu.quarantined go to every admin,
 * the rest to the subject's user (the job's owner). Each recipient's preferences choose whether
 * they want the kind and on which channels; each message on each channel is a delivery row
 * (./deliveries.ts), tried at once and retried with backoff.
 *
 * Who sends which: job.started, job.completed, job.failed, approval.needed and approval.decided
 * (edge/jobs/lifecycle/notify-changes.ts, from a job's change); job.stalled (the stall marking,
 * edge/jobs/lifecycle/stall.ts); budget.warning and budget.exceeded (edge/spend/budget-notices.ts,
 * on the Scheduler's beat and at submission); gpu.quarantined (edge/workers/gpu-health.ts, from
 * the heartbeat that quarantines).
 */

export interface NotifyContext {
  db: Database;
  env: DeliveryEnv;
  log: Logger;
  /** The service's public URL, for links in messages (SERVICE_PUBLIC_URL); without it links are paths. */
  publicUrl?: URL;
  /** Defers the first attempt past the caller (ctx.waitUntil); without it, it is awaited. */
  waitUntil?: (work: Promise<unknown>) => void;
}

/** The service's public URL (SERVICE_PUBLIC_URL) for links in messages; undefined when unset or not a URL. */
export const publicUrlOf = (env: { SERVICE_PUBLIC_URL?: string }): URL | undefined => {
  try {
    return env.SERVICE_PUBLIC_URL ? new URL(env.SERVICE_PUBLIC_URL) : undefined;
  } catch {
    return undefined;
  }
};

/** What a notification is about: the user it concerns (a job's owner) and the job, if any. */
export interface Subject {
  userId: number | null;
  jobId?: string;
}

async function adminIds(db: Database): Promise<number[]> {
  const { rows } = await db.$client.execute(
    "SELECT DISTINCT u.id FROM users u JOIN user_levels l ON l.user_id = u.id WHERE l.level = 'admin' AND u.disabled_at IS NULL",
  );
  return rows.map((r) => Number(r.id));
}

/**
 * Queues a notification of `kind` for everyone who should hear of it and wants it, and makes the
 * first attempt. Never throws: a notification that cannot be queued is logged.
 *
 * @example
 * await notify(ctx, "job.completed", { userId: 7, jobId: "local-1a2b" }, { job_id: "local-1a2b", status: "completed" });
 */
export async function notify(ctx: NotifyContext, kind: NotificationKind, subject: Subject, facts: Facts): Promise<void> {
  const { db } = ctx;
  try {
    const eventAt = new Date();
    const recipients = ADMIN_NOTIFICATION_KINDS.includes(kind) ? await adminIds(db) : subject.userId === null ? [] : [subject.userId];
    const queued: QueuedDelivery[] = [];
    for (const userId of recipients) {
      const preferences = await readPreferences(db, userId);
      if (!preferences.kinds.includes(kind)) continue;
      const { webhook, slack, email } = preferences.channels;
      if (!webhook && !slack && !email) continue;
      let own = facts;
      if (kind === "approval.needed" && subject.jobId) {
        const token = await createApprovalLink(db, subject.jobId, userId, eventAt);
        const path = `/api/notifications/approval/${token}`;
        own = { ...facts, approval_url: ctx.publicUrl ? new URL(path, ctx.publicUrl).toString() : path };
      }
      const message = renderMessage(kind, own, eventAt);
      const base = { userId, kind, subject: message.subject, eventAt: eventAt.toISOString() };
      if (webhook) queued.push({ ...base, channel: "webhook", target: webhook.url, message: JSON.stringify(message.webhook) });
      if (slack) queued.push({ ...base, channel: "slack", target: slack.url, message: JSON.stringify(message.slack) });
      if (email)
        queued.push({
          ...base,
          channel: "email",
          target: email.address,
          message: JSON.stringify({ to: email.address, subject: message.subject, text: message.text, html: message.html }),
        });
    }
    const ids = await queueDeliveries(db, queued);
    const first = sendDue(ctx.env, db, ids).catch((error: unknown) =>
      ctx.log.warning("could not send notifications", { kind, error: String(error) }),
    );
    if (ctx.waitUntil) ctx.waitUntil(first);
    else await first;
  } catch (error) {
    ctx.log.warning("could not queue a notification", { kind, error: String(error) });
  }
}
