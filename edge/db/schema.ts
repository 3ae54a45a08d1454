import { integer, primaryKey, real, sqliteTable, text } from "drizzle-orm/sqlite-core";

/*
 * The drizzle view of the schema built by ./migrations. The migrations are the source of truth;
 * this file must describe what they create (test/local/migrations.test.ts compares the two).
 * Timestamps are ISO 8601 UTC text.
 */

export const queueEntries = sqliteTable("queue_entries", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  jobId: text("job_id").notNull().unique(),
  userId: integer("user_id"),
  teamId: text("team_id"),
  provider: text("provider").default("replicate"),
  configName: text("config_name"),
  priority: integer("priority").notNull().default(10),
  priorityOverride: integer("priority_override"),
  status: text("status").notNull().default("pending"),
  position: integer("position").notNull().default(0),
  queuedAt: text("queued_at").notNull(),
  startedAt: text("started_at"),
  completedAt: text("completed_at"),
  estimatedCost: real("estimated_cost").notNull().default(0),
  requiresApproval: integer("requires_approval").notNull().default(0),
  approvalId: integer("approval_id"),
  attempt: integer("attempt").notNull().default(1),
  maxAttempts: integer("max_attempts").notNull().default(3),
  errorMessage: text("error_message"),
  metadata: text("metadata"),
  allocatedGpus: text("allocated_gpus"),
  jobType: text("job_type").notNull().default("cloud"),
  numProcesses: integer("num_processes").notNull().default(1),
  target: text("target").notNull().default("auto"),
  workerLabels: text("worker_labels"),
  deviceIds: text("device_ids"),
  anyGpu: integer("any_gpu").notNull().default(0),
  workerId: integer("worker_id"),
  updatedAt: text("updated_at"),
  configSnapshot: text("config_snapshot"),
  dataloaderSnapshot: text("dataloader_snapshot"),
  expectedEndAt: text("expected_end_at"),
  expectedEndMethod: text("expected_end_method"),
  progressRate: text("progress_rate"),
  retryOf: text("retry_of"),
  lineageId: text("lineage_id"),
  resumeFrom: text("resume_from"),
  stallWatch: text("stall_watch"),
  stalledSince: text("stalled_since"),
  stallAction: text("stall_action"),
});

export const approvalRequests = sqliteTable("approval_requests", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  entryId: integer("entry_id").notNull(),
  jobId: text("job_id").notNull(),
  rule: text("rule").notNull(),
  status: text("status").notNull().default("pending"),
  requestedAt: text("requested_at").notNull(),
  decidedAt: text("decided_at"),
  decidedBy: integer("decided_by").references(() => users.id),
  reason: text("reason"),
});

export const jobEvents = sqliteTable("job_events", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  jobId: text("job_id").notNull(),
  idx: integer("idx").notNull(),
  attempt: integer("attempt").notNull(),
  seq: integer("seq").notNull(),
  type: text("type").notNull(),
  payload: text("payload").notNull(),
  createdAt: text("created_at").notNull(),
});

/** What each job's event log holds and has dropped (migration v19). */
export const jobEventUsage = sqliteTable("job_event_usage", {
  jobId: text("job_id").primaryKey(),
  userId: integer("user_id"),
  events: integer("events").notNull().default(0),
  bytes: integer("bytes").notNull().default(0),
  dropped: integer("dropped").notNull().default(0),
  droppedBytes: integer("dropped_bytes").notNull().default(0),
  truncatedEvents: integer("truncated_events"),
  truncatedBytes: integer("truncated_bytes"),
});

/** Which worker ran each attempt of a job (written by triggers on queue_entries: migration v18). */
export const jobAttempts = sqliteTable(
  "job_attempts",
  {
    jobId: text("job_id").notNull(),
    attempt: integer("attempt").notNull(),
    workerId: integer("worker_id").notNull(),
    startedAt: text("started_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.attempt] })],
);

export const jobCommands = sqliteTable("job_commands", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  jobId: text("job_id").notNull(),
  workerId: integer("worker_id").notNull(),
  command: text("command").notNull(),
  requestedBy: integer("requested_by"),
  createdAt: text("created_at").notNull(),
  ackedAt: text("acked_at"),
});

export const workers = sqliteTable("workers", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  name: text("name").notNull().unique(),
  role: text("role").notNull().default("remote"),
  status: text("status").notNull().default("connecting"),
  labels: text("labels").notNull().default("{}"),
  gpus: text("gpus").notNull().default("[]"),
  hostname: text("hostname"),
  hostStats: text("host_stats"),
  tokenPrefix: text("token_prefix").notNull().unique(),
  tokenHash: text("token_hash").notNull(),
  createdAt: text("created_at").notNull(),
  registeredAt: text("registered_at"),
  lastHeartbeat: text("last_heartbeat"),
  idleSince: text("idle_since"),
  trainers: text("trainers"),
  runningTrainers: text("running_trainers"),
  xidReadable: integer("xid_readable"),
});

export const levels = sqliteTable("levels", {
  name: text("name").primaryKey(),
  label: text("label").notNull(),
  priority: integer("priority").notNull(),
});

export const users = sqliteTable("users", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  username: text("username").notNull().unique(),
  email: text("email").notNull().unique(),
  passwordHash: text("password_hash").notNull(),
  createdAt: text("created_at").notNull(),
  disabledAt: text("disabled_at"),
  teamId: text("team_id"),
  stallPolicy: text("stall_policy"),
});

export const userLevels = sqliteTable(
  "user_levels",
  {
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    level: text("level")
      .notNull()
      .references(() => levels.name),
  },
  (t) => [primaryKey({ columns: [t.userId, t.level] })],
);

export const sessions = sqliteTable("sessions", {
  tokenHash: text("token_hash").primaryKey(),
  userId: integer("user_id")
    .notNull()
    .references(() => users.id, { onDelete: "cascade" }),
  createdAt: text("created_at").notNull(),
  expiresAt: text("expires_at").notNull(),
});

export const apiKeys = sqliteTable("api_keys", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  userId: integer("user_id")
    .notNull()
    .references(() => users.id, { onDelete: "cascade" }),
  name: text("name").notNull(),
  prefix: text("prefix").notNull().unique(),
  keyHash: text("key_hash").notNull(),
  createdAt: text("created_at").notNull(),
  expiresAt: text("expires_at"),
  lastUsedAt: text("last_used_at"),
  revokedAt: text("revoked_at"),
});

export const settings = sqliteTable("settings", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  updatedAt: text("updated_at").notNull(),
});

/** One row: bumped by triggers whenever limits, rules, environments or workers change (migration 0021). */
export const capacityVersion = sqliteTable("capacity_version", {
  id: integer("id").primaryKey(),
  version: integer("version").notNull(),
});

export const environments = sqliteTable("environments", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  name: text("name").notNull().unique(),
  description: text("description"),
  modelFamily: text("model_family"),
  modelFlavour: text("model_flavour"),
  modelType: text("model_type"),
  loraType: text("lora_type"),
  tags: text("tags", { mode: "json" }).$type<string[]>().notNull().default([]),
  config: text("config", { mode: "json" }).$type<import("../../shared/schemas/environments").ConfigOptions>().notNull().default({}),
  dataloader: text("dataloader", { mode: "json" })
    .$type<import("../../shared/schemas/environments").DataloaderDataset[]>()
    .notNull()
    .default([]),
  createdBy: integer("created_by").references(() => users.id),
  createdAt: text("created_at").notNull(),
  updatedAt: text("updated_at").notNull(),
});

/** Each user's active environment (at most one per user). */
export const activeEnvironments = sqliteTable("active_environments", {
  userId: integer("user_id")
    .primaryKey()
    .references(() => users.id),
  environmentId: integer("environment_id")
    .notNull()
    .references(() => environments.id),
  updatedAt: text("updated_at").notNull(),
});

export const auditLog = sqliteTable("audit_log", {
  id: integer("id").primaryKey(),
  occurredAt: text("occurred_at").notNull(),
  eventType: text("event_type").notNull(),
  actorUserId: integer("actor_user_id"),
  actor: text("actor"),
  clientIp: text("client_ip"),
  userAgent: text("user_agent"),
  target: text("target"),
  details: text("details").notNull().default("{}"),
  prevHash: text("prev_hash").notNull(),
  hash: text("hash").notNull(),
});

export const providerSettings = sqliteTable("provider_settings", {
  provider: text("provider").primaryKey(),
  settings: text("settings").notNull(),
  updatedAt: text("updated_at").notNull(),
  updatedBy: integer("updated_by"),
});

export const providerWebhookEvents = sqliteTable("provider_webhook_events", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  provider: text("provider").notNull(),
  webhookId: text("webhook_id"),
  receivedAt: text("received_at").notNull(),
  clientIp: text("client_ip"),
  signed: integer("signed").notNull().default(0),
  payload: text("payload").notNull(),
  processedAt: text("processed_at"),
});

export const storageUsage = sqliteTable("storage_usage", {
  jobId: text("job_id").primaryKey(),
  bytes: integer("bytes").notNull().default(0),
  objects: integer("objects").notNull().default(0),
});

export const datasetFolders = sqliteTable("dataset_folders", {
  name: text("name").primaryKey(),
  createdBy: integer("created_by"),
  createdAt: text("created_at").notNull(),
  /** Other users' cloud submissions may package the folder (migration v20). */
  allowCloud: integer("allow_cloud").notNull().default(0),
  allowCloudBy: integer("allow_cloud_by"),
  allowCloudAt: text("allow_cloud_at"),
});

/** Bytes and files under the top-level dataset folders each user owns (migration v19). */
export const datasetUsage = sqliteTable("dataset_usage", {
  userId: integer("user_id").primaryKey(),
  bytes: integer("bytes").notNull().default(0),
  files: integer("files").notNull().default(0),
});

export const eventWatchers = sqliteTable("event_watchers", {
  id: text("id").primaryKey(),
  userId: integer("user_id").notNull(),
  jobId: text("job_id").notNull(),
  expiresAt: integer("expires_at").notNull(),
});

export const cloudJobs = sqliteTable("cloud_jobs", {
  jobId: text("job_id").primaryKey(),
  provider: text("provider").notNull(),
  providerJobId: text("provider_job_id"),
  hardware: text("hardware").notNull(),
  rateUsdPerSecond: real("rate_usd_per_second").notNull(),
  expectedSeconds: integer("expected_seconds").notNull(),
  destination: text("destination").notNull(),
  summary: text("summary").notNull(),
  phase: text("phase").notNull().default("queued"),
  archiveBytes: integer("archive_bytes").notNull().default(0),
  uploadedBytes: integer("uploaded_bytes").notNull().default(0),
  providerFileId: text("provider_file_id"),
  providerFileUrl: text("provider_file_url"),
  archiveDeletedAt: text("archive_deleted_at"),
  providerStatus: text("provider_status"),
  providerStartedAt: text("provider_started_at"),
  providerCompletedAt: text("provider_completed_at"),
  billedSeconds: real("billed_seconds"),
  costUsd: real("cost_usd").notNull().default(0),
  costFinal: integer("cost_final").notNull().default(0),
  logsOffset: integer("logs_offset").notNull().default(0),
  output: text("output"),
  providerError: text("provider_error"),
  submittedAt: text("submitted_at"),
  lastPolledAt: text("last_polled_at"),
  createdAt: text("created_at").notNull(),
  updatedAt: text("updated_at").notNull(),
});

export const providerState = sqliteTable("provider_state", {
  provider: text("provider").primaryKey(),
  breakerState: text("breaker_state").notNull().default("closed"),
  consecutiveFailures: integer("consecutive_failures").notNull().default(0),
  halfOpenSuccesses: integer("half_open_successes").notNull().default(0),
  openedAt: text("opened_at"),
  failuresTotal: integer("failures_total").notNull().default(0),
  credentialsValid: integer("credentials_valid"),
  credentialsMessage: text("credentials_message"),
  validatedAt: text("validated_at"),
  validationLatencyMs: real("validation_latency_ms"),
});

/** Runs whose series and images were kept before retention deleted their events (migration v22). */
export const keptRuns = sqliteTable("kept_runs", {
  jobId: text("job_id").primaryKey(),
  keptAt: text("kept_at").notNull(),
});

/** A kept run's metric series, one row per step (migration v22). */
export const runPoints = sqliteTable(
  "run_points",
  {
    jobId: text("job_id").notNull(),
    step: real("step").notNull(),
    seconds: real("seconds").notNull(),
    loss: real("loss"),
    lr: real("lr"),
    stepTime: real("step_time"),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.step] })],
);

/** A kept run's validation images, in order (migration v22). */
export const runImages = sqliteTable(
  "run_images",
  {
    jobId: text("job_id").notNull(),
    n: integer("n").notNull(),
    step: real("step"),
    prompt: text("prompt"),
    mimeType: text("mime_type").notNull(),
    src: text("src").notNull(),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.n] })],
);

/** One GPU's latest health sample in each minute, kept 24 h (migration v23). */
export const gpuHealth = sqliteTable(
  "gpu_health",
  {
    workerId: integer("worker_id").notNull(),
    gpuIndex: integer("gpu_index").notNull(),
    minute: text("minute").notNull(),
    sampledAt: text("sampled_at").notNull(),
    utilization: real("utilization"),
    memoryUsedMb: real("memory_used_mb"),
    memoryTotalMb: real("memory_total_mb"),
    temperatureC: real("temperature_c"),
    eccUncorrected: integer("ecc_uncorrected"),
    retiredPagesPending: integer("retired_pages_pending"),
    probeError: text("probe_error"),
    xids: text("xids"),
    fault: text("fault"),
  },
  (t) => [primaryKey({ columns: [t.workerId, t.gpuIndex, t.minute] })],
);

/** GPUs out of allocation until an admin clears them (migration v23). */
export const gpuQuarantines = sqliteTable(
  "gpu_quarantines",
  {
    workerId: integer("worker_id").notNull(),
    gpuIndex: integer("gpu_index").notNull(),
    reason: text("reason").notNull(),
    since: text("since").notNull(),
    clearedAt: text("cleared_at"),
    clearedBy: text("cleared_by"),
    acceptedEcc: integer("accepted_ecc"),
    acceptedRetired: integer("accepted_retired"),
  },
  (t) => [primaryKey({ columns: [t.workerId, t.gpuIndex] })],
);

/** Idempotency keys of submits: the first answer, replayed for 24 h (migration v24). */
export const idempotencyKeys = sqliteTable(
  "idempotency_keys",
  {
    userId: integer("user_id").notNull(),
    key: text("key").notNull(),
    route: text("route").notNull(),
    requestHash: text("request_hash").notNull(),
    status: integer("status"),
    body: text("body"),
    createdAt: text("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.key] })],
);

/** A user's notification preferences (migration v26): kinds and channels as JSON, the webhook's secret. */
export const notificationPreferences = sqliteTable("notification_preferences", {
  userId: integer("user_id")
    .primaryKey()
    .references(() => users.id, { onDelete: "cascade" }),
  preferences: text("preferences").notNull(),
  webhookSecret: text("webhook_secret").notNull(),
  updatedAt: text("updated_at").notNull(),
});

/** One notification message on one channel, with its outcome (migration v26). */
export const notificationDeliveries = sqliteTable("notification_deliveries", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  userId: integer("user_id")
    .notNull()
    .references(() => users.id, { onDelete: "cascade" }),
  kind: text("kind").notNull(),
  subject: text("subject").notNull(),
  channel: text("channel").notNull(),
  target: text("target").notNull(),
  message: text("message").notNull(),
  status: text("status").notNull().default("pending"),
  attempts: integer("attempts").notNull().default(0),
  lastError: text("last_error"),
  nextAt: integer("next_at").notNull(),
  leaseUntil: integer("lease_until"),
  eventAt: text("event_at").notNull(),
  createdAt: text("created_at").notNull(),
  deliveredAt: text("delivered_at"),
});

/** Single-use approval links sent to admins (migration v26). */
export const approvalLinks = sqliteTable("approval_links", {
  id: text("id").primaryKey(),
  jobId: text("job_id").notNull(),
  adminId: integer("admin_id")
    .notNull()
    .references(() => users.id, { onDelete: "cascade" }),
  expiresAt: text("expires_at").notNull(),
  usedAt: text("used_at"),
});

/** Budget crossings already announced, one per budget, period and state (migration v27). */
export const budgetNotices = sqliteTable(
  "budget_notices",
  {
    budget: text("budget").notNull(),
    periodStart: text("period_start").notNull(),
    state: text("state").notNull(),
    used: real("used").notNull(),
    limit: real("budget_limit").notNull(),
    noticedAt: text("noticed_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.budget, t.periodStart, t.state] })],
);
