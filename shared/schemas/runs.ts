import { z } from "@hono/zod-openapi";
import { Timestamp } from "./common";

/*
 * Runs (issue 29, Build 3): a started job seen as a training run, with the metric series and
 * validation images its trainer reported, for comparing runs side by side.
 */

/** The most runs one GET /api/runs answers. */
export const MAX_RUNS = 200;
/** The most points a series answers by default, and at most. */
export const DEFAULT_SERIES_POINTS = 1000;
export const MAX_SERIES_POINTS = 5000;

export const RunStatus = z.enum(["running", "completed", "failed", "cancelled"]);

export const RunsQuery = z.object({
  environment: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .openapi({ description: "Only the runs of this environment (the job's config_name)", example: "demo" }),
  status: RunStatus.optional().openapi({ description: "Only runs in this status" }),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_RUNS)
    .default(50)
    .openapi({ description: `Newest first, at most this many (1 to ${MAX_RUNS}, default 50)` }),
});

export const Run = z
  .object({
    job_id: z.string(),
    environment: z.string().nullable().openapi({ description: "The environment it ran (config_name)" }),
    user_id: z.number().int().nullable(),
    username: z.string().nullable(),
    status: RunStatus,
    started_at: Timestamp,
    completed_at: Timestamp.nullable(),
    duration_seconds: z.number().nullable().openapi({ description: "Started to ended; for a running job, to now" }),
    final_step: z.number().nullable().openapi({ description: "The last step it reported" }),
    final_loss: z.number().nullable().openapi({ description: "The loss it reported at its last step with one" }),
    kept: z.boolean().openapi({ description: "Its series and images are kept apart from its event log (which retention deleted or will)" }),
  })
  .openapi("Run");

export const RunList = z.object({ runs: z.array(Run) }).openapi("RunList");

export const RunParams = z.object({
  job_id: z
    .string()
    .min(1)
    .max(200)
    .openapi({ param: { name: "job_id", in: "path" }, example: "local-3f9c2a1b04de" }),
});

export const RunDetail = Run.extend({
  config: z.record(z.string(), z.unknown()).nullable().openapi({
    description: "The option map snapshotted at submit, secret-looking values masked (`********`); null for a job without a snapshot",
  }),
}).openapi("RunDetail");

export const RunSeriesQuery = z.object({
  points: z.coerce
    .number()
    .int()
    .min(2)
    .max(MAX_SERIES_POINTS)
    .default(DEFAULT_SERIES_POINTS)
    .openapi({ description: `The most points answered (2 to ${MAX_SERIES_POINTS}, default ${DEFAULT_SERIES_POINTS})` }),
});

export const RunPoint = z
  .object({
    step: z.number(),
    seconds: z.number().openapi({ description: "Seconds from the job's first event to this step's" }),
    loss: z.number().nullable(),
    lr: z.number().nullable(),
    step_time: z.number().nullable().openapi({ description: "Seconds per step, as the trainer reported it" }),
  })
  .openapi("RunPoint");

export const RunSeries = z
  .object({
    job_id: z.string(),
    total_points: z.number().int().openapi({ description: "How many steps the run reported" }),
    stride: z.number().int().openapi({ description: "1: every point; n: every n-th point (and always the last)" }),
    points: z.array(RunPoint),
  })
  .openapi("RunSeries");

export const RunImage = z
  .object({
    n: z.number().int().openapi({ description: "The image's number in the run, from 0" }),
    step: z.number().nullable(),
    prompt: z.string().nullable(),
    index: z.number().int().openapi({ description: "Its place among the images of the same prompt and step, from 0" }),
    mime_type: z.string(),
    url: z.string().openapi({ description: "Its bytes: GET this path with the same credential" }),
  })
  .openapi("RunImage");

export const RunValidations = z.object({ job_id: z.string(), images: z.array(RunImage) }).openapi("RunValidations");

export const RunImageParams = RunParams.extend({
  n: z.coerce
    .number()
    .int()
    .min(0)
    .openapi({ param: { name: "n", in: "path", required: true }, example: 0 }),
});
