import type { Command } from "commander";
import type { z } from "zod";
import { ServiceError, type ServiceClient } from "../../../shared/client/client";
import { endpoints } from "../../../shared/client/endpoints";
import type { CloudJob } from "../../../shared/schemas/cloud";
import type { MyQueue, QueueEntry, QueueJob } from "../../../shared/schemas/queue";
import type { TrainingStatus } from "../../../shared/schemas/training";
import { showControls, stripColour } from "../../../shared/terminal-text";
import { cli } from "../context";
import {
  age,
  bytes,
  expectedEndText,
  expectedRunText,
  expectedStartText,
  gpuList,
  stalledText,
  runTimeText,
  usd,
  waitText,
} from "../format-job";
import type { Output } from "../output";

type Job = z.output<typeof QueueJob>;

/** `jobs status`: one job in detail, or without an id the caller's own queue summary. */
export function addStatus(program: Command): void {
  program
    .command("status")
    .description("Show one job (status, position and why it waits, GPUs, progress, cloud cost), or without an id your queue summary.")
    .argument("[job_id]", "the job; leave it out for a summary of your jobs")
    .addHelpText(
      "after",
      `
JSON: with an id, {"job": <queue entry>, "training": <progress or null>, "cloud": <cloud job or null>};
without one, the answer of GET /api/queue/me.

Examples:
  $ jobs status
  $ jobs status local-3f9c2a1b04de --format json`,
    )
    .action(async (jobId: string | undefined, _options: object, command: Command) => {
      const { out, client } = cli(command);
      if (jobId === undefined) return summary(out, await client.call(endpoints.queueMe, {}));
      const job = await client.call(endpoints.queueJob, { params: { job_id: jobId } });
      const [training, cloud] = await Promise.all([trainingOf(client, job), cloudOf(client, job)]);
      if (out.json) return out.printJson({ job, training, cloud });
      details(out, job, training, cloud);
    });
}

/** A local job's progress while it runs; null when it is not running, or not the caller's to read. */
async function trainingOf(client: ServiceClient, job: Job): Promise<z.output<typeof TrainingStatus> | null> {
  if (job.status !== "running" || !("job_type" in job) || job.job_type !== "local") return null;
  return optional(client.call(endpoints.trainingStatus, { query: { job_id: job.job_id } }));
}

/** A cloud job's record (phase, upload, cost); null for a local job or one the caller may not read. */
async function cloudOf(client: ServiceClient, job: Job): Promise<z.output<typeof CloudJob> | null> {
  if (!("job_type" in job) || job.job_type !== "cloud") return null;
  return optional(client.call(endpoints.cloudJob, { params: { job_id: job.job_id } }));
}

/** The extra details are a bonus: a refusal (another user's job) leaves them out rather than failing. */
async function optional<T>(call: Promise<T>): Promise<T | null> {
  try {
    return await call;
  } catch (error) {
    if (error instanceof ServiceError && (error.status === 403 || error.status === 404)) return null;
    throw error;
  }
}

function details(out: Output, job: Job, training: z.output<typeof TrainingStatus> | null, cloud: z.output<typeof CloudJob> | null): void {
  const full: Partial<z.output<typeof QueueEntry>> = job;
  const rows: [string, string][] = [
    ["Job", job.job_id],
    ["Owner", job.owner ?? "-"],
    ["Status", stalledText(job) ?? job.status],
  ];
  if (full.config_name !== undefined) rows.push(["Config", full.config_name ?? "-"]);
  rows.push([
    "Priority",
    job.effective_priority === job.priority ? String(job.priority) : `${job.effective_priority} (base ${job.priority})`,
  ]);
  if (job.status === "pending") rows.push(["Position", job.position === null ? "-" : String(job.position)], ["Waiting", waitText(job)]);
  if (job.status === "blocked") rows.push(["Waiting", waitText(job)]);
  const waits = job.status === "pending" || job.status === "blocked";
  const expectedStart = waits ? expectedStartText(full) : null;
  if (expectedStart) rows.push(["Expected start", expectedStart]);
  const expectedRun = waits ? (full.expected_run_basis ? runTimeText(full) : expectedRunText(full)) : null;
  if (expectedRun) rows.push(["Expected run", expectedRun]);
  if (full.allocated_gpus?.length) rows.push(["GPUs", gpuList(full.allocated_gpus)]);
  else if (full.num_processes !== undefined && full.job_type === "local")
    rows.push(["GPUs", full.num_processes === 0 ? "none (CPU)" : `${full.num_processes} wanted`]);
  if (full.worker_name) rows.push(["Worker", full.worker_name]);
  if (full.attempt !== undefined) rows.push(["Attempt", `${full.attempt} of ${full.max_attempts}`]);
  rows.push(["Queued", `${job.queued_at} (${age(job.queued_at)} ago)`]);
  if (full.started_at) rows.push(["Started", full.started_at]);
  const expectedEnd = job.status === "running" ? expectedEndText(full) : null;
  if (expectedEnd) rows.push(["Expected end", expectedEnd]);
  if (full.completed_at) rows.push(["Ended", full.completed_at]);
  // Its lines are the trainer's: each shown without colour codes, its other controls escaped.
  if (full.error_message)
    rows.push([
      "Error",
      full.error_message
        .split("\n")
        .map((line) => showControls(stripColour(line)))
        .join("\n"),
    ]);
  if (training) rows.push(["Progress", progressText(training)]);
  if (cloud) {
    rows.push([
      "Phase",
      cloud.provider_status ? `${cloud.phase} (${cloud.provider}: ${cloud.provider_status})` : `${cloud.phase} (${cloud.provider})`,
    ]);
    rows.push(["Upload", `${Math.round(cloud.upload_progress * 100)}% of ${bytes(cloud.archive_bytes)}`]);
    rows.push(["Cost", `${usd(cloud.cost_usd)}${cloud.cost_final ? " (final)" : ` so far, estimate ${usd(cloud.estimated_cost)}`}`]);
  }
  const width = Math.max(...rows.map(([name]) => name.length));
  for (const [name, value] of rows) out.line(`${out.c.bold(name.padEnd(width))}  ${value}`);
}

/** step 10/50 (20%), loss 0.123, stage training; or: stage starting (Loading base model) */
function progressText(status: z.output<typeof TrainingStatus>): string {
  const parts: string[] = [];
  const p = status.progress;
  if (p && p.step !== null && p.step !== undefined) {
    const total = p.total_steps === null || p.total_steps === undefined ? "" : `/${String(p.total_steps)}`;
    parts.push(`step ${String(p.step)}${total}${typeof p.percent === "number" ? ` (${Math.round(p.percent)}%)` : ""}`);
  }
  if (p && typeof p.loss === "number") parts.push(`loss ${p.loss.toPrecision(4)}`);
  if (status.startup_stage) parts.push(`stage ${status.startup_stage}${status.startup_phase ? ` (${status.startup_phase})` : ""}`);
  return parts.join(", ") || status.state;
}

/** The caller's counts, best position, and a line per job: where each pending one stands and why. */
function summary(out: Output, me: z.output<typeof MyQueue>): void {
  if (out.json) return out.printJson(me);
  const best = me.best_position === null ? "" : `; best position ${me.best_position}`;
  out.line(`${me.pending_count} pending, ${me.running_count} running, ${me.blocked_count} blocked${best}`);
  for (const job of me.running_jobs) {
    const where = job.allocated_gpus?.length ? ` on GPUs ${gpuList(job.allocated_gpus)}` : job.worker_name ? ` on ${job.worker_name}` : "";
    out.line(`${job.job_id}  running${where}  ${job.config_name ?? ""}`.trimEnd());
  }
  for (const job of me.pending_jobs) out.line(`${job.job_id}  pending at position ${job.position ?? "-"}: ${waitText(job)}`);
  for (const job of me.blocked_jobs) out.line(`${job.job_id}  blocked: ${waitText(job)}`);
}
