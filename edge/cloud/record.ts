import { and, eq, inArray } from "drizzle-orm";
import type { CloudJob, Destination, PackageSummary } from "../../shared/schemas/cloud";
import type { Database } from "../db/client";
import { cloudJobs, queueEntries } from "../db/schema";
import { ApiError } from "../errors";
import { checkCanReadJob } from "../jobs/access";
import { expectedEnd } from "../jobs/estimate";
import { billedSecondsNow, costOf } from "./cost";
import { parsePhase, PhaseTransitionError, phasesBefore, type CloudPhase } from "./phase";

/** A cloud_jobs row as drizzle reads it. */
type CloudJobRow = typeof cloudJobs.$inferSelect;

/**
 * A cloud job as its Durable Object works with it: its cloud_jobs row, typed and checked once
 * (the phase one of CLOUD_PHASES, cost_final a boolean), with what it needs of its queue entry.
 */
export interface CloudJobRecord extends Omit<CloudJobRow, "phase" | "costFinal"> {
  phase: CloudPhase;
  /** The provider's figure is final (the job ended there): billed seconds and cost no longer grow. */
  costFinal: boolean;
  /** The queue entry's status: anything but running means the job was cancelled or ended. */
  queueStatus: string;
  userId: number | null;
  configSnapshot: string | null;
  dataloaderSnapshot: string | null;
  /** The approved estimate (USD); null in a row that has none, when the rate times the expected run time stands for it. */
  estimatedCost: number | null;
}

/** The fields of a cloud job its Durable Object writes, phase apart (moveCloudJob changes it). */
export type CloudJobFields = Partial<Omit<CloudJobRow, "jobId" | "phase" | "costFinal" | "createdAt" | "updatedAt">> & {
  costFinal?: boolean;
};

/**
 * A cloud job with its queue entry's status, snapshots and estimate; null for an unknown job.
 *
 * @example
 * const job = await readCloudJobRecord(db, "cloud-1a2b3c4d5e6f"); // job?.phase === "running"
 */
export async function readCloudJobRecord(db: Database, jobId: string): Promise<CloudJobRecord | null> {
  const rows = await db
    .select({
      job: cloudJobs,
      queueStatus: queueEntries.status,
      userId: queueEntries.userId,
      configSnapshot: queueEntries.configSnapshot,
      dataloaderSnapshot: queueEntries.dataloaderSnapshot,
      estimatedCost: queueEntries.estimatedCost,
    })
    .from(cloudJobs)
    .innerJoin(queueEntries, eq(queueEntries.jobId, cloudJobs.jobId))
    .where(eq(cloudJobs.jobId, jobId));
  const row = rows[0];
  if (!row) return null;
  const { job, ...entry } = row;
  return {
    ...job,
    ...entry,
    phase: parsePhase(job.phase),
    costFinal: Number(job.costFinal) === 1,
    estimatedCost: entry.estimatedCost ?? null,
  };
}

const written = ({ costFinal, ...fields }: CloudJobFields) => ({
  ...fields,
  ...(costFinal === undefined ? {} : { costFinal: costFinal ? 1 : 0 }),
  updatedAt: new Date().toISOString(),
});

/**
 * Writes fields of a cloud job, never its phase (moveCloudJob does).
 *
 * @example
 * await patchCloudJob(db, "cloud-1a2b3c4d5e6f", { uploadedBytes: 1024 });
 */
export async function patchCloudJob(db: Database, jobId: string, fields: CloudJobFields): Promise<void> {
  await db.update(cloudJobs).set(written(fields)).where(eq(cloudJobs.jobId, jobId));
}

/**
 * Moves a cloud job to phase `to`, with other fields in the same statement, only from a phase
 * the transition table (edge/cloud/phase.ts) allows; any other throws PhaseTransitionError and
 * writes nothing. False for an unknown job.
 *
 * @example
 * await moveCloudJob(db, "cloud-1a2b3c4d5e6f", "running", { providerStatus: "processing" });
 */
export async function moveCloudJob(db: Database, jobId: string, to: CloudPhase, fields: CloudJobFields = {}): Promise<boolean> {
  const moved = await db
    .update(cloudJobs)
    .set({ ...written(fields), phase: to })
    .where(and(eq(cloudJobs.jobId, jobId), inArray(cloudJobs.phase, phasesBefore(to))))
    .returning({ jobId: cloudJobs.jobId });
  if (moved.length) return true;
  const now = await db.select({ phase: cloudJobs.phase }).from(cloudJobs).where(eq(cloudJobs.jobId, jobId));
  if (!now[0]) return false;
  throw new PhaseTransitionError(jobId, parsePhase(now[0].phase), to);
}

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
  const rows = await db
    .select({
      job: cloudJobs,
      userId: queueEntries.userId,
      status: queueEntries.status,
      queuedAt: queueEntries.queuedAt,
      startedAt: queueEntries.startedAt,
      completedAt: queueEntries.completedAt,
      estimatedCost: queueEntries.estimatedCost,
      errorMessage: queueEntries.errorMessage,
    })
    .from(queueEntries)
    .leftJoin(cloudJobs, eq(cloudJobs.jobId, queueEntries.jobId))
    .where(eq(queueEntries.jobId, jobId));
  const row = rows[0];
  checkCanReadJob(row && { user_id: row.userId }, jobId, scope);
  const { job, ...entry } = row!;
  if (!job) throw new ApiError(404, "not_a_cloud_job", `Job ${jobId} is not a cloud job (GET /api/queue/position/${jobId} shows it)`);
  const final = Number(job.costFinal) === 1;
  const phase = parsePhase(job.phase);
  const startedAt = job.providerStartedAt;
  const seconds = final
    ? (job.billedSeconds ?? 0)
    : billedSecondsNow({ startedAt, completedAt: job.providerCompletedAt, billedSeconds: null }, now);
  const archive = job.archiveBytes;
  const uploaded = job.uploadedBytes;
  return {
    job_id: job.jobId,
    provider: job.provider,
    provider_job_id: job.providerJobId,
    status: entry.status as CloudJob["status"],
    phase,
    provider_status: job.providerStatus,
    upload_progress: archive === 0 ? (phase === "queued" ? 0 : 1) : Math.min(1, uploaded / archive),
    uploaded_bytes: uploaded,
    archive_bytes: archive,
    hardware: job.hardware,
    rate_usd_per_second: job.rateUsdPerSecond,
    estimated_cost: entry.estimatedCost ?? 0,
    cost_usd: final ? job.costUsd : costOf(job.rateUsdPerSecond, seconds),
    cost_final: final,
    billed_seconds: startedAt || final ? seconds : null,
    destination: JSON.parse(job.destination) as Destination,
    summary: JSON.parse(job.summary) as PackageSummary,
    queued_at: entry.queuedAt,
    started_at: entry.startedAt,
    completed_at: entry.completedAt,
    provider_started_at: startedAt,
    provider_completed_at: job.providerCompletedAt,
    error_message: entry.errorMessage,
    archive_deleted: job.archiveDeletedAt !== null,
    output: job.output ? (JSON.parse(job.output) as unknown) : null,
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
