import { z } from "@hono/zod-openapi";
import { Timestamp } from "./common";
import { TRAINER_COMMANDS } from "../trainer-commands";

export const WORKER_STATUSES = ["connecting", "IDLE", "busy", "draining", "offline"] as const;

const Labels = z.record(
  z.string().regex(/^[A-Za-z0-9_.\/-]{1,64}$/, "label names are 1 to 64 letters, digits, '_', '.', '/' or '-'"),
  z.string().max(256),
);

export const WorkerCreate = z
  .strictObject({
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, "1 to 64 letters, digits, '.', '_' or '-'")
      .openapi({ example: "gpu-box-1" }),
  })
  .openapi("WorkerCreate");

export const GpuDevice = z
  .strictObject({
    index: z.number().int().min(0).max(255),
    uuid: z.string().max(128).optional(),
    name: z.string().max(128),
    memory_mb: z.number().int().min(0).openapi({ description: "Total memory of the device in MiB" }),
  })
  .openapi("GpuDevice");

export const HostStats = z
  .strictObject({
    load_avg_5min: z.number().min(0).optional(),
    memory_percent: z.number().min(0).max(100).optional(),
  })
  .openapi("HostStats");

/** One trainer a runner can run, or cannot and why (its runner config, SimpleTuner's installation, the sandbox). */
export const TrainerAvailability = z
  .strictObject({
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, "a trainer name is 1 to 64 letters, digits, _ . -")
      .openapi({ example: "simpletuner" }),
    available: z.boolean(),
    version: z.string().max(100).nullable().optional().openapi({ description: "Its version, where the runner can tell (SimpleTuner's)" }),
    detail: z.string().max(500).nullable().optional().openapi({ description: "Why it is not available, in a line" }),
  })
  .openapi("TrainerAvailability");

export const WorkerRegister = z
  .strictObject({
    role: z
      .enum(["local", "remote"])
      .default("remote")
      .openapi({ description: "local: this service's own GPU box (at most one); remote: a worker matched by labels" }),
    labels: Labels.default({}),
    gpus: z.array(GpuDevice).max(64).default([]),
    hostname: z.string().max(255).optional(),
    host_stats: HostStats.optional(),
    trainers: z.array(TrainerAvailability).max(64).optional().openapi({
      description:
        "The trainers this box can run (SimpleTuner when its installation was found, the demo trainer, its runner config's own), and why others cannot run; a job goes only to a box that can run its trainer. Absent: the box takes any job",
    }),
  })
  .superRefine((body, ctx) => {
    const seen = new Set<number>();
    for (const [i, gpu] of body.gpus.entries()) {
      if (seen.has(gpu.index))
        ctx.addIssue({ code: "custom", path: ["gpus", i, "index"], message: `device index ${gpu.index} is listed twice` });
      seen.add(gpu.index);
    }
  })
  .openapi("WorkerRegister", {
    example: {
      role: "remote",
      labels: { gpu: "a100" },
      gpus: [{ index: 0, name: "NVIDIA A100", memory_mb: 81920 }],
      hostname: "gpu-box-1",
    },
  });

/** What one GPU's probe found at a heartbeat (the runner's nvidia-smi health query and the kernel log). */
export const GpuHealthSample = z
  .strictObject({
    index: z.number().int().min(0).max(255),
    utilization_percent: z.number().min(0).max(100).nullable().openapi({ description: "utilization.gpu; null: [N/A] or [Not Supported]" }),
    memory_used_mb: z.number().min(0).nullable(),
    memory_total_mb: z.number().min(0).nullable(),
    temperature_c: z.number().min(-100).max(300).nullable(),
    ecc_uncorrected_volatile: z
      .number()
      .int()
      .min(0)
      .nullable()
      .openapi({ description: "ecc.errors.uncorrected.volatile.total since the driver loaded; null where ECC is off or not supported" }),
    retired_pages_pending: z.boolean().nullable().openapi({ description: "retired_pages.pending (Yes/No); null: [N/A]" }),
    remapped_rows_pending: z.boolean().nullable().optional().openapi({
      description:
        "nvidia-smi --query-remapped-rows remapped_rows.pending (Ampere and later: memory rows waiting for a GPU reset to be remapped); null or absent: not supported or not read",
    }),
    remapped_rows_failure: z.boolean().nullable().optional().openapi({
      description: "remapped_rows.failure: a row could not be remapped (the memory is beyond repair); null or absent: not read",
    }),
    probe_error: z.string().max(500).nullable().openapi({
      description:
        "The device probe failed for this GPU: nvidia-smi's own words (`GPU is lost`, `[GPU requires reset]`, `[Unknown Error]`, or the GPU missing from its answer); null: it answered",
    }),
    xids: z
      .array(z.number().int().min(0).max(100000))
      .max(64)
      .default([])
      .openapi({ description: "Xid codes the kernel log recorded for this GPU since the last heartbeat" }),
  })
  .openapi("GpuHealthSample");

export const WorkerHeartbeat = z
  .strictObject({
    host_stats: HostStats.optional(),
    draining: z.boolean().optional().openapi({ description: "true: finish the current job and take no new ones; false: take jobs again" }),
    acked_commands: z
      .array(z.number().int())
      .max(1000)
      .optional()
      .openapi({ description: "Ids of commands this runner has handed to its trainers; they are not sent again" }),
    running: z
      .array(z.strictObject({ job_id: z.string().min(1).max(200), attempt: z.number().int().min(1) }))
      .max(1000)
      .optional()
      .openapi({
        description:
          "The trainers alive on this box now, with the attempt each runs (one being stopped included): what the edge sees in GET /api/admin/workers as running_trainers",
      }),
    gpu_health: z.array(GpuHealthSample).max(64).optional().openapi({
      description:
        "Each GPU's health now. A GPU with a fatal fault (uncorrected ECC errors, pages pending retirement, a failed probe, a fatal Xid) is quarantined at once: its jobs go back to the queue and it is given to none until an admin clears it",
    }),
    xid_readable: z.boolean().optional().openapi({
      description:
        "Whether the runner can read the kernel log for Xid errors (false: dmesg is not permitted; health comes from nvidia-smi alone)",
    }),
  })
  .openapi("WorkerHeartbeat");

export const Worker = z
  .object({
    id: z.number().int(),
    name: z.string(),
    role: z.enum(["local", "remote"]),
    status: z.enum(WORKER_STATUSES),
    gpu_name: z.string().nullable(),
    gpu_count: z.number().int(),
    gpus: z.array(GpuDevice),
    labels: z.record(z.string(), z.string()),
    hostname: z.string().nullable(),
    created_at: Timestamp,
    registered_at: Timestamp.nullable(),
    last_heartbeat: Timestamp.nullable(),
    current_job: z.string().nullable().openapi({ description: "Job id of a running job on it (the first, for the local box)" }),
    running_jobs: z.array(z.string()),
    trainers: z.array(TrainerAvailability).nullable().openapi({
      description:
        "What its runner said it can run when it registered (SimpleTuner: whether installed, its version, or why not); null: it did not say",
    }),
    running_trainers: z
      .array(z.object({ job_id: z.string(), attempt: z.number().int() }))
      .nullable()
      .openapi({
        description:
          "The trainers its runner said are alive, with their attempts, at its last heartbeat (one still stopping after its job moved on included); null: it did not say",
      }),
  })
  .openapi("Worker");
export type Worker = z.infer<typeof Worker>;

export const WorkerCreated = Worker.extend({
  token: z.string().openapi({ description: "The worker's token. Shown only in this answer.", example: "stw_…" }),
}).openapi("WorkerCreated");

export const WorkerList = z.object({ workers: z.array(Worker) }).openapi("WorkerList");

export const WorkerIdParam = z.object({ id: z.coerce.number().int().positive().openapi({ description: "The worker's id", example: 3 }) });

export const WorkerRemoved = z
  .object({
    id: z.number().int(),
    name: z.string(),
    requeued: z.array(z.string()).openapi({ description: "Its running jobs that went back to the queue (attempt + 1)" }),
    failed: z.array(z.string()).openapi({ description: "Its running jobs that had no attempts left and failed" }),
  })
  .openapi("WorkerRemoved");

export const Assignment = z
  .object({
    job_id: z.string(),
    config_name: z.string().nullable(),
    config: z
      .record(z.string(), z.unknown())
      .openapi({ description: "The environment's option map as snapshotted when the job was submitted (later edits do not apply)" }),
    dataloader: z
      .array(z.record(z.string(), z.unknown()))
      .openapi({ description: "The environment's datasets (multidatabackend.json), snapshotted at submit" }),
    allocated_gpus: z.array(z.number().int()).nullable(),
    num_processes: z.number().int(),
    attempt: z.number().int(),
    resume_from: z
      .array(z.object({ job_id: z.string(), path: z.string(), step: z.number().nullable() }))
      .optional()
      .openapi({
        description:
          "A retry's checkpoints, newest first: each in an earlier job's directory (path relative to it). Unless the job has checkpoints of its own, the runner copies the first it finds into the job's output directory and starts the trainer with --resume_from_checkpoint latest",
      }),
  })
  .openapi("Assignment");

/** The bounds of a finish report (JobFinish); the runner fits its reports to them (runner/agent/report.ts). */
export const FINISH_LIMITS = { error: 2000, line: 1000, lines: 50 } as const;

export const JobFinish = z
  .object({
    status: z.enum(["completed", "failed", "interrupted"]).openapi({
      description:
        "completed: the trainer exited 0; failed: anything else; interrupted: the trainer died with its runner (a restart), so the job goes back to the queue (attempt + 1) or fails at max_attempts",
    }),
    exit_code: z.number().int().nullable().optional(),
    error: z.string().max(FINISH_LIMITS.error).optional().openapi({ description: "Why it failed, in a line" }),
    last_lines: z
      .array(z.string().max(FINISH_LIMITS.line))
      .max(FINISH_LIMITS.lines)
      .optional()
      .openapi({ description: "The last lines the trainer printed, or of the traceback it reported" }),
  })
  .strict()
  .openapi("JobFinish");

export const JobFinished = z
  .object({
    job_id: z.string(),
    status: z
      .enum(["completed", "failed", "pending"])
      .openapi({ description: "What the job is now: pending when an interrupted job was queued again" }),
  })
  .openapi("JobFinished");

/** A command for the trainer of a running job, as the edge hands it to the job's runner. */
export const WorkerCommand = z.object({ id: z.number().int(), job_id: z.string(), command: z.enum(TRAINER_COMMANDS) });

/**
 * The worker channel's message that carries commands (GET /api/workers/channel): sent right before
 * the `wake` of a new command, so the runner hands it to the trainer without waiting for its
 * heartbeat's answer; acknowledged, as ever, with the next heartbeat (acked_commands).
 */
export const ChannelCommands = z.object({ commands: z.array(WorkerCommand).max(1000) });

export const HeartbeatAnswer = z
  .object({
    worker_id: z.number().int(),
    status: z.enum(WORKER_STATUSES),
    heartbeat_interval_seconds: z.number().int(),
    heartbeat_timeout_seconds: z.number().int(),
    assignments: z.array(Assignment).openapi({ description: "Jobs the scheduler has given this worker that are running now" }),
    commands: z
      .array(WorkerCommand)
      .openapi({ description: "Commands for trainers of running jobs, oldest first, sent until acknowledged (acked_commands)" }),
    quarantined_gpus: z
      .array(z.number().int())
      .default([])
      .openapi({ description: "This box's GPUs out of allocation until an admin clears them: no job may use them" }),
  })
  .openapi("HeartbeatAnswer");

/** A job's dataset as the runner's cache fetches it (GET /api/workers/datasets/manifest). */
export const DatasetManifest = z
  .object({ path: z.string(), files: z.array(z.object({ path: z.string(), size: z.number().int(), sha256: z.string().nullable() })) })
  .openapi("DatasetManifest");

/** The job of a runner's call about one of its jobs (finish, events, storage credentials). */
export const WorkerJobParam = z.object({ job_id: z.string().min(1).max(200) });

/** One dataset of a job, as the runner's cache asks for it (GET /api/workers/datasets/manifest and /file). */
export const DatasetPath = z.object({
  job_id: z
    .string()
    .min(1)
    .max(200)
    .openapi({ description: "The job the dataset is for: running on this worker, its dataloader naming the dataset" }),
  path: z
    .string()
    .min(1)
    .max(1024)
    .openapi({ description: "Relative to the datasets root, e.g. portraits (or datasets/portraits as a dataloader names it)" }),
});
