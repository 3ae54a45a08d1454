import { z } from "@hono/zod-openapi";
import { BooleanQuery, Timestamp } from "./common";
import { WORKER_STATUSES, TrainerAvailability } from "./workers";

export const SystemStatusQuery = z.object({
  include_allocation: BooleanQuery.default(false),
});

export const SystemStatus = z
  .object({
    timestamp: z.number().openapi({ description: "Unix seconds" }),
    load_avg_5min: z.number().nullable().openapi({ description: "The local box's, from its last heartbeat; null when unknown" }),
    memory_percent: z.number().nullable(),
    gpus: z.array(
      z.object({
        index: z.number().int(),
        uuid: z.string().optional(),
        name: z.string(),
        memory_mb: z.number().int(),
        allocated: z.boolean(),
        job_id: z.string().nullable(),
      }),
    ),
    gpu_inventory: z.object({
      backend: z.enum(["cuda", "none"]),
      count: z.number().int(),
      capabilities: z.object({ local_box: z.string().nullable(), online: z.boolean(), total_memory_gb: z.number() }),
    }),
    gpu_allocation: z
      .object({
        allocated_gpus: z.array(z.number().int()),
        available_gpus: z.array(z.number().int()),
        running_local_jobs: z.number().int(),
        devices: z.array(
          z.object({
            index: z.number().int(),
            name: z.string(),
            memory_gb: z.number(),
            allocated: z.boolean(),
            job_id: z.string().nullable(),
          }),
        ),
      })
      .optional(),
  })
  .openapi("SystemStatus");

/** A GPU taken out of allocation by a fatal fault, until an admin clears it. */
export const GpuQuarantine = z
  .object({
    reason: z.string().openapi({ description: "The fault, e.g. `2 uncorrected ECC errors (volatile)`" }),
    since: Timestamp,
  })
  .openapi("GpuQuarantine");

/** One GPU's health at one moment, as stored (one per minute, the latest of that minute). */
export const GpuHealthPoint = z
  .object({
    at: Timestamp,
    utilization_percent: z.number().nullable(),
    memory_used_mb: z.number().nullable(),
    memory_total_mb: z.number().nullable(),
    temperature_c: z.number().nullable(),
    ecc_uncorrected_volatile: z.number().int().nullable(),
    retired_pages_pending: z.boolean().nullable(),
    probe_error: z.string().nullable(),
    xids: z.array(z.number().int()),
    fault: z.string().nullable().openapi({ description: "The fatal fault the rule found in this sample; null: none" }),
  })
  .openapi("GpuHealthPoint");

/** One GPU of a worker as every user may see it: what it is and which job holds it. */
export const SystemWorkerGpu = z
  .object({
    index: z.number().int(),
    name: z.string(),
    memory_mb: z.number().int().openapi({ description: "Total memory of the device in MiB" }),
    job_id: z.string().nullable().openapi({ description: "The running job that holds it; null when free" }),
    quarantine: GpuQuarantine.nullable().openapi({ description: "Why it is out of allocation, since when; null: it may be allocated" }),
    health: GpuHealthPoint.nullable().openapi({ description: "Its latest health sample; null: its runner sent none" }),
  })
  .openapi("SystemWorkerGpu");

/** A worker as every user may see it (GET /api/system/workers): never its token, hash or host. */
export const SystemWorker = z
  .object({
    id: z.number().int(),
    name: z.string(),
    role: z.enum(["local", "remote"]),
    status: z.enum(WORKER_STATUSES),
    labels: z.record(z.string(), z.string()),
    last_seen: Timestamp.nullable().openapi({ description: "Its last heartbeat (or registration); null when it never registered" }),
    gpus: z.array(SystemWorkerGpu),
    running_jobs: z.array(z.string()),
    trainers: z.array(TrainerAvailability).nullable().openapi({
      description:
        "The trainers its runner can run, as it said when it registered: SimpleTuner with its version, or why it is not available; null when it did not say",
    }),
    xid_readable: z
      .boolean()
      .nullable()
      .openapi({ description: "Whether its runner can read the kernel log for Xid errors; null: it did not say" }),
  })
  .openapi("SystemWorker");

export const SystemWorkerList = z.object({ workers: z.array(SystemWorker) }).openapi("SystemWorkerList");

export const GpuParam = z.object({
  id: z.coerce.number().int().positive().openapi({ description: "The worker's id", example: 1 }),
  // A string checked by pattern: a coerced number accepting 0 would be documented as nullable (and optional).
  index: z
    .string()
    .regex(/^(0|[1-9][0-9]?|1[0-9]{2}|2[0-4][0-9]|25[0-5])$/, "a GPU index is a whole number from 0 to 255")
    .transform(Number)
    .openapi({ description: "The GPU's index on that worker, 0 to 255", example: "1" }),
});

export const GpuHealthQuery = z.object({
  hours: z.coerce.number().int().min(1).max(24).default(24).openapi({ description: "How far back, 1 to 24 hours" }),
});

export const GpuHealthHistory = z
  .object({
    worker_id: z.number().int(),
    index: z.number().int(),
    quarantine: GpuQuarantine.nullable(),
    points: z.array(GpuHealthPoint).openapi({ description: "Oldest first, one per minute at most" }),
  })
  .openapi("GpuHealthHistory");

export const GpuCleared = z
  .object({
    worker_id: z.number().int(),
    index: z.number().int(),
    cleared: GpuQuarantine.openapi({ description: "The quarantine that was lifted" }),
  })
  .openapi("GpuCleared");
