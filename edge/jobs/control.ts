import { END_METHODS } from "../../shared/schemas/queue";
import type { Database } from "../db/client";
import { ApiError } from "../errors";
import { findActiveJob, type ActiveJob } from "./active-job";

/*
 * Training control over the queue: which job a command is about, a job's status with
 * its startup stage and progress, and its checkpoints (cancelling is a lifecycle transition:
 * edge/jobs/lifecycle/cancel.ts). Domain logic only; edge/routes/training.ts is the HTTP side.
 */

/** 400 `no_active_job`: nothing runs that a command could reach. */
function noActiveJob(scope: number | null): ApiError {
  return new ApiError(400, "no_active_job", scope === null ? "No job is running" : "You have no running job; name one with job_id");
}

/**
 * The job a control request is about when it names none: the caller's active job for control
 * (edge/jobs/active-job.ts; `scope` null: anyone's). 400 when there is none (validation/run
 * included). A named job is checked where it is acted on: a command's write (commands.ts
 * addCommand), the checkpoint listing's read access.
 *
 * @example
 * const job = await activeJobToControl(db, ownerScope(user)); // { jobId, userId, status: "running" }
 */
export async function activeJobToControl(db: Database, scope: number | null): Promise<ActiveJob> {
  const job = await findActiveJob(db, scope, "control");
  if (!job) throw noActiveJob(scope);
  return job;
}

/** A job's state for GET /api/training/status: queue status, startup stage and phase, latest progress and, while it runs, its expected end. */
export async function jobStatus(db: Database, jobId: string) {
  const [entry, progress, count, phase, usage] = await db.$client.batch(
    [
      {
        sql: `SELECT job_id, status, config_name, started_at, completed_at, error_message, allocated_gpus, attempt, expected_end_at, expected_end_method
              FROM queue_entries WHERE job_id = ?`,
        args: [jobId],
      },
      { sql: "SELECT payload FROM job_events WHERE job_id = ? AND type = 'training.progress' ORDER BY idx DESC LIMIT 1", args: [jobId] },
      // The trainer is up once it has said anything of its own (the runner's own events do not count).
      {
        sql: `SELECT COUNT(*) AS n, MAX(CASE WHEN type IN ('training.started', 'training.stage', 'log', 'notification') THEN 1 ELSE 0 END) AS started
              FROM job_events WHERE job_id = ?`,
        args: [jobId],
      },
      { sql: "SELECT payload FROM job_events WHERE job_id = ? AND type = 'training.stage' ORDER BY idx DESC LIMIT 1", args: [jobId] },
      { sql: "SELECT bytes, dropped FROM job_event_usage WHERE job_id = ?", args: [jobId] },
    ],
    "read",
  );
  const e = entry!.rows[0]!;
  const status = String(e.status);
  const last = progress!.rows[0]
    ? ((JSON.parse(String(progress!.rows[0].payload)) as { data?: Record<string, unknown> }).data ?? null)
    : null;
  const started = Number(count!.rows[0]!.started) === 1;
  // launching: the runner has it, nothing heard yet; starting: the trainer is up, no step yet.
  const stage = status !== "running" ? null : last ? "training" : started ? "starting" : "launching";
  const phaseTitle = phase!.rows[0] ? (JSON.parse(String(phase!.rows[0].payload)) as { title?: unknown }).title : null;
  const method = status === "running" && e.expected_end_at !== null ? END_METHODS.find((m) => m === e.expected_end_method) : undefined;
  return {
    state: status === "running" ? "running" : status === "pending" || status === "blocked" ? "queued" : status,
    job_id: jobId,
    status,
    config_name: e.config_name === null ? null : String(e.config_name),
    startup_stage: stage,
    startup_phase: stage === "starting" && typeof phaseTitle === "string" ? phaseTitle : null,
    progress: last
      ? {
          step: last.step ?? null,
          total_steps: last.total_steps ?? null,
          percent: last.percent ?? null,
          loss: last.loss ?? null,
          epoch: last.epoch ?? null,
        }
      : null,
    events: Number(count!.rows[0]!.n),
    events_bytes: Number(usage!.rows[0]?.bytes ?? 0),
    events_dropped: Number(usage!.rows[0]?.dropped ?? 0),
    attempt: Number(e.attempt),
    allocated_gpus: e.allocated_gpus === null ? null : (JSON.parse(String(e.allocated_gpus)) as number[]),
    started_at: e.started_at === null ? null : String(e.started_at),
    completed_at: e.completed_at === null ? null : String(e.completed_at),
    error_message: e.error_message === null ? null : String(e.error_message),
    expected_end_at: method ? String(e.expected_end_at) : null,
    expected_end_method: method ?? null,
  };
}

/**
 * The job's checkpoints: the runner's latest look at its output directory (checkpoints.listed,
 * sent whenever it changes), or, before the first such look, every checkpoint.saved event's path
 * not removed by a later one.
 */
export async function checkpointsOf(
  db: Database,
  jobId: string,
): Promise<{ name: string; path: string; step: number | null; saved_at: string }[]> {
  const listed = await db.$client.execute({
    sql: "SELECT payload FROM job_events WHERE job_id = ? AND type = 'checkpoints.listed' ORDER BY idx DESC LIMIT 1",
    args: [jobId],
  });
  if (listed.rows.length) {
    const data = (
      JSON.parse(String(listed.rows[0]!.payload)) as {
        data?: { checkpoints?: { name: string; path: string; step: number; modified: string }[] };
      }
    ).data;
    return (data?.checkpoints ?? []).map((c) => ({ name: c.name, path: c.path, step: c.step, saved_at: c.modified }));
  }
  const rows = await db.$client.execute({
    sql: "SELECT payload, created_at FROM job_events WHERE job_id = ? AND type = 'checkpoint.saved' ORDER BY idx",
    args: [jobId],
  });
  const kept = new Map<string, { name: string; path: string; step: number | null; saved_at: string }>();
  for (const r of rows.rows) {
    const data = ((JSON.parse(String(r.payload)) as { data?: { path?: unknown; step?: unknown; removed?: unknown } }).data ?? {}) as {
      path?: unknown;
      step?: unknown;
      removed?: unknown;
    };
    if (Array.isArray(data.removed)) for (const p of data.removed) kept.delete(String(p));
    if (typeof data.path === "string")
      kept.set(data.path, {
        name: data.path.split("/").pop() ?? data.path,
        path: data.path,
        step: typeof data.step === "number" ? data.step : null,
        saved_at: String(r.created_at),
      });
  }
  return [...kept.values()];
}
