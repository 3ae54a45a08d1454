import { z } from "@hono/zod-openapi";
import { CursorQuery, NextCursor, Timestamp } from "./common";

export const AuditEntry = z
  .object({
    id: z.number().int().openapi({ description: "Position in the chain, from 1, without gaps" }),
    occurred_at: Timestamp,
    event_type: z.string().openapi({ example: "rate_limited" }),
    actor_user_id: z.number().int().nullable().openapi({ description: "The user who acted; null for anonymous callers and providers" }),
    actor: z.string().nullable().openapi({ description: "Their username, or the username a failed login tried" }),
    client_ip: z.string().nullable(),
    user_agent: z.string().nullable(),
    target: z.string().nullable().openapi({
      description: "What was acted on: a job id, `api_key:<id>`, `user:<id>`, a provider, an endpoint",
      example: "/api/cloud/auth/login",
    }),
    details: z.record(z.string(), z.unknown()),
    prev_hash: z.string().openapi({ description: "The previous entry's hash (64 zeros for the first)" }),
    hash: z.string().openapi({ description: "SHA-256 over this entry's fields and prev_hash" }),
  })
  .openapi("AuditEntry");

export const AuditQuery = z.object({
  event_type: z
    .string()
    .max(64)
    .optional()
    .openapi({ description: "Only this event type, e.g. `webhook_rejected`, `rate_limited`, `login_failed`" }),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(100)
    .openapi({ description: "At most this many entries, newest first (1 to 1000, default 100)" }),
  since: z.iso.datetime({ offset: true }).optional().openapi({ description: "Entries at or after this time (ISO 8601)" }),
  until: z.iso.datetime({ offset: true }).optional().openapi({ description: "Entries before this time (ISO 8601)" }),
  before_id: z.coerce
    .number()
    .int()
    .min(1)
    .optional()
    .openapi({ description: "Entries older than this id: pass the previous page's `next_before_id` (or use `cursor`, not both)" }),
  cursor: CursorQuery,
});

export const AuditList = z
  .object({
    entries: z.array(AuditEntry),
    next_before_id: z.number().int().nullable().openapi({ description: "For the next (older) page; null when this page is the last" }),
    next_cursor: NextCursor,
  })
  .openapi("AuditList");

export const AuditVerification = z
  .object({
    valid: z.boolean(),
    entries_checked: z.number().int(),
    first_invalid: z
      .object({ id: z.number().int(), reason: z.string() })
      .nullable()
      .openapi({ description: "The first entry that breaks the chain, and how" }),
    last_hash: z
      .string()
      .nullable()
      .openapi({ description: "The hash of the newest verified entry: keep a copy elsewhere to detect removal of the newest entries" }),
  })
  .openapi("AuditVerification");
