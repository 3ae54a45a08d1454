import type { Lineage } from "../../../shared/schemas/queue";
import type { Database } from "../../db/client";
import { ApiError, notFound } from "../../errors";
import { getSetting } from "../../settings-store";
import type { NewJob, ResumePoint, Submitter } from "../job";
import { approvalRule, submittedEnvironment } from "../prepare";

/*
 * Retry and continue (POST /api/queue/{job_id}/retry): a failed, cancelled or stopped job gives
 * a new job with the same configuration snapshot and placement, linked to it (`retry_of`) and to
 * its lineage, resuming from its newest intact checkpoint. It resumes the way an automatic
 * requeue does - the trainer's own `--resume_from_checkpoint latest` over checkpoint-<step>
 * folders in its output directory - except that the folders are in the old job's directory: the
 * runner copies the checkpoint in before the trainer starts (runner/agent/resume.ts).
 *
 * "Intact" here: a checkpoint whose checkpoint.saved event was recorded (the trainer said it
 * finished writing it), newest step first; the runner takes the first of them it still finds
 * on its disk (checkpoints_total_limit may have removed older ones, another box has none).
 */

/** Who may retry: `ownerScope` as for a cancel (null: anyone's, for leads and admins). */
export interface RetryRequest {
  actor: Submitter;
  ownerScope: number | null;
}

const ROW = `SELECT q.job_id, q.user_id, q.team_id, q.priority, q.status, q.job_type, q.config_name, q.metadata, q.config_snapshot,
  q.dataloader_snapshot, q.num_processes, q.target, q.worker_labels, q.device_ids, q.any_gpu, q.lineage_id, q.resume_from,
  EXISTS (SELECT 1 FROM job_events e WHERE e.job_id = q.job_id AND e.type = 'training.stop_requested') AS stopped
  FROM queue_entries q WHERE q.job_id = ?`;

const json = <T>(value: unknown, fallback: T): T => (value === null || value === undefined ? fallback : (JSON.parse(String(value)) as T));

/** The checkpoints a job's checkpoint.saved events recorded, newest step first, as paths in its directory. */
async function recordedCheckpoints(db: Database, jobId: string, outputDir: string): Promise<ResumePoint[]> {
  const rows = await db.$client.execute({
    sql: `SELECT json_extract(payload, '$.data.path') AS path, json_extract(payload, '$.data.step') AS step
          FROM job_events WHERE job_id = ? AND type = 'checkpoint.saved' ORDER BY id DESC`,
    args: [jobId],
  });
  const seen = new Set<string>();
  const points: ResumePoint[] = [];
  for (const row of rows.rows) {
    const name = /(?:^|\/)(checkpoint-\d+)\/?$/.exec(String(row.path ?? ""))?.[1];
    if (!name || seen.has(name)) continue;
    seen.add(name);
    points.push({ job_id: jobId, path: `${outputDir}/${name}`, step: row.step === null ? null : Number(row.step) });
  }
  return points.sort((a, b) => (b.step ?? -1) - (a.step ?? -1));
}

/**
 * The retry of `jobId` as a new job for the Scheduler (its `submitJob`), or an ApiError: 404 no
 * such job, 403 `not_your_job`, 409 `job_not_retryable` naming its status (only failed, cancelled
 * and stopped jobs), 409 `resume_unsupported` for a cloud job, 422 `admin_only_option` when the
 * snapshot has an option only an admin may run and the caller is not one. The new job belongs
 * to the old one's owner, with its priority; the approval rules are applied as to any submission.
 *
 * @example
 * const job = await prepareRetry(db, "local-3f9c2a1b04de", { actor: submitter, ownerScope: null });
 * const outcome = await scheduler.submitJob(job);
 */
export async function prepareRetry(db: Database, jobId: string, request: RetryRequest): Promise<NewJob> {
  const row = (await db.$client.execute({ sql: ROW, args: [jobId] })).rows[0];
  if (!row) throw notFound(`Job ${jobId}`);
  if (request.ownerScope !== null && Number(row.user_id) !== request.ownerScope)
    throw new ApiError(403, "not_your_job", "You can retry only your own jobs; a lead or admin can retry any");
  const status = String(row.status);
  const stopped = status === "completed" && Number(row.stopped) === 1;
  if (status !== "failed" && status !== "cancelled" && !stopped)
    throw new ApiError(
      409,
      "job_not_retryable",
      `Job ${jobId} is ${status}${status === "completed" ? " (it ran to its end)" : ""}: only a failed, cancelled or stopped job can be retried`,
    );
  if (row.job_type === "cloud")
    throw new ApiError(
      409,
      "resume_unsupported",
      `Cloud runs cannot be resumed (job ${jobId} is ${status}): submit its environment again with POST /api/cloud/jobs/submit; it starts from the beginning`,
    );
  const config = json<Record<string, unknown>>(row.config_snapshot, {});
  const configName = row.config_name === null ? jobId : String(row.config_name);
  submittedEnvironment(request.actor, configName, { config, dataloader: [] });
  const outputDir = String(config["--output_dir"] ?? "output").replace(/\/+$/, "");
  // Its own checkpoints first; then those it could have resumed from itself, should it have saved none.
  const resumeFrom = [...(await recordedCheckpoints(db, jobId, outputDir)), ...json<ResumePoint[]>(row.resume_from, [])];
  const placement = {
    jobType: "local" as const,
    numProcesses: Number(row.num_processes),
    target: String(row.target) as NewJob["target"],
    workerLabels: json<Record<string, string> | null>(row.worker_labels, null),
    deviceIds: json<number[] | null>(row.device_ids, null),
    anyGpu: Number(row.any_gpu) === 1,
    estimatedCost: 0,
  };
  const rules = await getSetting(db, "approval_rules");
  return {
    jobId: `local-${crypto.randomUUID().replace(/-/g, "").slice(0, 12)}`,
    userId: Number(row.user_id),
    teamId: row.team_id === null ? null : String(row.team_id),
    priority: Number(row.priority),
    configName,
    metadata: json<Record<string, unknown> | null>(row.metadata, null),
    approvalRule: approvalRule(placement, rules),
    configSnapshot: config,
    dataloaderSnapshot: json<unknown[]>(row.dataloader_snapshot, []),
    ...placement,
    retry: { of: jobId, lineageId: row.lineage_id === null ? jobId : String(row.lineage_id), resumeFrom },
  };
}

/**
 * A job's lineage: every job of its chain of retries, oldest first, and their GPU-hours and cost.
 *
 * @example
 * await readLineage(db, "local-3f9c2a1b04de"); // { id: "local-...", jobs: [...], gpu_hours: 0.02, cost: 0 }
 */
export async function readLineage(db: Database, jobId: string, now: number = Date.now()): Promise<Lineage | null> {
  const rows = await db.$client.execute({
    sql: `SELECT q.job_id, q.started_at, q.completed_at, q.num_processes, COALESCE(c.cost_usd, 0) AS cost
          FROM queue_entries q LEFT JOIN cloud_jobs c ON c.job_id = q.job_id
          WHERE COALESCE(q.lineage_id, q.job_id) = (SELECT COALESCE(lineage_id, job_id) FROM queue_entries WHERE job_id = ?)
          ORDER BY q.id`,
    args: [jobId],
  });
  if (!rows.rows.length) return null;
  let gpuHours = 0;
  let cost = 0;
  for (const r of rows.rows) {
    cost += Number(r.cost);
    if (r.started_at === null) continue;
    const end = r.completed_at === null ? now : Date.parse(String(r.completed_at));
    gpuHours += (Number(r.num_processes) * Math.max(0, end - Date.parse(String(r.started_at)))) / 3_600_000;
  }
  const first = String(rows.rows[0]!.job_id);
  return { id: first, jobs: rows.rows.map((r) => String(r.job_id)), gpu_hours: gpuHours, cost };
}
