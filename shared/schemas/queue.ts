import { BudgetStanding } from "./spend";
import { z } from "@hono/zod-openapi";
import { BooleanQuery, CursorQuery, NextCursor, Timestamp } from "./common";

export const JOB_STATUSES = ["pending", "running", "blocked", "completed", "failed", "cancelled"] as const;
export const ACTIVE_STATUSES = ["pending", "running", "blocked"] as const;
export const TERMINAL_STATUSES = ["completed", "failed", "cancelled"] as const;
export const JobStatus = z.enum(JOB_STATUSES);
/** The orders of GET /api/queue: scheduling (running, pending, blocked, ended; then priority, queued_at, id) or submitted (id). */
export const QUEUE_ORDERS = ["scheduling", "submitted"] as const;

export const WAIT_REASONS = [
  "awaiting_approval",
  "local_paused",
  "global_limit",
  "user_limit",
  "team_limit",
  "local_job_limit",
  "local_gpu_limit",
  "gpus_busy",
  "insufficient_gpus",
  "no_local_box",
  "no_matching_worker",
  "trainer_unavailable",
  "workers_busy",
  "reserved",
  "spending_limit",
  "not_scheduled_yet",
] as const;
export const WaitReason = z.enum(WAIT_REASONS).openapi({
  description:
    "Why a job waits: a limit (global_limit, user_limit, team_limit, local_job_limit, local_gpu_limit), capacity (gpus_busy, workers_busy, reserved for a job starving ahead of it), a job that cannot fit as configured (insufficient_gpus, no_local_box, no_matching_worker, trainer_unavailable: no box that could take it can run its trainer, e.g. SimpleTuner is not installed there), spending_limit (a cloud job's estimate would pass the cloud spending limit of this period), awaiting_approval, local_paused (a running local job was cancelled: local jobs wait for POST /api/queue/process), or not_scheduled_yet (submitted a moment ago).",
});
export type WaitReason = z.infer<typeof WaitReason>;

/** The concurrency limits, fair share and approval settings plus the scheduler's own settings; all persisted. */
export const ConcurrencySettings = z
  .object({
    max_concurrent: z.number().int().min(0).max(10_000).openapi({ description: "Running cloud jobs, global" }),
    user_max_concurrent: z.number().int().min(0).max(10_000).openapi({ description: "Running cloud jobs per user" }),
    team_max_concurrent: z.number().int().min(0).max(10_000).openapi({ description: "Running jobs per team, with enable_fair_share" }),
    enable_fair_share: z.boolean(),
    local_gpu_max_concurrent: z
      .number()
      .int()
      .min(0)
      .max(1024)
      .nullable()
      .openapi({ description: "GPUs used by local jobs; null = unlimited" }),
    local_job_max_concurrent: z.number().int().min(0).max(1024).openapi({ description: "Simultaneous local jobs" }),
    starvation_threshold_minutes: z.number().min(0).max(10_080).openapi({
      description:
        "Every full threshold a job waits adds 10 to its priority (at most +30), and a job that has waited it gets a reservation (backfill); 0 turns both off. Fractions are allowed (0.5 = 30 s)",
    }),
    worker_heartbeat_timeout_seconds: z
      .number()
      .int()
      .min(1)
      .max(86_400)
      .openapi({ description: "A worker silent this long goes offline and its jobs are retried" }),
  })
  .openapi("ConcurrencySettings");
export type ConcurrencySettings = z.infer<typeof ConcurrencySettings>;

export const CONCURRENCY_DEFAULTS: ConcurrencySettings = {
  max_concurrent: 5,
  user_max_concurrent: 2,
  team_max_concurrent: 10,
  enable_fair_share: false,
  local_gpu_max_concurrent: null,
  local_job_max_concurrent: 1,
  starvation_threshold_minutes: 60,
  worker_heartbeat_timeout_seconds: 90,
};

export const ConcurrencyUpdate = ConcurrencySettings.partial()
  .strict()
  .openapi("ConcurrencyUpdate", { example: { user_max_concurrent: 3, local_gpu_max_concurrent: 4 } });

export const ApprovalRules = z
  .object({
    cloud_cost_threshold: z
      .number()
      .min(0)
      .nullable()
      .openapi({ description: "Cloud jobs estimated at this many dollars or more need approval; null = never" }),
    local_gpu_threshold: z
      .number()
      .int()
      .min(0)
      .nullable()
      .openapi({ description: "Local jobs asking for more GPUs than this need approval; null = never" }),
  })
  .openapi("ApprovalRules");
export type ApprovalRules = z.infer<typeof ApprovalRules>;
export const APPROVAL_DEFAULTS: ApprovalRules = { cloud_cost_threshold: 50, local_gpu_threshold: null };
export const ApprovalRulesUpdate = ApprovalRules.partial()
  .strict()
  .openapi("ApprovalRulesUpdate", { example: { local_gpu_threshold: 4 } });

const Labels = z.record(z.string().min(1).max(64), z.string().max(256));

/** How a running job's expected end was estimated (edge/jobs/estimate.ts). */
/** What happens to a job marked stalled (edge/jobs/stall.ts). */
export const STALL_POLICIES = ["notify", "stop_and_requeue", "fail"] as const;
export const StallPolicy = z.enum(STALL_POLICIES).openapi("StallPolicy", {
  description:
    "notify: mark it stalled only (an event, its webhooks, the badge); stop_and_requeue: also ask its trainer to save a checkpoint and stop (as POST /api/training/stop), then queue it again to resume from that checkpoint (an attempt of its max_attempts); fail: also end it failed",
});
export type StallPolicy = z.infer<typeof StallPolicy>;

export const StallRules = z
  .object({
    min_seconds: z
      .number()
      .int()
      .min(1)
      .max(7 * 86_400)
      .openapi({
        description: "The shortest time without a training step that marks a running job stalled, in seconds (default 600)",
        example: 600,
      }),
    factor: z.number().min(1).max(1000).openapi({
      description: "A job is stalled after max(min_seconds, factor x its median time per step) without a step (default 5)",
      example: 5,
    }),
    policy: StallPolicy.openapi({ description: "The policy for users who chose none (default notify)" }),
  })
  .openapi("StallRules");
export type StallRules = z.infer<typeof StallRules>;
export const STALL_DEFAULTS: StallRules = { min_seconds: 600, factor: 5, policy: "notify" };
export const StallRulesUpdate = StallRules.partial()
  .strict()
  .openapi("StallRulesUpdate", { example: { min_seconds: 900, policy: "stop_and_requeue" } });

export const UserStallPolicy = z
  .object({
    user_id: z.number().int(),
    policy: StallPolicy.nullable().openapi({ description: "The user's own choice; null: the service's default applies" }),
    effective: StallPolicy.openapi({ description: "What applies to the user's stalled jobs now" }),
  })
  .openapi("UserStallPolicy");
export const UserIdParam = z.object({
  user_id: z.coerce
    .number()
    .int()
    .min(1)
    .openapi({ param: { name: "user_id", in: "path" }, example: 7 }),
});
export const UserStallPolicyUpdate = z
  .strictObject({ policy: StallPolicy.nullable().openapi({ description: "null: use the service's default" }) })
  .openapi("UserStallPolicyUpdate", { example: { policy: "stop_and_requeue" } });

export const END_METHODS = ["progress", "max_runtime", "cost_cap", "recent_runs"] as const;
/** How a waiting job's expected run time was estimated (edge/jobs/estimate.ts). */
export const DURATION_METHODS = ["max_runtime", "recent_runs"] as const;

/** A job's chain of retries: the first job and every retry of it (or of a retry of it). */
export const Lineage = z
  .object({
    id: z.string().openapi({ description: "The lineage's id: the job_id of its first job, shared by all its retries" }),
    jobs: z.array(z.string()).openapi({ description: "Its jobs' ids, oldest first" }),
    gpu_hours: z.number().openapi({
      description:
        "GPU-hours of all its jobs: each started job's GPUs (num_processes; 0 for a CPU job) times the time from its last attempt's start to its end (or now while running)",
    }),
    cost: z
      .number()
      .openapi({ description: "The cost of all its jobs in USD: cloud jobs' provider cost (local and worker jobs cost 0 here)" }),
  })
  .openapi("Lineage");
export type Lineage = z.infer<typeof Lineage>;

export const QueueEntry = z
  .object({
    id: z.number().int(),
    job_id: z.string(),
    user_id: z.number().int().nullable(),
    owner: z.string().nullable().openapi({ description: "The submitter's username" }),
    team_id: z.string().nullable(),
    provider: z.string().nullable(),
    config_name: z.string().nullable(),
    priority: z.number().int(),
    priority_override: z.number().int().nullable(),
    effective_priority: z
      .number()
      .int()
      .openapi({ description: "What the scheduler orders by: override or level priority, plus the starvation boost" }),
    status: JobStatus,
    position: z.number().int().nullable().openapi({ description: "Live place among waiting jobs (1 = next); null unless pending" }),
    wait_reason: WaitReason.nullable(),
    wait_message: z.string().nullable(),
    queued_at: Timestamp,
    started_at: Timestamp.nullable(),
    completed_at: Timestamp.nullable(),
    estimated_cost: z.number(),
    requires_approval: z.boolean(),
    approval_id: z.number().int().nullable(),
    attempt: z.number().int(),
    max_attempts: z.number().int(),
    error_message: z.string().nullable(),
    metadata: z.record(z.string(), z.unknown()).nullable(),
    allocated_gpus: z.array(z.number().int()).nullable(),
    job_type: z.enum(["local", "cloud"]),
    num_processes: z.number().int(),
    target: z.enum(["auto", "worker", "local"]),
    worker_labels: Labels.nullable(),
    device_ids: z.array(z.number().int()).nullable(),
    any_gpu: z.boolean(),
    worker_id: z.number().int().nullable(),
    worker_name: z.string().nullable(),
    expected_end_at: Timestamp.nullable().openapi({
      description:
        "While running: when the job is expected to end, an estimate (see expected_end_method) that moves as it reports progress and may be passed; null when unknown or not running",
    }),
    expected_end_method: z.enum(END_METHODS).nullable().openapi({
      description:
        "How expected_end_at was estimated: progress (the last reported step, the steps left and the step rate averaged over about the last 2 minutes, the first rate counting the time since the start, model loading included), cost_cap (a cloud job: the provider's start, else its admission, plus the run time its cost estimate assumed; the provider gives no estimate of its own), max_runtime (the start plus the environment's --max_runtime_minutes), or recent_runs (until its first progress: the start plus the run time expected from recent runs when it started, as expected_minutes); null with expected_end_at",
    }),
    expected_minutes: z.number().nullable().openapi({
      description:
        "While pending: how many minutes the job is expected to run once started, as the scheduler's last pass estimated it (see expected_minutes_method); null when unknown or not pending. A job submitted since that pass shows only its --max_runtime_minutes until the next one (within 5 s)",
    }),
    expected_minutes_method: z.enum(DURATION_METHODS).nullable().openapi({
      description:
        "How expected_minutes was estimated: max_runtime (the environment's --max_runtime_minutes at submit) or recent_runs (from the last 5 completed runs of the same environment on as many GPUs within 30 days: the job's --max_train_steps times their median time per step when both have steps, else their median run time); null with expected_minutes",
    }),
    stalled_since: Timestamp.nullable().openapi({
      description:
        "While running and marked stalled: since when it has been quiet, its last training step or the end of a validation or checkpoint after it (no step since, outside a validation or checkpoint, for longer than the stall threshold: GET /api/admin/stall-detection); null otherwise. Cleared by its next step",
    }),
    expected_start_at: Timestamp.nullable().openapi({
      description:
        "While pending: when the job is expected to start, from the scheduler's last pass run forward in time (the running jobs' expected ends, the jobs ahead of it with their expected run times, the limits and reservations; see expected_start_basis). An estimate: it moves as jobs report progress, end early or late, or others are submitted ahead. null when unknown (expected_start_basis says why) or not pending",
    }),
    expected_start_basis: z.string().nullable().openapi({
      description:
        "How expected_start_at was estimated, in words: e.g. `after local-ab12 ends (expected 2026-11-27T14:20Z)`; or `unknown: ...` with the reason (a job ahead has no run-time estimate, a running job has no expected end, no box can ever fit it, local jobs are paused); for a blocked job `unknown: waits for an admin's approval`. null unless pending or blocked. Shown in full entries only (it names other jobs)",
      example: "after local-ab12cd34ef56 ends (expected 2026-11-27T14:20Z)",
    }),
    expected_run_seconds: z.number().nullable().openapi({
      description:
        "While pending or blocked: how long the job is expected to run once started, in seconds (expected_minutes × 60): its --max_runtime_minutes, else its --max_train_steps × the time per step of its environment's recent runs on as many GPUs (else their run time); null when unknown",
    }),
    expected_run_basis: z.string().nullable().openapi({
      description:
        "How expected_run_seconds was estimated, in words: `its --max_runtime_minutes (90)`, `its 1000 steps × 1.20 s per step, the median time per step of the last 3 completed runs of sdxl on 2 GPU(s)`, or `unknown: ...`; null unless pending or blocked",
    }),
    retry_of: z.string().nullable().optional().openapi({
      description: "The job this one retries (POST /api/queue/{job_id}/retry); null for a submission",
    }),
    lineage: Lineage.optional().openapi({
      description: "GET /api/queue/jobs/{job_id} only, for those who may read the job in full: the chain of retries it belongs to",
    }),
  })
  .openapi("QueueEntry");
export type QueueEntry = z.infer<typeof QueueEntry>;

/** What anyone may see of another user's job; the other fields are for its owner, leads and admins. */
export const PUBLIC_QUEUE_FIELDS = [
  "id",
  "job_id",
  "user_id",
  "owner",
  "status",
  "priority",
  "effective_priority",
  "position",
  "wait_reason",
  "wait_message",
  "expected_start_at",
  "queued_at",
] as const;
export const PublicQueueEntry = QueueEntry.pick(
  Object.fromEntries(PUBLIC_QUEUE_FIELDS.map((f) => [f, true])) as { [K in (typeof PUBLIC_QUEUE_FIELDS)[number]]: true },
).openapi("PublicQueueEntry", {
  description: "Another user's job as researchers and viewers see it: only the public fields",
});
export type PublicQueueEntry = z.infer<typeof PublicQueueEntry>;

export const QueueList = z
  .object({
    jobs: z.array(z.union([QueueEntry, PublicQueueEntry])).openapi({
      description: "Your own jobs in full; other users' jobs with the public fields only (leads and admins see every job in full)",
    }),
    total: z.number().int().openapi({ description: "Entries matching the filter, on every page" }),
    next_cursor: NextCursor,
  })
  .openapi("QueueList");

export const QueueListQuery = z.object({
  status: z.enum(ACTIVE_STATUSES).optional().openapi({ description: "Only entries in this status" }),
  limit: z.coerce.number().int().min(1).max(1000).default(50).openapi({ description: "Entries per page (1 to 1000, default 50)" }),
  // No default here: with a cursor, an absent filter means "as the cursor's walk" (edge/paging.ts continueFilters).
  include_completed: BooleanQuery.optional().openapi({ description: "Also list completed, failed and cancelled entries (default false)" }),
  order: z.enum(QUEUE_ORDERS).optional().openapi({
    description:
      "scheduling (default): running, pending, blocked, then ended entries, each by priority, queued_at, id. submitted: by id, oldest first",
  }),
  user: z.string().min(1).max(254).optional().openapi({ description: "Only this user's entries (a username)" }),
  cursor: CursorQuery,
});

export const LocalStats = z.object({
  running_jobs: z.number().int(),
  pending_jobs: z.number().int(),
  allocated_gpus: z.array(z.number().int()),
  available_gpus: z.array(z.number().int()),
  total_gpus: z.number().int(),
  max_concurrent_gpus: z.number().int().nullable(),
  max_concurrent_jobs: z.number().int(),
});

export const QueueStats = z
  .object({
    queue_depth: z.number().int().openapi({ description: "Pending cloud jobs" }),
    running: z.number().int().openapi({ description: "Running cloud jobs" }),
    max_concurrent: z.number().int(),
    user_max_concurrent: z.number().int(),
    avg_wait_seconds: z.number().openapi({ description: "Mean queued_at -> started_at over started jobs of the last 7 days" }),
    by_status: z.record(z.string(), z.number().int()),
    by_user: z.record(z.string(), z.number().int()).openapi({ description: "Active (pending, running, blocked) entries per user id" }),
    local_gpu_max_concurrent: z.number().int().nullable(),
    local_job_max_concurrent: z.number().int(),
    local: LocalStats,
  })
  .openapi("QueueStats");

export const MyQueue = z
  .object({
    pending_count: z.number().int(),
    running_count: z.number().int(),
    blocked_count: z.number().int(),
    best_position: z.number().int().nullable(),
    pending_jobs: z.array(QueueEntry),
    running_jobs: z.array(QueueEntry),
    blocked_jobs: z.array(QueueEntry),
  })
  .openapi("MyQueue");

export const Position = z
  .object({
    job_id: z.string(),
    status: JobStatus,
    position: z.number().int().nullable(),
    waiting_ahead: z.number().int().nullable().openapi({ description: "Jobs that will be considered before this one" }),
    wait_reason: WaitReason.nullable(),
    wait_message: z.string().nullable(),
    effective_priority: z.number().int(),
    expected_start_at: Timestamp.nullable().openapi({
      description: "As in the queue listing: when it is expected to start; null when unknown or not pending",
    }),
    expected_start_basis: z
      .string()
      .nullable()
      .openapi({ description: "How expected_start_at was estimated (as in the listing); null unless you may read the job in full" }),
  })
  .openapi("Position");

export const JobIdParam = z.object({
  job_id: z
    .string()
    .min(1)
    .max(200)
    .openapi({ param: { name: "job_id", in: "path" }, example: "local-3f9c2a1b" }),
});

export const RejectQuery = z.object({ reason: z.string().trim().min(1, "a reason is required").max(1000) });

export const PriorityUpdate = z
  .strictObject({
    priority: z
      .number()
      .int()
      .min(0)
      .max(100)
      .nullable()
      .openapi({ description: "The new priority_override; null returns to the level's priority" }),
  })
  .openapi("PriorityUpdate", { example: { priority: 25 } });

export const CleanupQuery = z.object({ days: z.coerce.number().int().min(1).max(365).default(30) });
export const CleanupResult = z.object({ success: z.boolean(), deleted: z.number().int(), days: z.number().int() }).openapi("CleanupResult");

export const ProcessResult = z
  .object({
    success: z.literal(true),
    started: z.array(z.string()).openapi({ description: "Job ids admitted by this pass" }),
    waiting: z.number().int(),
  })
  .openapi("ProcessResult");

export const LocalSubmit = z
  .strictObject({
    config_name: z.string().min(1).max(64).openapi({ example: "flux-lora" }),
    no_wait: z.boolean().default(false),
    any_gpu: z.boolean().default(false),
    target: z.enum(["auto", "worker", "local"]).default("auto"),
    worker_labels: Labels.optional().openapi({
      description: "Label requirements; values are globs where * matches any characters",
      example: { gpu: "a100*" },
    }),
    metadata: z.record(z.string(), z.unknown()).optional(),
    dry_run: z.boolean().default(false).openapi({
      description: "Only answer what would happen now (status, GPUs or worker, position, wait reason); nothing is stored",
    }),
  })
  .openapi("LocalSubmit", { example: { config_name: "demo", target: "auto", no_wait: false } });
export type LocalSubmit = z.infer<typeof LocalSubmit>;

export const LocalSubmitResult = z
  .object({
    success: z.boolean(),
    dry_run: z.boolean().openapi({ description: "true: what would happen; nothing was stored (job_id is null)" }),
    job_id: z.string().nullable(),
    status: z.enum(["running", "queued", "rejected", "blocked"]).openapi({ description: "blocked: waits for an admin's approval" }),
    allocated_gpus: z.array(z.number().int()).nullable(),
    worker_id: z.number().int().nullable(),
    queue_position: z.number().int().nullable(),
    wait_reason: WaitReason.nullable(),
    message: z.string(),
    expected_start_at: Timestamp.nullable().optional().openapi({
      description:
        "Dry run of a job that would wait: when it would be expected to start, as the queue listing estimates it; null when unknown (see expected_start_basis), and absent when it would start at once (status running) and on a real submission (GET /api/queue/jobs/{job_id} has it after the next pass)",
    }),
    expected_start_basis: z
      .string()
      .nullable()
      .optional()
      .openapi({ description: "Dry run only: how expected_start_at was estimated, or `unknown: ...` with the reason" }),
    expected_run_seconds: z
      .number()
      .nullable()
      .optional()
      .openapi({ description: "Dry run only: how long it would be expected to run, in seconds; null when unknown" }),
    expected_run_basis: z
      .string()
      .nullable()
      .optional()
      .openapi({ description: "Dry run only: how expected_run_seconds was estimated, or `unknown: ...`" }),
    budget: BudgetStanding.nullable().optional().openapi({
      description: "The tightest budget of yours or your team's (absent when none is set): `warning` from 80 % used, `exceeded` at 100 %",
    }),
  })
  .openapi("LocalSubmitResult", {
    example: {
      success: true,
      dry_run: false,
      job_id: "local-3f9c2a1b04de",
      status: "queued",
      allocated_gpus: null,
      worker_id: null,
      queue_position: 3,
      wait_reason: "gpus_busy",
      message: "queued: needs 2 GPU(s) of [0, 1]; free now: []",
    },
  });
export type LocalSubmitResult = z.infer<typeof LocalSubmitResult>;

/** GET /api/queue/jobs/{job_id}: your own job in full; another user's with the public fields (leads and admins: any in full). */
export const QueueJob = z.union([QueueEntry, PublicQueueEntry]).openapi("QueueJob");

/** POST /api/queue/{job_id}/retry: the new job, decided as a submission is, with what it continues. */
export const RetryResult = LocalSubmitResult.extend({
  retry_of: z.string().openapi({ description: "The job retried" }),
  lineage_id: z.string().openapi({ description: "The lineage both belong to (the job_id of its first job)" }),
  resume_from: z.object({ job_id: z.string(), checkpoint: z.string(), step: z.number().nullable() }).nullable().openapi({
    description:
      "The newest intact checkpoint the new job resumes from (a checkpoint.saved event was recorded for it); the runner takes it, or the next older one it still finds on its disk; null: none recorded, it starts from step 0",
  }),
}).openapi("RetryResult");
export type RetryResult = z.infer<typeof RetryResult>;

export const JobActionResult = z.object({ success: z.literal(true), job: QueueEntry }).openapi("JobActionResult");

export const QueueHistoryQuery = z.object({
  hours: z.coerce.number().int().min(1).max(168).default(24).openapi({ description: "How far back, in hours (1 to 168, default 24)" }),
});

export const QueueHistory = z
  .object({
    hours: z.number().int(),
    bucket_seconds: z.number().int().openapi({ description: "Bucket length: 300 up to 6 hours, else 1800" }),
    buckets: z.array(
      z.object({
        at: z
          .number()
          .int()
          .openapi({ description: "The bucket's end, unix seconds (a multiple of bucket_seconds; the last is at or after now)" }),
        depth: z.number().int().openapi({ description: "Jobs waiting (pending or blocked) at `at`; for the last bucket, now" }),
        started: z.number().int().openapi({ description: "Jobs started within the bucket" }),
        mean_wait_seconds: z
          .number()
          .nullable()
          .openapi({ description: "Mean queued_at -> started_at of those jobs; null when none started" }),
      }),
    ),
    truncated: z
      .boolean()
      .openapi({ description: "true when more entries matched than one history reads (50,000): the oldest buckets undercount" }),
  })
  .openapi("QueueHistory");
