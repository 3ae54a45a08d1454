import { z } from "@hono/zod-openapi";
import { Timestamp } from "./common";

export const HealthStatus = z.enum(["healthy", "degraded", "unhealthy"]);

export const HealthComponent = z
  .object({
    name: z.string(),
    status: HealthStatus,
    latency_ms: z.number().optional(),
    message: z.string().optional(),
    schema_version: z.number().int().optional().openapi({ description: "database only: the schema version applied" }),
    latest_schema_version: z.number().int().optional().openapi({ description: "database only: the version this code expects" }),
  })
  .openapi("HealthComponent");

export const Health = z
  .object({
    status: HealthStatus,
    version: z.string(),
    uptime_seconds: z.number(),
    timestamp: Timestamp,
    components: z.array(HealthComponent),
    providers: z
      .array(z.object({ name: z.string(), status: HealthStatus, latency_ms: z.number().optional(), message: z.string().optional() }))
      .optional()
      .openapi({ description: "Only with include_providers=true: one entry per configured provider" }),
  })
  .openapi("Health");
export type Health = z.infer<typeof Health>;

export const HealthQuery = z.object({
  include_providers: z
    .enum(["true", "false", "1", "0"])
    .optional()
    .transform((v) => v === "true" || v === "1")
    .openapi({ param: { name: "include_providers", in: "query" }, type: "boolean" }),
});

export const Live = z.object({ status: z.literal("ok") }).openapi("Live");
export const Ready = z.object({ status: z.enum(["ready", "not_ready"]), detail: z.string().optional() }).openapi("Ready");
