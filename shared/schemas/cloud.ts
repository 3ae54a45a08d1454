import { BudgetStanding } from "./spend";
import { z } from "@hono/zod-openapi";
import { Timestamp } from "./common";

/*
 * Cloud training (README "Cloud training"): the cloud settings, the hardware rates, a
 * submission, the packaging summary and cost estimate shown before anything is uploaded, and the
 * cloud job record.
 */

/** The options whose value is a command line the trainer's scripts run (checkpoint, upload, external validation). */
export const SCRIPT_OPTIONS = ["--post_checkpoint_script", "--post_upload_script", "--validation_external_script"] as const;

/** A program a cloud job's script option may run: an absolute path inside the trainer's image or a bare name, `*` as a wildcard. */
const ScriptProgram = z
  .string()
  .min(1)
  .max(512)
  .regex(/^(\/[^\s]*|[A-Za-z0-9_.+*-]+)$/, "must be an absolute path (like /src/hooks/notify.sh, * allowed) or a bare program name")
  .refine((path) => !path.split("/").some((part) => part === "." || part === ".."), "must not contain . or .. segments");

/** The upload consent setting of the Cloud tab: ask for the summary's confirmation, allow without it, or never upload. */
export const CONSENT_MODES = ["ask", "allow", "never"] as const;
export const SPENDING_PERIODS = ["day", "week", "month"] as const;

const SecretName = z
  .string()
  .regex(/^[A-Z][A-Z0-9_]{0,127}$/, "must be a secret's name in upper case, like HF_TOKEN")
  .openapi({ description: "The name of a secret (environment, then secret files, then vault); never its value" });

export const PublishingSettings = z
  .object({
    hub: z.object({
      enabled: z.boolean().openapi({
        description:
          "Jobs may deliver their model to the model hub. Cloud jobs never may: the service cannot give one a hub token scoped to one repository and expiring with the job (submit answers 422 destination_unavailable)",
      }),
      endpoint: z.string().url().openapi({ description: "The hub's address (default https://huggingface.co)" }),
      token_secret: SecretName.openapi({ description: "The secret holding the hub token handed to the cloud job (default HF_TOKEN)" }),
    }),
    s3: z.object({
      enabled: z.boolean().openapi({
        description:
          "Jobs may deliver their model to this S3-compatible bucket. Cloud jobs never may: the service cannot give one keys scoped to its prefix and expiring with the job (submit answers 422 destination_unavailable)",
      }),
      endpoint_url: z.string().url().nullable(),
      bucket: z.string().min(3).max(63).nullable(),
      region: z.string().min(1).max(64),
      prefix: z.string().max(256),
      access_key_secret: SecretName,
      secret_key_secret: SecretName,
    }),
  })
  .openapi("PublishingSettings");

export const CloudSettings = z
  .object({
    consent_mode: z.enum(CONSENT_MODES).openapi({
      description:
        "ask: every submission must carry the summary_id of the summary it confirms; allow: no confirmation; never: cloud training (any upload) is refused",
    }),
    spending_limit_usd: z.number().min(0).max(1_000_000).nullable().openapi({
      description: "The most the cloud may cost per period (finished jobs' costs plus running jobs' estimates); null: no limit",
    }),
    spending_period: z
      .enum(SPENDING_PERIODS)
      .openapi({ description: "The period the limit applies to (UTC calendar day, ISO week, month)" }),
    public_url: z.string().url().nullable().openapi({
      description:
        "The public HTTPS address providers and cloud jobs reach this service at (webhooks, result uploads); null: SERVICE_PUBLIC_URL",
    }),
    poll_interval_seconds: z
      .number()
      .int()
      .min(1)
      .max(3600)
      .openapi({ description: "How often each active cloud job is polled at its provider (webhooks make it immediate)" }),
    default_max_runtime_minutes: z.number().int().min(1).max(10_080).openapi({
      description:
        "The run time cost estimates assume when the environment sets no --max_runtime_minutes; a submission's max_runtime_minutes may raise it, and only an admin's may lower it",
    }),
    allowed_scripts: z
      .array(ScriptProgram)
      .max(100)
      .openapi({
        description:
          "The programs a cloud job's --post_checkpoint_script, --post_upload_script and --validation_external_script may run (the command's first word: an absolute path in the trainer's image, * a wildcard, or a bare name), as a GPU box declares its scripts; empty (the default): a cloud submission setting any of them is refused (422 script_not_allowed)",
        example: ["/src/hooks/notify.sh"],
      }),
    publishing: PublishingSettings,
  })
  .openapi("CloudSettings");
export type CloudSettings = z.infer<typeof CloudSettings>;

export const CLOUD_SETTINGS_DEFAULTS: CloudSettings = {
  consent_mode: "ask",
  spending_limit_usd: null,
  spending_period: "month",
  public_url: null,
  poll_interval_seconds: 30,
  default_max_runtime_minutes: 60,
  allowed_scripts: [],
  publishing: {
    hub: { enabled: false, endpoint: "https://huggingface.co", token_secret: "HF_TOKEN" },
    s3: {
      enabled: false,
      endpoint_url: null,
      bucket: null,
      region: "us-east-1",
      prefix: "",
      access_key_secret: "PUBLISH_S3_ACCESS_KEY_ID",
      secret_key_secret: "PUBLISH_S3_SECRET_ACCESS_KEY",
    },
  },
};

export const CloudSettingsUpdate = z
  .strictObject({
    consent_mode: CloudSettings.shape.consent_mode.optional(),
    spending_limit_usd: CloudSettings.shape.spending_limit_usd.optional(),
    spending_period: CloudSettings.shape.spending_period.optional(),
    public_url: CloudSettings.shape.public_url.optional(),
    poll_interval_seconds: CloudSettings.shape.poll_interval_seconds.optional(),
    default_max_runtime_minutes: CloudSettings.shape.default_max_runtime_minutes.optional(),
    allowed_scripts: CloudSettings.shape.allowed_scripts.optional(),
    publishing: z
      .strictObject({
        hub: PublishingSettings.shape.hub.partial().strict().optional(),
        s3: PublishingSettings.shape.s3.partial().strict().optional(),
      })
      .optional(),
  })
  .openapi("CloudSettingsUpdate", { example: { consent_mode: "allow", spending_limit_usd: 200, spending_period: "month" } });
export type CloudSettingsUpdate = z.infer<typeof CloudSettingsUpdate>;

/** USD per second of each hardware type (the provider bills per second). */
export const HardwareRates = z
  .record(z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/i), z.number().min(0).max(100))
  .openapi("HardwareRates", { example: { "gpu-a100-large": 0.0014, "gpu-l40s": 0.000975 } });
export type HardwareRates = z.infer<typeof HardwareRates>;

/** Replicate's published prices (USD per second) at the time of writing; admins edit them (PUT /api/cloud/rates). */
export const DEFAULT_HARDWARE_RATES: HardwareRates = {
  cpu: 0.0001,
  "gpu-t4": 0.000225,
  "gpu-l40s": 0.000975,
  "gpu-a100-large": 0.0014,
  "gpu-h100": 0.001525,
};

export const Destination = z
  .discriminatedUnion("type", [
    z.strictObject({ type: z.literal("storage") }).openapi({ description: "The built-in storage endpoint (per-job credentials)" }),
    z.strictObject({ type: z.literal("hub"), repo_id: z.string().regex(/^[\w.-]+\/[\w.-]+$/, "must be owner/name") }),
    z.strictObject({ type: z.literal("s3"), prefix: z.string().max(256).optional() }),
  ])
  .openapi("ResultDestination", { description: "Where the trained model is delivered" });
export type Destination = z.infer<typeof Destination>;

export const CloudSubmit = z
  .strictObject({
    config_name: z.string().min(1).max(128).openapi({ description: "The environment to train" }),
    provider: z.string().max(64).default("replicate"),
    destination: Destination.default({ type: "storage" }).openapi({
      description:
        'Where the model goes. Cloud jobs deliver only to {"type": "storage"} (per-job keys, scoped to the job\'s bucket and ending with it); hub and s3 are refused (422 destination_unavailable)',
    }),
    max_runtime_minutes: z.number().int().min(1).max(10_080).optional().openapi({
      description:
        "Expected run time for the estimate, the approval rule and the spending limit; at least the environment's --max_runtime_minutes (else the setting's default) unless you are an admin (422 runtime_below_environment)",
    }),
    dry_run: z.boolean().default(false).openapi({ description: "Only answer the summary and estimate; nothing is stored or uploaded" }),
    confirm_summary: z
      .string()
      .max(128)
      .optional()
      .openapi({ description: "With consent_mode ask: the summary_id of the summary being confirmed (from a dry run)" }),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .openapi("CloudSubmit");
export type CloudSubmit = z.infer<typeof CloudSubmit>;

export const PackageSummary = z
  .object({
    summary_id: z.string().openapi({ description: "Names exactly this summary: confirm it with confirm_summary" }),
    datasets: z.array(z.object({ id: z.string(), path: z.string(), files: z.number().int(), bytes: z.number().int() })),
    files: z.number().int(),
    bytes: z.number().int().openapi({ description: "Bytes of dataset files packaged" }),
    archive_bytes: z.number().int().openapi({ description: "Size of the zip uploaded to the provider" }),
    archive_limit_bytes: z.number().int(),
    excluded: z
      .array(z.object({ path: z.string(), reason: z.string() }))
      .openapi({ description: "Files never packaged (.env, .git, keys)" }),
  })
  .openapi("PackageSummary");
export type PackageSummary = z.infer<typeof PackageSummary>;

export const CostEstimate = z
  .object({
    hardware: z.string(),
    rate_usd_per_second: z.number(),
    expected_seconds: z.number().int(),
    estimated_cost_usd: z.number(),
    spending: z
      .object({
        limit_usd: z.number(),
        period: z.enum(SPENDING_PERIODS),
        period_start: Timestamp,
        committed_usd: z.number().openapi({ description: "Spent this period plus running and waiting jobs' estimates" }),
        remaining_usd: z.number(),
      })
      .nullable(),
  })
  .openapi("CostEstimate");
export type CostEstimate = z.infer<typeof CostEstimate>;

export const CloudSubmitAnswer = z
  .object({
    success: z.boolean(),
    dry_run: z.boolean(),
    job_id: z.string().nullable(),
    status: z.enum(["dry_run", "pending", "running", "blocked"]),
    message: z.string(),
    consent_mode: z.enum(CONSENT_MODES),
    summary: PackageSummary,
    estimate: CostEstimate,
    budget: BudgetStanding.nullable()
      .optional()
      .openapi({ description: "The tightest budget of yours or your team's (absent when none is set)" }),
  })
  .openapi("CloudSubmitAnswer");

/** A cloud job's phases at its provider, in order (the changes allowed between them: edge/cloud/phase.ts). */
export const CLOUD_PHASES = ["queued", "uploading", "submitting", "submitted", "running", "finished"] as const;

export const CloudJob = z
  .object({
    job_id: z.string(),
    provider: z.string(),
    provider_job_id: z.string().nullable(),
    status: z.enum(["pending", "running", "blocked", "completed", "failed", "cancelled"]),
    phase: z.enum(CLOUD_PHASES).openapi({
      description:
        "Where the job is at its provider: queued, uploading (its archive), submitting (the training create sent), submitted, running, finished (ended there; `status` says how)",
    }),
    provider_status: z.string().nullable(),
    upload_progress: z
      .number()
      .min(0)
      .max(1)
      .openapi({ description: "Share of the archive uploaded to the provider (1 when none is needed)" }),
    uploaded_bytes: z.number().int(),
    archive_bytes: z.number().int(),
    hardware: z.string(),
    rate_usd_per_second: z.number(),
    estimated_cost: z.number(),
    cost_usd: z
      .number()
      .openapi({ description: "Billed seconds times the rate; grows each second while running; final once the job ends" }),
    cost_final: z.boolean(),
    billed_seconds: z.number().nullable(),
    destination: Destination,
    summary: PackageSummary,
    queued_at: Timestamp,
    started_at: Timestamp.nullable(),
    completed_at: Timestamp.nullable(),
    provider_started_at: Timestamp.nullable(),
    provider_completed_at: Timestamp.nullable(),
    error_message: z.string().nullable(),
    archive_deleted: z.boolean(),
    output: z.unknown(),
  })
  .openapi("CloudJob");
export type CloudJob = z.infer<typeof CloudJob>;
