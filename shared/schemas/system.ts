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

/** One GPU of a worker as every user may see it: what it is and which job holds it. */
export const SystemWorkerGpu = z
  .object({
    index: z.number().int(),
    name: z.string(),
    memory_mb: z.number().int().openapi({ description: "Total memory of the device in MiB" }),
    job_id: z.string().nullable().openapi({ description: "The running job that holds it; null when free" }),
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
  })
  .openapi("SystemWorker");

export const SystemWorkerList = z.object({ workers: z.array(SystemWorker) }).openapi("SystemWorkerList");
