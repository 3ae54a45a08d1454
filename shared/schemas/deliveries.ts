import { z } from "@hono/zod-openapi";
import { CursorQuery, NextCursor } from "./common";

/** One outbound webhook message to one receiver, as the job's events hub keeps it. */
export const WebhookDelivery = z
  .object({
    id: z.number().int().openapi({ description: "Its place among the job's deliveries, increasing" }),
    url: z.string(),
    type: z.string().openapi({ example: "job.completed" }),
    status: z.enum(["pending", "delivered", "failed", "refused"]),
    attempts: z.number().int(),
    last_error: z.string().nullable(),
    created_at: z.string(),
    delivered_at: z.string().nullable(),
  })
  .openapi("WebhookDelivery");
export type WebhookDelivery = z.infer<typeof WebhookDelivery>;

export const DeliveriesQuery = z.object({
  job_id: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .openapi({ description: "The job; required unless `cursor` is sent (a cursor keeps its job)" }),
  limit: z.coerce.number().int().min(1).max(1000).default(100).openapi({ description: "Deliveries per page (1 to 1000, default 100)" }),
  cursor: CursorQuery,
});

export const DeliveryList = z
  .object({ job_id: z.string(), deliveries: z.array(WebhookDelivery).openapi({ description: "Oldest first" }), next_cursor: NextCursor })
  .openapi("WebhookDeliveries");
