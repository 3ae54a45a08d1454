import { z } from "@hono/zod-openapi";
import { BooleanQuery } from "./common";

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
