import { z } from "@hono/zod-openapi";
import { QueueEntry } from "./queue";

/** The job a training-control call acts on (JSON or form body, or the query string). */
export const JobRef = z.object({
  job_id: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .openapi({ description: "The job; default: your running job started last (a lead's or admin's: anyone's)" }),
});

/** The answer of a training command (validation/run, checkpoint/run, stop) and of POST /api/training/cancel. */
export const TrainingCommandAnswer = z
  .object({ success: z.literal(true), job_id: z.string(), message: z.string() })
  .openapi("TrainingCommandAnswer");

export const TrainingStatusQuery = z.object({ job_id: z.string().max(200).optional() });

/** GET /api/training/status: the high-level state of one job. */
export const TrainingStatus = z
  .object({
    state: z.string().openapi({ description: "idle (nothing running or queued), running, queued, or the job's final status" }),
    job_id: z.string().nullable(),
    status: z.string().nullable(),
    config_name: z.string().nullable(),
    startup_stage: z.string().nullable().openapi({
      description:
        "While running: launching (the runner has it, the trainer has said nothing yet), starting (the trainer is up: it has printed or reported something, no step yet), training (steps are coming)",
    }),
    startup_phase: z.string().nullable().openapi({
      description:
        "While starting: the phase the trainer last reported (SimpleTuner's start-up stages, e.g. `Loading base model`, from its training.stage events); else null",
      example: "Configuring data backends... (this may take a while!)",
    }),
    progress: z
      .object({ step: z.unknown(), total_steps: z.unknown(), percent: z.unknown(), loss: z.unknown(), epoch: z.unknown() })
      .nullable(),
    events: z.number().int(),
    events_bytes: z.number().int().openapi({ description: "Bytes of the job's stored events (their JSON)" }),
    events_dropped: z.number().int().openapi({
      description:
        "Events counted and not stored: past the job's event cap or its owner's quota (GET /api/admin/event-limits); an events.truncated event marks where",
    }),
    attempt: z.number().int().nullable(),
    allocated_gpus: z.array(z.number().int()).nullable(),
    started_at: z.string().nullable(),
    completed_at: z.string().nullable(),
    error_message: z.string().nullable(),
    expected_end_at: QueueEntry.shape.expected_end_at,
    expected_end_method: QueueEntry.shape.expected_end_method,
  })
  .openapi("TrainingStatus");

// ---- validate and start (POST /api/training/validate and /start) ----

export const TrainingForm = z.record(z.string(), z.unknown()).openapi("TrainingForm", {
  description: 'Every option as a field named with its "--" prefix, plus __active_tab__',
  example: { "--max_train_steps": "2000", "--learning_rate": "0.0001", "--validation_preview": "true", __active_tab__: "model" },
});
const FieldProblems = z.array(z.object({ field: z.string(), message: z.string() }));
export const ValidationResult = z
  .object({
    valid: z.boolean(),
    message: z.string().openapi({ example: "Configuration Valid" }),
    errors: FieldProblems,
    environment: z.string().openapi({
      description:
        "The environment start would write this configuration to and run: your active one, else your own inline-run-<user id> (created by start when needed). Its options play no part in the verdict, except the values that masked (`********`) form fields stand for",
    }),
    active_tab: z.string().nullable(),
    options: z
      .record(z.string(), z.unknown())
      .openapi({ description: "The options start would use (the form on top of the defaults), secret-looking values masked" }),
  })
  .openapi("TrainingValidation");
