import { z } from "@hono/zod-openapi";

/** The body of every error answer (S3 routes excepted): what went wrong and a stable code. */
export const ErrorBody = z
  .object({
    detail: z.string().openapi({ example: "username: Too small: expected string to have >=3 characters" }),
    code: z.string().openapi({ example: "invalid_request" }),
    errors: z
      .array(z.object({ path: z.string(), message: z.string() }))
      .optional()
      .openapi({ description: "One entry per invalid field, for request-validation errors." }),
  })
  .openapi("Error");
export type ErrorBody = z.infer<typeof ErrorBody>;

export const Timestamp = z.string().openapi({ description: "ISO 8601 UTC", example: "2026-11-23T09:00:00.000Z" });

/** A boolean query parameter: `true`/`1` or `false`/`0`. */
export const BooleanQuery = z
  .enum(["true", "false", "1", "0"])
  .transform((v) => v === "true" || v === "1")
  .openapi({ type: "boolean" });

/** The `cursor` query parameter of every paged listing (GET /api/queue, /api/audit, /api/training/events, /api/training/webhooks). */
export const CursorQuery = z.string().optional().openapi({
  description:
    "The previous page's `next_cursor`, for the next page; leave it out for the first page. Filters travel in the cursor: send none, or the same ones",
});

/** The `next_cursor` field of every paged listing's answer. */
export const NextCursor = z
  .string()
  .nullable()
  .openapi({ description: "Pass as `cursor` for the next page; null when this page is the last" });
