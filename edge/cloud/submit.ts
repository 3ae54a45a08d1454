import { globMatch } from "../../shared/labels";
import { splitCommand } from "../../shared/placeholders";
import { findProvider } from "../../shared/providers";
import { SCRIPT_OPTIONS, type CloudSettings, type CloudSubmit, type CostEstimate, type PackageSummary } from "../../shared/schemas/cloud";
import type { Config } from "../config";
import { ApiError, notFound } from "../errors";
import { getProviderSettings, type StoredProviderSettings } from "./provider-settings";
import { committedSpending } from "./spending";
import type { SubmitOutcome, Submitter } from "../jobs/job";
import { prepareCloudJob, readEnvironment, submittedEnvironment } from "../jobs/prepare";
import type { SchedulerApi } from "../jobs/objects";
import { getSetting } from "../settings-store";
import { costOf, expectedSeconds, periodStart, spendingCheck } from "./cost";
import { MAX_ARCHIVE_BYTES, MAX_ARCHIVE_LABEL, planPackage, type PackageBucket } from "./package";
import { checkDatasetConsent } from "./package-consent";
import { managedRefusal } from "./providers/managed";
import { hostedClient, type ProviderContext } from "./registry";
import { getRates, publicBase } from "./cloud-settings";
import { unscopedDestination, webhookUrl } from "./trainer-input";

/*
 * POST /api/cloud/jobs/submit (README "Cloud training": the first steps of a cloud job, and the
 * rules before any upload): the configuration serialised, local datasets planned into an archive with the
 * exclusions, the summary and cost estimate, then the checks in the order a user can fix them -
 * consent setting, provider configured (training model and destination), destination (storage
 * only), script options (only programs an admin allows), run time (not below the environment's),
 * archive cap, storage endpoint, spending limit, consent confirmation, the destination model's
 * owner at the provider - and only then the job, which waits in the cloud pool. Nothing is
 * uploaded here: the job's Durable Object does that once the Scheduler admits it
 * (edge/cloud/cloud-job.ts). A dry run stops before storing, and never calls the provider.
 */

export interface SubmitContext extends ProviderContext {
  bucket: PackageBucket;
  config: Config;
  scheduler: Pick<SchedulerApi, "submit" | "submitJob">;
}

export interface CloudAnswer {
  success: boolean;
  dry_run: boolean;
  job_id: string | null;
  status: "dry_run" | "pending" | "running" | "blocked";
  message: string;
  consent_mode: "ask" | "allow" | "never";
  summary: PackageSummary;
  estimate: CostEstimate;
}

const EMPTY_SUMMARY: PackageSummary = {
  summary_id: "",
  datasets: [],
  files: 0,
  bytes: 0,
  archive_bytes: 0,
  archive_limit_bytes: MAX_ARCHIVE_BYTES,
  excluded: [],
};

/** Spent this period plus running jobs' estimates, with the limit's figures for the estimate. */
async function spending(ctx: ProviderContext, limit: number | null, period: "day" | "week" | "month", now: Date) {
  if (limit === null) return null;
  const committed = await committedSpending(ctx.db, period, now);
  return { limit_usd: limit, period, period_start: periodStart(period, now).toISOString(), committed_usd: costOf(1, committed) };
}

/** The checks on the storage destination (the only result destination of a cloud job): enabled and reachable, with the fix named. */
function checkDestination(ctx: SubmitContext, provider: string, cloud: CloudSettings, stored: StoredProviderSettings): void {
  const unavailable = (detail: string) => new ApiError(422, "destination_unavailable", detail, [{ path: "destination", message: detail }]);
  if (!stored.s3_endpoint_enabled)
    throw unavailable(
      `The built-in storage endpoint is off for ${provider}: an admin sets s3_endpoint_enabled with PUT /api/cloud/providers/${provider}`,
    );
  if (!stored.s3_public_url && !publicBase(cloud, ctx.config.publicUrl))
    throw unavailable(
      "The cloud job could not reach this service to deliver its results: set the Public URL (PUT /api/cloud/settings public_url), SERVICE_PUBLIC_URL, or the provider's s3_public_url",
    );
}

/**
 * Script options (--post_checkpoint_script, --post_upload_script, --validation_external_script)
 * on a cloud submission: each command's program (its first word) must be one an admin allows in
 * the cloud settings' allowed_scripts, as a GPU box runs only the scripts its runner config
 * declares; 422 script_not_allowed naming the option otherwise, whoever submits.
 */
/** What would make a shell run more than one program, or another one: operators, substitutions, redirections, line breaks. */
const SHELL_SYNTAX = /[;&|`$()<>\n\r]/;

function refuseScripts(name: string, config: Record<string, unknown>, allowed: string[]): void {
  const refused: { path: string; message: string }[] = [];
  // Spelled as an argument parser would take it too: without the dashes, with - for _, in capitals.
  const plain = (name: string) => name.replace(/^-+/, "").replace(/-/g, "_").toLowerCase();
  const scripts = new Set(SCRIPT_OPTIONS.map(plain));
  for (const [option, value] of Object.entries(config)) {
    if (!scripts.has(plain(option))) continue;
    if (value === undefined || value === null || value === "" || value === false) continue;
    let program: string | undefined;
    try {
      program = typeof value === "string" ? splitCommand(value)[0] : undefined;
    } catch {
      program = undefined;
    }
    // The allowed program's name is not enough when the trainer may hand the line to a shell:
    // `/allowed.sh && curl ...` would run more than the program.
    if (typeof value === "string" && SHELL_SYNTAX.test(value)) {
      refused.push({
        path: `environment.config.${option}`,
        message: "holds shell syntax (; & | ` $ ( ) < > or a line break): a cloud trainer may run the line through a shell",
      });
      continue;
    }
    const fine =
      program !== undefined &&
      !program.split("/").some((part) => part === "." || part === "..") &&
      allowed.some((pattern) => globMatch(pattern, program));
    if (!fine)
      refused.push({
        path: `environment.config.${option}`,
        message: program
          ? `runs ${JSON.stringify(program.slice(0, 200))}, which the cloud settings' allowed_scripts do not list`
          : "is not a command line",
      });
  }
  if (refused.length)
    throw new ApiError(
      422,
      "script_not_allowed",
      `Environment ${JSON.stringify(name)} sets ${refused.map((r) => r.path.slice("environment.config.".length)).join(", ")}: a cloud job runs only the scripts whose program an admin allows (PUT /api/cloud/settings allowed_scripts); remove the option from the environment or ask an admin to allow its program`,
      refused,
    );
}

/** Account names already read from a provider, so each submission does not ask again: kept ACCOUNT_TTL_MS. */
const accounts = new Map<string, { at: number; username: string }>();
const ACCOUNT_TTL_MS = 60_000;

/**
 * The provider account the API token belongs to (Replicate GET /v1/account), or null when it
 * cannot be told now (the provider unreachable, the token refused): then the provider itself is
 * left to refuse a destination that is not the account's.
 */
async function providerAccount(ctx: SubmitContext, provider: string, stored: StoredProviderSettings): Promise<string | null> {
  const key = `${provider} ${stored.api_base_url} ${stored.api_token_secret}`;
  const known = accounts.get(key);
  if (known && Date.now() - known.at < ACCOUNT_TTL_MS) return known.username;
  let username: string | null;
  try {
    const { client } = await hostedClient(ctx, provider, stored);
    username = (await client.account()).username;
  } catch (error) {
    ctx.log.warning("the provider account could not be read", { provider, error: (error as Error).message });
    return null;
  }
  if (username === null) return null;
  accounts.set(key, { at: Date.now(), username });
  return username;
}

/**
 * The provider's destination model must be the token account's own (Replicate pushes a training
 * only into a model owned by the caller) and exist: 409 destination_not_owned or
 * destination_missing naming the setting otherwise.
 */
async function checkDestinationOwner(ctx: SubmitContext, provider: string, stored: StoredProviderSettings): Promise<void> {
  const destination = stored.training_destination!;
  const owner = destination.split("/")[0]!;
  const account = await providerAccount(ctx, provider, stored);
  if (account !== null && account.toLowerCase() !== owner.toLowerCase())
    throw new ApiError(
      409,
      "destination_not_owned",
      `${provider}'s training_destination ${destination} belongs to ${owner}, but the API token is the account ${account}'s: ${provider} pushes a training only into a model the caller owns. An admin creates a model under ${account} and sets it with PUT /api/cloud/providers/${provider} training_destination`,
    );
  if (account === null) return;
  // The model must exist too (Replicate refuses a training into one that does not, after the upload).
  let exists: boolean;
  try {
    const { client } = await hostedClient(ctx, provider, stored);
    exists = await client.model_exists(destination);
  } catch (error) {
    ctx.log.warning("the destination model could not be looked up", { provider, error: (error as Error).message });
    return;
  }
  if (!exists)
    throw new ApiError(
      409,
      "destination_missing",
      `${provider}'s training_destination ${destination} does not exist: an admin creates it (on replicate.com/create, private) before cloud jobs can be submitted`,
    );
}

/**
 * Decides a cloud submission and, unless it is a dry run, stores the job (pending, running or
 * blocked) with its cloud record. Every refusal changes nothing.
 *
 * @example
 * const answer = await submitCloudJob(ctx, submitter, { config_name: "flux", provider: "replicate", destination: { type: "storage" }, dry_run: true });
 */
export async function submitCloudJob(ctx: SubmitContext, user: Submitter, body: CloudSubmit): Promise<CloudAnswer> {
  const known = findProvider(body.provider);
  if (!known)
    throw new ApiError(422, "unknown_provider", `Provider "${body.provider}" is not one of replicate, workers, managed`, [
      { path: "provider", message: "unknown" },
    ]);
  if (known.kind === "managed") throw managedRefusal();
  const environment = submittedEnvironment(user, body.config_name, await readEnvironment(ctx.db, body.config_name));
  if (known.kind === "workers") return submitToWorkers(ctx, user, body);

  const now = new Date();
  const [cloud, rates, stored, rules] = await Promise.all([
    getSetting(ctx.db, "cloud"),
    getRates(ctx.db),
    getProviderSettings(ctx.db, body.provider),
    getSetting(ctx.db, "approval_rules"),
  ]);
  if (cloud.consent_mode === "never")
    throw new ApiError(
      403,
      "cloud_uploads_disabled",
      "Cloud training is off: the upload consent setting is Never Upload (an admin changes it in PUT /api/cloud/settings)",
    );
  const rate = rates[stored.hardware];
  if (rate === undefined)
    throw new ApiError(
      409,
      "no_rate",
      `There is no rate for ${stored.hardware}, the hardware ${body.provider} runs on: an admin adds it with PUT /api/cloud/rates`,
    );
  if (!stored.training_model)
    throw new ApiError(
      409,
      "provider_not_configured",
      `${body.provider} has no training model: an admin sets training_model with PUT /api/cloud/providers/${body.provider}`,
    );
  if (!stored.training_destination)
    throw new ApiError(
      409,
      "provider_not_configured",
      `${body.provider} has no training_destination: each fine-tune is pushed into a model the provider account owns (never the trainer model itself); an admin creates one and sets training_destination ("owner/name") with PUT /api/cloud/providers/${body.provider}`,
    );
  if (body.destination.type !== "storage")
    throw new ApiError(422, "destination_unavailable", unscopedDestination(body.destination.type), [
      { path: "destination", message: `${body.destination.type} is not a destination of cloud jobs` },
    ]);
  refuseScripts(body.config_name, environment.config, cloud.allowed_scripts);

  const plan = await planPackage(ctx.bucket, environment.dataloader, environment.config);
  await checkDatasetConsent(ctx.db, user, plan);
  const seconds = expectedSeconds(body.max_runtime_minutes, environment.config, cloud.default_max_runtime_minutes, user.level === "admin");
  const estimatedCost = costOf(rate, seconds);
  const limit = await spending(ctx, cloud.spending_limit_usd, cloud.spending_period, now);
  const estimate: CostEstimate = {
    hardware: stored.hardware,
    rate_usd_per_second: rate,
    expected_seconds: seconds,
    estimated_cost_usd: estimatedCost,
    spending: limit && { ...limit, remaining_usd: costOf(1, Math.max(0, limit.limit_usd - limit.committed_usd)) },
  };
  const answer = (status: CloudAnswer["status"], message: string, jobId: string | null = null): CloudAnswer => ({
    success: true,
    dry_run: status === "dry_run",
    job_id: jobId,
    status,
    message,
    consent_mode: cloud.consent_mode,
    summary: plan.summary,
    estimate,
  });

  if (plan.summary.archive_bytes > MAX_ARCHIVE_BYTES)
    throw new ApiError(
      413,
      "archive_too_large",
      `The datasets make a ${plan.summary.archive_bytes}-byte archive; at most ${MAX_ARCHIVE_BYTES} bytes (${MAX_ARCHIVE_LABEL}, as Replicate counts) may be uploaded. Nothing was uploaded: make the datasets smaller or train them on your own GPUs`,
    );
  const check = spendingCheck(cloud.spending_limit_usd, limit?.committed_usd ?? 0, estimatedCost);
  const base = publicBase(cloud, ctx.config.publicUrl);
  // The provider sends webhooks to HTTPS only: an http:// public URL still receives results, and the job is
  // polled; the dry run (the summary a user reviews) says so.
  const polled =
    base && !webhookUrl(base, body.provider)
      ? `followed by polling every ${cloud.poll_interval_seconds} s (webhooks need an https:// public URL)`
      : null;
  if (body.dry_run) {
    const notes = [
      `would upload ${plan.summary.files} file(s), ${plan.summary.archive_bytes} bytes, and cost about $${estimatedCost.toFixed(2)}`,
      check.allowed ? null : `but ${check.message}`,
      polled,
      cloud.consent_mode === "ask" ? `to submit, resend with confirm_summary: "${plan.summary.summary_id}"` : null,
    ];
    return answer("dry_run", notes.filter(Boolean).join("; "));
  }
  checkDestination(ctx, body.provider, cloud, stored);
  if (!check.allowed) throw new ApiError(409, "spending_limit_exceeded", `Refused: ${check.message}`);
  if (cloud.consent_mode === "ask" && body.confirm_summary !== plan.summary.summary_id)
    throw new ApiError(
      409,
      body.confirm_summary ? "summary_changed" : "consent_required",
      body.confirm_summary
        ? "What would be uploaded changed since the summary you confirmed: review it again (dry_run: true) and confirm the new summary_id"
        : "Uploads need your confirmation (consent setting Always Ask): review the summary with dry_run: true, then resend with confirm_summary set to its summary_id",
    );
  await checkDestinationOwner(ctx, body.provider, stored);

  const cloudRecord = {
    provider: body.provider,
    hardware: stored.hardware,
    ratePerSecond: rate,
    expectedSeconds: seconds,
    destination: body.destination,
    summary: plan.summary,
    archiveBytes: plan.summary.archive_bytes,
  };
  // The cloud record is stored in the Scheduler's write batch with the job: a job it starts always finds it.
  const job = prepareCloudJob(
    user,
    { configName: body.config_name, metadata: body.metadata, estimatedCost, cloud: cloudRecord },
    environment,
    rules,
  );
  const { jobId } = job;
  const outcome: SubmitOutcome = await ctx.scheduler.submitJob(job);
  ctx.log.info("cloud job submitted", { job_id: jobId, provider: body.provider, estimated_cost: estimatedCost, status: outcome.status });
  if (outcome.status === "blocked") return answer("blocked", `awaiting an admin's approval: ${job.approvalRule}`, jobId);
  if (outcome.status === "running") return answer("running", "admitted: packaging and uploading to the provider now", jobId);
  if (outcome.status === "queued") return answer("pending", `queued at position ${outcome.position}: ${outcome.message}`, jobId);
  throw new ApiError(409, "not_submitted", outcome.status === "invalid" ? outcome.message : "the job was not queued");
}

/** Worker orchestration: an ordinary queue job for the remote workers; nothing is packaged, uploaded or billed. */
async function submitToWorkers(ctx: SubmitContext, user: Submitter, body: CloudSubmit): Promise<CloudAnswer> {
  const consent = (await getSetting(ctx.db, "cloud")).consent_mode;
  const estimate: CostEstimate = {
    hardware: "workers",
    rate_usd_per_second: 0,
    expected_seconds: 0,
    estimated_cost_usd: 0,
    spending: null,
  };
  const base = { consent_mode: consent, summary: EMPTY_SUMMARY, estimate };
  if (body.dry_run)
    return {
      ...base,
      success: true,
      dry_run: true,
      job_id: null,
      status: "dry_run",
      message: "would queue for your remote workers; nothing is uploaded or billed",
    };
  const outcome = await ctx.scheduler.submit(user, {
    config_name: body.config_name,
    dry_run: false,
    no_wait: false,
    any_gpu: false,
    target: "worker",
    ...(body.metadata ? { metadata: body.metadata } : {}),
  });
  if (outcome.status === "invalid") throw new ApiError(outcome.httpStatus, outcome.code, outcome.message, outcome.errors);
  if (outcome.status === "rejected") throw new ApiError(409, "rejected", outcome.message);
  const status = outcome.status === "queued" ? "pending" : outcome.status;
  const message =
    outcome.status === "queued"
      ? `queued at position ${outcome.position}: ${outcome.message}`
      : outcome.status === "blocked"
        ? outcome.message
        : "started on a worker";
  return { ...base, success: true, dry_run: false, job_id: outcome.jobId, status, message };
}
