import type { Database } from "../db/client";
import type { ServiceBinding } from "../env";
import { getSetting, type SmtpConfig } from "../settings-store";
import { refusedHost } from "../webhooks/targets";
import { RETRY_DELAYS_SECONDS, sendWebhook, type SendResult } from "../webhooks/delivery";
import type { NotificationChannel, NotificationDelivery } from "../../shared/schemas/notifications";
import type { MailMessage } from "./smtp";

/*
 * Every notification message on every channel is a row of notification_deliveries, written
 * before it is sent: the first attempt follows at once, and what fails for a reason that may
 * pass (a timeout, a 5xx, an SMTP 4xx) is tried again after RETRY_DELAYS_SECONDS (the job
 * webhooks' backoff) by the Scheduler's alarm (edge/scheduler/housekeeping.ts), which survives
 * a restart because the rows do. A sender takes rows with a lease (a conditional UPDATE), so the
 * first attempt and the alarm never send the same row twice at once; a sender that died leaves a
 * lease that runs out.
 */

/** How long a sender holds the rows it took (ms): longer than the slowest attempt (SMTP's 15 s). */
const LEASE_MS = 60_000;
/** The most rows one sweep sends. */
const SWEEP_BATCH = 20;

export interface QueuedDelivery {
  userId: number;
  kind: string;
  subject: string;
  channel: NotificationChannel;
  target: string;
  /** The webhook or Slack body as sent, or the e-mail as MailMessage JSON. */
  message: string;
  eventAt: string;
}

/** What sending needs from the Worker: the local host's guarded fetcher (absent when deployed). */
export interface DeliveryEnv {
  WEBHOOK_OUTBOUND?: ServiceBinding;
}

/** Stores deliveries as pending, due now; returns their ids. */
export async function queueDeliveries(db: Database, queued: QueuedDelivery[]): Promise<number[]> {
  if (!queued.length) return [];
  const now = new Date();
  const results = await db.$client.batch(
    queued.map((d) => ({
      sql: `INSERT INTO notification_deliveries (user_id, kind, subject, channel, target, message, next_at, event_at, created_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
      args: [d.userId, d.kind, d.subject, d.channel, d.target, d.message, now.getTime(), d.eventAt, now.toISOString()],
    })),
    "write",
  );
  return results.map((r) => Number(r.rows[0]!.id));
}

/**
 * Sends the pending deliveries that are due: `ids` only (a notification's first attempt), or the
 * oldest due ones (the alarm's sweep). Returns how many were attempted.
 *
 * @example
 * await sendDue(env, db); // the sweep
 */
export async function sendDue(env: DeliveryEnv, db: Database, ids?: number[]): Promise<number> {
  if (ids && !ids.length) return 0;
  const now = Date.now();
  const only = ids ? `AND id IN (${ids.map(() => "?").join(", ")})` : "";
  const { rows } = await db.$client.execute({
    sql: `UPDATE notification_deliveries SET lease_until = ?
          WHERE id IN (SELECT id FROM notification_deliveries
                       WHERE status = 'pending' AND next_at <= ? AND (lease_until IS NULL OR lease_until < ?) ${only}
                       ORDER BY id LIMIT ?)
          RETURNING id, user_id, channel, target, message, attempts`,
    args: [now + LEASE_MS, now, now, ...(ids ?? []), ids ? ids.length : SWEEP_BATCH],
  });
  if (!rows.length) return 0;
  const [{ allow_private_targets }, smtp] = await Promise.all([getSetting(db, "webhooks"), getSetting(db, "smtp")]);
  await Promise.all(
    rows.map(async (row) => {
      const channel = String(row.channel) as NotificationChannel;
      const id = Number(row.id);
      let result: SendResult;
      if (channel === "email") result = await sendEmail(smtp, JSON.parse(String(row.message)) as MailMessage, allow_private_targets);
      else {
        const secret = channel === "webhook" ? await webhookSecret(db, Number(row.user_id)) : SLACK_UNUSED_SECRET;
        result = await sendWebhook(
          String(row.target),
          `ntf_${id}`,
          String(row.message),
          secret,
          allow_private_targets,
          env.WEBHOOK_OUTBOUND,
        );
      }
      await recordAttempt(db, id, Number(row.attempts) + 1, result);
    }),
  );
  return rows.length;
}

async function webhookSecret(db: Database, userId: number): Promise<string> {
  const { rows } = await db.$client.execute({
    sql: "SELECT webhook_secret FROM notification_preferences WHERE user_id = ?",
    args: [userId],
  });
  return String(rows[0]?.webhook_secret ?? "");
}

// Slack's incoming webhooks are authenticated by their secret URL and ignore the signature
// headers; the body is still signed (with a throwaway key) so one sender serves both channels.
const SLACK_UNUSED_SECRET = `whsec_${btoa("slack-incoming-webhook-unused")}`;

/** Sends one e-mail through the SMTP settings; the same outcome shape as a webhook's. */
export async function sendEmail(smtp: SmtpConfig, mail: MailMessage, allowPrivate: boolean): Promise<SendResult> {
  if (!smtp.host || !smtp.from)
    return { ok: false, retry: false, error: "refused: e-mail is not set up (PUT /api/admin/notifications/smtp)" };
  const refused = allowPrivate ? null : refusedHost(smtp.host);
  if (refused) return { ok: false, retry: false, error: `refused: ${refused}` };
  // Loaded when mail is sent: cloudflare:sockets exists only in the Worker runtime, and Node code
  // (the route inventory tests) imports this module.
  const { sendMail, SmtpError } = await import("./smtp");
  try {
    await sendMail(smtp, mail);
    return { ok: true, status: 250 };
  } catch (error) {
    const permanent = error instanceof SmtpError && error.permanent;
    return { ok: false, retry: !permanent, error: (error as Error).message };
  }
}

async function recordAttempt(db: Database, id: number, attempts: number, result: SendResult): Promise<void> {
  const now = new Date();
  if (result.ok) {
    await db.$client.execute({
      sql: "UPDATE notification_deliveries SET status = 'delivered', attempts = ?, delivered_at = ?, lease_until = NULL WHERE id = ?",
      args: [attempts, now.toISOString(), id],
    });
  } else if (result.retry && attempts <= RETRY_DELAYS_SECONDS.length) {
    await db.$client.execute({
      sql: "UPDATE notification_deliveries SET attempts = ?, last_error = ?, next_at = ?, lease_until = NULL WHERE id = ?",
      args: [attempts, result.error, now.getTime() + RETRY_DELAYS_SECONDS[attempts - 1]! * 1000, id],
    });
  } else {
    await db.$client.execute({
      sql: "UPDATE notification_deliveries SET status = ?, attempts = ?, last_error = ?, lease_until = NULL WHERE id = ?",
      args: [result.error.startsWith("refused:") ? "refused" : "failed", attempts, result.error, id],
    });
  }
}

/** One user's deliveries, newest first. */
export async function listDeliveries(db: Database, userId: number, limit: number, kind?: string): Promise<NotificationDelivery[]> {
  const { rows } = await db.$client.execute({
    sql: `SELECT id, kind, subject, channel, target, status, attempts, last_error, event_at, created_at, next_at, delivered_at
          FROM notification_deliveries WHERE user_id = ? ${kind ? "AND kind = ?" : ""} ORDER BY id DESC LIMIT ?`,
    args: [userId, ...(kind ? [kind] : []), limit],
  });
  return rows.map((r) => ({
    id: Number(r.id),
    kind: String(r.kind),
    subject: String(r.subject),
    channel: String(r.channel) as NotificationChannel,
    target: String(r.target),
    status: String(r.status) as NotificationDelivery["status"],
    attempts: Number(r.attempts),
    last_error: r.last_error === null ? null : String(r.last_error),
    event_at: String(r.event_at),
    created_at: String(r.created_at),
    next_attempt_at: r.status === "pending" ? new Date(Number(r.next_at)).toISOString() : null,
    delivered_at: r.delivered_at === null ? null : String(r.delivered_at),
  }));
}
