import type { Database } from "../../db/client";
import { notify, type NotifyContext } from "../../notifications/notify";
import type { Facts } from "../../notifications/message";
import type { NotificationKind } from "../../../shared/schemas/notifications";
import type { WaitInfo } from "../job";
import type { JobChange } from "./effects";

/*
 * Which job changes people hear of (edge/notifications/notify.ts): a job started (admitted to
 * run), completed or failed, to its owner; a job waiting for approval, to the admins; an approval
 * decided (approved: blocked to pending; rejected: blocked to cancelled), to the owner. The facts
 * are the job's as the API has them: name, status, expected end, estimated cost, error, and for a
 * waiting job its queue position and expected start from the Scheduler's latest pass (`waitInfo`,
 * read after the pass the change asked for).
 */

/** The kind a change makes, or null when it makes none. */
export function kindOf(j: JobChange): NotificationKind | null {
  if (j.from === j.to) return null;
  if (j.to === "running") return "job.started";
  if (j.to === "completed" && j.from === "running") return "job.completed";
  if (j.to === "failed") return "job.failed";
  if (j.to === "blocked" && j.from === null) return "approval.needed";
  if (j.from === "blocked" && (j.to === "pending" || j.to === "cancelled")) return "approval.decided";
  return null;
}

/** A job's owner and the facts its messages carry, as the API has them; null when it is gone. */
export async function jobFacts(db: Database, jobId: string): Promise<{ id: number; userId: number; facts: Facts } | null> {
  const { rows } = await db.$client.execute({
    sql: `SELECT q.id, q.user_id, u.username, q.config_name, q.metadata, q.status, q.estimated_cost, q.expected_end_at, q.error_message,
                 a.reason
          FROM queue_entries q JOIN users u ON u.id = q.user_id LEFT JOIN approval_requests a ON a.id = q.approval_id
          WHERE q.job_id = ?`,
    args: [jobId],
  });
  const row = rows[0];
  if (!row) return null;
  const metadata = row.metadata ? (JSON.parse(String(row.metadata)) as Record<string, unknown>) : {};
  const name = typeof metadata.name === "string" ? metadata.name : row.config_name === null ? null : String(row.config_name);
  return {
    id: Number(row.id),
    userId: Number(row.user_id),
    facts: {
      job_id: jobId,
      job_name: name,
      owner: String(row.username),
      status: String(row.status),
      expected_end_at: row.expected_end_at === null ? null : String(row.expected_end_at),
      estimated_cost_usd: row.estimated_cost === null ? null : Number(row.estimated_cost),
      error: row.error_message === null ? null : String(row.error_message),
      reason: row.reason === null ? null : String(row.reason),
    },
  };
}

/**
 * Sends the notifications a change's jobs owe. Never throws (notify logs its own failures).
 *
 * @example
 * await notifyChanges(ctx, [{ jobId: "local-1", from: "running", to: "completed", workerId: null }]);
 */
export async function notifyChanges(ctx: NotifyContext, jobs: JobChange[], waitInfo?: () => Promise<WaitInfo[]>): Promise<void> {
  if (!jobs.some((j) => kindOf(j) !== null)) return;
  // One read for the whole change when nobody has asked for anything (a pass admitting hundreds of jobs).
  const anyone = await ctx.db.$client.execute("SELECT 1 FROM notification_preferences LIMIT 1").catch(() => null);
  if (!anyone?.rows.length) return;
  let waiting: Promise<WaitInfo[]> | null = null;
  const placeOf = async (id: number) => {
    if (!waitInfo) return null;
    waiting ??= waitInfo().catch(() => []);
    return (await waiting).find((w) => w.id === id) ?? null;
  };
  await Promise.all(
    jobs.map(async (j) => {
      const kind = kindOf(j);
      if (!kind) return;
      const job = await jobFacts(ctx.db, j.jobId).catch(() => null);
      if (!job) return;
      const facts: Facts = { ...job.facts, error: j.to === "failed" ? (j.message ?? job.facts.error ?? null) : null };
      if (kind === "approval.decided") facts.decision = j.to === "pending" ? "approved" : "rejected";
      else facts.reason = null;
      const place = job.facts.status === "pending" ? await placeOf(job.id) : null;
      if (place) {
        facts.queue_position = place.position;
        facts.expected_start_at = typeof place.expectedStartAt === "number" ? new Date(place.expectedStartAt).toISOString() : null;
      }
      await notify(ctx, kind, { userId: job.userId, jobId: j.jobId }, facts);
    }),
  );
}
