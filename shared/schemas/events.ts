import { z } from "@hono/zod-openapi";
import { CursorQuery, NextCursor } from "./common";

/** Largest event the edge stores, as JSON (a validation image as a data URI fits well within it); the runner fits events to it. */
export const MAX_EVENT_BYTES = 512 * 1024;

/** The most characters of a log line's `message`: a runner's trainer output and a cloud provider's log lines are cut alike. */
export const MAX_LOG_LINE_CHARS = 4000;

/**
 * One event as a trainer reported it: at least a `type`; a validation image's event carries
 * `images`, each `{src: data URI, mime_type}`.
 */
export const TrainerEvent = z
  .object({ type: z.string().min(1).max(100) })
  .catchall(z.unknown())
  .openapi("TrainerEvent", { example: { type: "training.progress", title: "Step 5/20", data: { step: 5, total_steps: 20, loss: 0.41 } } });

/** The most events one runner batch holds (EventBatch). */
export const MAX_BATCH_EVENTS = 500;

export const EventBatch = z
  .strictObject({
    attempt: z.number().int().min(1).openapi({ description: "The job attempt these events belong to (the assignment's attempt)" }),
    events: z
      .array(
        z.strictObject({
          seq: z
            .number()
            .int()
            .min(0)
            .openapi({ description: "The runner's own number for the event within this attempt, from 0; a resent event is stored once" }),
          event: TrainerEvent,
        }),
      )
      .min(1)
      .max(MAX_BATCH_EVENTS),
  })
  .openapi("EventBatch");

export const EventBatchStored = z
  .object({
    stored: z.number().int().openapi({ description: "Events of this batch stored now (those stored before are not counted again)" }),
    next_index: z.number().int(),
    // A default: a runner newer than its edge still reads the older answer.
    dropped: z.number().int().default(0).openapi({
      description:
        "Events of this batch counted and not stored: the job is past its cap, or its owner past their quota (GET /api/admin/event-limits). Taken all the same: do not send them again",
    }),
  })
  .openapi("EventBatchStored");

export const JobEvent = z
  .object({ index: z.number().int().openapi({ description: "Dense per job, from 0" }), timestamp: z.string(), type: z.string() })
  .catchall(z.unknown())
  .openapi("JobEvent");

const DEFAULT_JOB = "The job; default: your running job started last, else your job started last (a lead's or admin's: anyone's)";

export const EventsQuery = z.object({
  job_id: z
    .string()
    .max(200)
    .optional()
    .openapi({ description: `${DEFAULT_JOB}; a cursor keeps its job` }),
  // No default here: since_index and cursor are two ways to say where a page starts, and only one may be sent.
  since_index: z.coerce
    .number()
    .int()
    .min(0)
    .optional()
    .openapi({ description: "First index to return (default 0); or use `cursor`, not both" }),
  limit: z.coerce.number().int().min(1).max(1000).default(500),
  cursor: CursorQuery,
});

export const EventPage = z
  .object({
    job_id: z.string().nullable().openapi({
      description: "null: no job_id was named and you have no job that has started yet (then status is null, events empty, next_index 0)",
    }),
    status: z.string().nullable().openapi({ description: "The job's queue status now" }),
    events: z.array(JobEvent),
    next_index: z.number().int().openapi({
      description:
        "since_index for the next poll. A page stops at `limit` events or 1 MiB of them (at least one event), so fewer than `limit` does not mean the end: the end is an empty page",
    }),
    next_cursor: NextCursor.openapi({
      description:
        "cursor for the next page (the same job from next_index on). Null only once the job has ended and this page holds its last event; while it runs, the next page may be empty now and hold events later",
    }),
  })
  .openapi("EventPage");

/** The longest a stream opened before any job waits for one to start (edge/jobs/waiting-stream.ts). */
export const MAX_WAIT_SECONDS = 300;

export const StreamQuery = z.object({
  job_id: z.string().max(200).optional().openapi({ description: DEFAULT_JOB }),
  since_index: z.coerce.number().int().min(0).default(0).openapi({ description: "First index to send (Last-Event-ID, when sent, wins)" }),
  wait_seconds: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_WAIT_SECONDS)
    .default(MAX_WAIT_SECONDS)
    .openapi({
      description: `Without job_id and with no job started yet: how long the stream waits for your next job to start before it ends (1 to ${MAX_WAIT_SECONDS} s)`,
    }),
});

/** Defaults of the bounds on stored events (GET/PUT /api/admin/event-limits). */
export const EVENT_LIMITS_DEFAULTS = {
  max_events_per_job: 50_000,
  max_bytes_per_job: 64 * 1024 ** 2,
  max_bytes_per_user: 1024 ** 3,
  retention_days: 30,
};

const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const retentionDays = z.number().int().min(1).max(3650);

export const EventLimits = z
  .object({
    max_events_per_job: count.openapi({
      description: "The most events one job stores, all its attempts together; past it only lifecycle events are stored",
      example: EVENT_LIMITS_DEFAULTS.max_events_per_job,
    }),
    max_bytes_per_job: count.openapi({
      description: "The most bytes of events (their JSON) one job stores; past it only lifecycle events are stored",
      example: EVENT_LIMITS_DEFAULTS.max_bytes_per_job,
    }),
    max_bytes_per_user: count.openapi({
      description: "The most bytes of events one user's jobs store together; past it their jobs store only lifecycle events",
      example: EVENT_LIMITS_DEFAULTS.max_bytes_per_user,
    }),
    retention_days: retentionDays.openapi({
      description: "Days an ended job's events are kept after it ended; then they are deleted (the job stays in the queue's history)",
      example: EVENT_LIMITS_DEFAULTS.retention_days,
    }),
  })
  .openapi("EventLimits");
export type EventLimits = z.infer<typeof EventLimits>;

export const EventLimitsUpdate = z
  .strictObject({
    max_events_per_job: count.optional(),
    max_bytes_per_job: count.optional(),
    max_bytes_per_user: count.optional(),
    retention_days: retentionDays.optional(),
  })
  .openapi("EventLimitsUpdate", { example: { max_events_per_job: 100_000, retention_days: 90 } });
