import type { CloudJob, Destination, PackageSummary } from "../../shared/schemas/cloud";
import type { Database } from "../db/client";
import { ApiError } from "../errors";
import { checkCanReadJob } from "../jobs/access";
import { expectedEnd } from "../jobs/estimate";
import { billedSecondsNow, costOf } from "./cost";

/**
 * A cloud job as GET /api/cloud/jobs/{job_id} shows it: its queue status, where it is at its
 * provider, upload progress, and its cost - billed seconds times the rate, computed at this read
 * while it runs (so it grows each second), the provider's final figure once it ended. 404 for an
 * unknown job or one that is not a cloud job, 403 for another user's (unless lead or admin).
 *
 * @example
 * const job = await readCloudJob(db, "cloud-1a2b3c4d5e6f", ownerScope(user));
 */
export async function readCloudJob(db: Database, jobId: string, scope: number | null, now = Date.now()): Promise<CloudJob> {
  const result = await db.$client.execute({
    sql: `SELECT q.job_id, q.user_id, q.status, q.queued_at, q.started_at, q.completed_at, q.estimated_cost, q.error_message, c.*
          FROM queue_entries q LEFT JOIN cloud_jobs c ON c.job_id = q.job_id WHERE q.job_id = ?`,
    args: [jobId],
  });
  const row = result.rows[0] as Record<string, unknown> | undefined;
  checkCanReadJob(row, jobId, scope);
  if (row!.provider === null || row!.provider === undefined)
    throw new ApiError(404, "not_a_cloud_job", `Job ${jobId} is not a cloud job (GET /api/queue/position/${jobId} shows it)`);
  const r = row!;
  const text = (v: unknown) => (v === null || v === undefined ? null : String(v));
  const final = Number(r.cost_final) === 1;
  const startedAt = text(r.provider_started_at);
  const seconds = final
    ? Number(r.billed_seconds ?? 0)
    : billedSecondsNow({ startedAt, completedAt: text(r.provider_completed_at), billedSeconds: null }, now);
  const archive = Number(r.archive_bytes ?? 0);
  const uploaded = Number(r.uploaded_bytes ?? 0);
  return {
    job_id: String(r.job_id),
    provider: String(r.provider),
    provider_job_id: text(r.provider_job_id),
    status: String(r.status) as CloudJob["status"],
    phase: String(r.phase),
    provider_status: text(r.provider_status),
    upload_progress: archive === 0 ? (r.phase === "queued" ? 0 : 1) : Math.min(1, uploaded / archive),
    uploaded_bytes: uploaded,
    archive_bytes: archive,
    hardware: String(r.hardware),
    rate_usd_per_second: Number(r.rate_usd_per_second),
    estimated_cost: Number(r.estimated_cost ?? 0),
    cost_usd: final ? Number(r.cost_usd ?? 0) : costOf(Number(r.rate_usd_per_second), seconds),
    cost_final: final,
    billed_seconds: startedAt || final ? seconds : null,
    destination: JSON.parse(String(r.destination)) as Destination,
    summary: JSON.parse(String(r.summary)) as PackageSummary,
    queued_at: String(r.queued_at),
    started_at: text(r.started_at),
    completed_at: text(r.completed_at),
    provider_started_at: startedAt,
    provider_completed_at: text(r.provider_completed_at),
    error_message: text(r.error_message),
    archive_deleted: r.archive_deleted_at !== null && r.archive_deleted_at !== undefined,
    output: r.output ? (JSON.parse(String(r.output)) as unknown) : null,
  };
}

/** The cloud job that a provider's run id belongs to, or null (a webhook about something else). */
export async function jobOfProviderRun(db: Database, provider: string, providerJobId: string): Promise<string | null> {
  const result = await db.$client.execute({
    sql: "SELECT job_id FROM cloud_jobs WHERE provider = ? AND provider_job_id = ?",
    args: [provider, providerJobId],
  });
  return result.rows[0] ? String(result.rows[0].job_id) : null;
}

/** Running cloud jobs not polled for `staleSeconds` (the Scheduler's sweep pokes their objects). */
export async function unpolledCloudJobs(db: Database, staleSeconds: number, now = new Date()): Promise<string[]> {
  const before = new Date(now.getTime() - staleSeconds * 1000).toISOString();
  const result = await db.$client.execute({
    sql: `SELECT q.job_id FROM queue_entries q JOIN cloud_jobs c ON c.job_id = q.job_id
          WHERE q.job_type = 'cloud' AND q.status = 'running' AND c.phase != 'finished' AND coalesce(c.last_polled_at, c.updated_at) < ? LIMIT 100`,
    args: [before],
  });
  return result.rows.map((r) => String(r.job_id));
}

/**
 * A running cloud job's expected end once its provider reports its start: that start plus the run
 * time its cost estimate assumed (method cost_cap), instead of the admission's (the upload and the
 * provider's own queue come first). An estimate from progress, better evidence, is kept.
 *
 * @example
 * await recordProviderStart(db, "cloud-1a2b3c4d5e6f", "2026-11-23T09:05:00Z", 3600);
 */
export async function recordProviderStart(db: Database, jobId: string, providerStartedAt: string, expectedSeconds: number): Promise<void> {
  const start = Date.parse(providerStartedAt);
  if (Number.isNaN(start)) return;
  const cloud = { expectedSeconds, providerStartedAt: start };
  const end = expectedEnd({ startedAt: null, rate: null, maxRuntime: null, cloud }, Date.now());
  if (!end) return;
  await db.$client.execute({
    sql: `UPDATE queue_entries SET expected_end_at = ?, expected_end_method = ?
          WHERE job_id = ? AND job_type = 'cloud' AND status = 'running' AND expected_end_method IS NOT 'progress'`,
    args: [new Date(end.at).toISOString(), end.method, jobId],
  });
}
