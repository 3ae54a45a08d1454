import { DurableObject } from "cloudflare:workers";
import type { CloudSettings, PackageSummary } from "../../shared/schemas/cloud";
import { readConfig } from "../config";
import { openDatabase, type Database } from "../db/client";
import type { Env } from "../env";
import { ApiError } from "../errors";
import { recordEvents } from "../jobs/record-events";
import { applyEffects } from "../jobs/lifecycle/effects";
import { finishCloudJob } from "../jobs/lifecycle/finish-cloud";
import { createLogger, type Logger } from "../log";
import { billedSecondsNow, costOf } from "./cost";
import { moveCloudJob, patchCloudJob, readCloudJobRecord, recordProviderStart, type CloudJobFields, type CloudJobRecord } from "./record";
import { PhaseTransitionError, type CloudPhase } from "./phase";
import { providerLogEvents } from "./provider-logs";
import { archiveStream, planPackage, type PackageBucket } from "./package";
import type { CloudJobApi } from "../jobs/objects";
import { budgetVerdict, BUDGET_EVENT_SEQ, BUDGET_EVENT_TYPE } from "./budget";
import { committedSpending } from "./spending";
import { hostedClient, webhookReader } from "./registry";
import { publicBase } from "./cloud-settings";
import { trainerInput, webhookUrl } from "./trainer-input";
import { getSetting } from "../settings-store";
import { isEndStatus, ProviderError, queueStatusOf, UnknownStatusError, type ProviderJob } from "./types";

/*
 * One cloud job's life at its provider (README "Cloud training": package, upload, submit, track,
 * finish), one Durable Object per job so that its webhooks, polls and cancel never race. All
 * state is in libSQL (cloud_jobs, read as a typed CloudJobRecord); this object keeps only an
 * alarm. Its phases and every change allowed between them are in edge/cloud/phase.ts:
 *   queued -> uploading -> submitting -> submitted -> running -> finished
 * Admitted (start), it re-plans the archive from the job's snapshot and refuses to upload
 * anything but what the confirmed summary listed, streams the archive to the provider's file
 * hosting, and creates the training. Then every webhook (update) and every poll (alarm, each
 * poll_interval_seconds, webhooks or not) applies the provider's view: status, logs as job
 * events, billed seconds and cost. At the end the queue entry gets the final status through
 * the lifecycle, and the archive is deleted at the provider. A transient provider failure (no
 * answer, a 5xx, a 429 past the client's own retries, the circuit breaker open) is retried on the
 * alarm; anything else fails the job (its archive deleted at the provider all the same). Issue 27:
 * - every status Replicate documents: `aborted` (never ran) ends the job failed, billing nothing;
 *   a status the client does not know is never applied, and after MAX_UNKNOWN_STATUS_REPORTS
 *   reports (polls, webhooks, cancels) the job fails naming it, after a cancel sent;
 * - the training create is sent again only when it certainly was not acted on (a 429, nothing
 *   sent); a lost answer fails the job rather than risk a second, billed, run (created());
 * - money enforced: a running job whose billed cost reaches its approved estimate or what is
 *   left of the spending limit is cancelled, with the cloud.budget_exceeded event (enforceBudget).
 */

/** Dispatch tries before a job that cannot reach its provider fails. */
export const MAX_DISPATCH_TRIES = 5;
/** Upload progress is written at most this often. */
const PROGRESS_EVERY_MS = 250;
/**
 * A job's provider client (its settings and token) is kept this long between polls: a poll
 * every few seconds must not resolve the token (a Vault read, perhaps) each time, and a rotated
 * token or changed setting still applies within a minute.
 */
const CLIENT_TTL_MS = 60_000;

/**
 * Reports of a status the client does not know (polls, webhooks and cancels together) before the
 * job is given up: failed with the status named, after a cancel sent to the provider.
 */
export const MAX_UNKNOWN_STATUS_REPORTS = 5;

const ended = isEndStatus;

/** Why an aborted training ended when the provider gives no error: Replicate's own words for the status. */
const ABORTED_REASON =
  "the provider aborted the training before it started running (Replicate status aborted, e.g. its deadline passed while it waited); nothing was billed";

export class CloudJob extends DurableObject<Env> implements CloudJobApi {
  private chain: Promise<unknown> = Promise.resolve();
  private database: Database | null = null;
  private readonly log: Logger;
  private hosted: { at: number; value: Awaited<ReturnType<typeof hostedClient>> } | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.log = createLogger("edge/cloud/cloud-job", readConfig(env));
  }

  private db(): Database {
    return (this.database ??= openDatabase(readConfig(this.env)));
  }

  // Calls run one after another: a webhook arriving mid-poll waits for it.
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.chain.then(work, work);
    this.chain = run.catch(() => {});
    return run;
  }

  private async remember(jobId: string): Promise<void> {
    if ((await this.ctx.storage.get<string>("job_id")) !== jobId) await this.ctx.storage.put("job_id", jobId);
  }

  // Admission and cancel only arm the alarm: the caller (a Scheduler pass admitting hundreds of
  // jobs) is answered at once, and the work runs, and is retried, on the alarm.
  async start(jobId: string): Promise<void> {
    await this.remember(jobId);
    await this.ctx.storage.setAlarm(Date.now());
  }

  async cancel(jobId: string): Promise<void> {
    await this.remember(jobId);
    await this.ctx.storage.setAlarm(Date.now());
  }

  async update(jobId: string, payload: unknown): Promise<void> {
    await this.remember(jobId);
    await this.exclusive(async () => {
      const job = await this.read(jobId);
      if (!job || !job.providerJobId || job.phase === "finished") return;
      // The provider's own reader: this object knows no provider's payloads.
      const reader = webhookReader(job.provider);
      if (!reader || reader.runId(payload) !== job.providerJobId) return;
      let run: ProviderJob;
      try {
        run = reader.job(payload);
      } catch (error) {
        if (!(error instanceof UnknownStatusError)) throw error;
        await this.unknownStatus(job, error);
        return;
      }
      await this.apply(job, run);
    });
  }

  async poke(jobId: string): Promise<void> {
    await this.remember(jobId);
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now());
  }

  override async alarm(): Promise<void> {
    const jobId = await this.ctx.storage.get<string>("job_id");
    if (!jobId) return;
    await this.exclusive(() => this.step(jobId));
  }

  private read(jobId: string): Promise<CloudJobRecord | null> {
    return readCloudJobRecord(this.db(), jobId);
  }

  /** Writes fields of the job, never its phase. */
  private patch(jobId: string, fields: CloudJobFields): Promise<void> {
    return patchCloudJob(this.db(), jobId, fields);
  }

  /** Every change of phase: only those the transition table allows (edge/cloud/phase.ts), else PhaseTransitionError. */
  private async move(jobId: string, to: CloudPhase, fields: CloudJobFields = {}): Promise<void> {
    await moveCloudJob(this.db(), jobId, to, fields);
  }

  private async again(seconds: number): Promise<void> {
    await this.ctx.storage.setAlarm(Date.now() + seconds * 1000);
  }

  private providerContext() {
    return { env: this.env, db: this.db(), log: this.log };
  }

  /** The job's provider client, kept CLIENT_TTL_MS. */
  private async client(provider: string): Promise<Awaited<ReturnType<typeof hostedClient>>> {
    if (this.hosted && Date.now() - this.hosted.at < CLIENT_TTL_MS) return this.hosted.value;
    const value = await hostedClient(this.providerContext(), provider);
    this.hosted = { at: Date.now(), value };
    return value;
  }

  /** Whatever the job needs next, from its stored phase and queue status. */
  private async step(jobId: string): Promise<void> {
    const job = await this.read(jobId);
    if (!job) return;
    const cancelled = job.queueStatus !== "running";
    const cloud = await getSetting(this.db(), "cloud");
    const interval = cloud.poll_interval_seconds;
    try {
      if (job.phase === "finished") return await this.cleanUp(job);
      if (cancelled && (job.phase === "queued" || job.phase === "uploading")) {
        // Never submitted: nothing runs and nothing is billed; only an uploaded archive is left to remove.
        await this.move(jobId, "finished", { costFinal: true });
        return await this.cleanUp({ ...job, phase: "finished" });
      }
      if (cancelled && job.providerJobId && job.providerStatus !== "canceled") {
        const { client } = await this.client(job.provider);
        const run = await client.cancel_job(job.providerJobId);
        await this.apply(job, run);
        // The provider may take a moment to stop: polled until it reports the final billed time.
        if (!ended(run.status)) await this.again(Math.min(interval, 5));
        return;
      }
      if (job.phase === "queued" || job.phase === "uploading") return await this.dispatch(job, cloud);
      if (job.phase === "submitting") {
        // Interrupted between asking the provider to train and hearing its answer: a second
        // request could start (and bill) a second run, so the job fails with what to check.
        return await this.fail(
          job,
          "interrupted while being submitted to the provider; check its dashboard for a stray training, then resubmit",
        );
      }
      if (job.providerJobId) {
        const { client } = await this.client(job.provider);
        const run = await client.get_job_status(job.providerJobId);
        await this.apply(job, run);
        if (!ended(run.status)) await this.again(interval);
      }
    } catch (error) {
      await this.failed(job, error, interval);
    }
  }

  /** A transient failure is retried on the alarm (up to MAX_DISPATCH_TRIES while dispatching); anything else fails the job. */
  private async failed(job: CloudJobRecord, error: unknown, interval: number): Promise<void> {
    // A throttled call (429 past the client's own retries) is tried again later too.
    const transient = error instanceof ProviderError && (error.countsAsFailure || error.status === null || error.status === 429);
    const message = error instanceof ApiError ? error.detail : error instanceof Error ? error.message : String(error);
    this.log.warning("cloud job step failed", { job_id: job.jobId, phase: job.phase, transient, error: message });
    if (error instanceof UnknownStatusError && job.phase !== "finished") {
      // Asked again at the next poll, a bounded number of times.
      if (!(await this.unknownStatus(job, error))) await this.again(interval);
      return;
    }
    if (job.phase === "finished") {
      // Only the archive's removal is left: tried again a few times, then left to the provider's own expiry.
      const tries = ((await this.ctx.storage.get<number>("cleanup_tries")) ?? 0) + 1;
      await this.ctx.storage.put("cleanup_tries", tries);
      if (tries < MAX_DISPATCH_TRIES) await this.again(60);
      return;
    }
    if (job.phase === "submitted" || job.phase === "running") {
      // Tracking a job that runs: keep polling; the provider keeps it whatever happens here.
      await this.again(transient ? interval : Math.max(interval, 60));
      return;
    }
    const tries = ((await this.ctx.storage.get<number>("dispatch_tries")) ?? 0) + 1;
    await this.ctx.storage.put("dispatch_tries", tries);
    if (transient && tries < MAX_DISPATCH_TRIES) {
      // The provider's Retry-After (a throttled upload or create), or the open breaker's wait.
      const retryAfter = (error as ProviderError).retryInSeconds ?? (error as { retryAfterSeconds?: number }).retryAfterSeconds;
      await this.again(Math.max(retryAfter ?? 0, Math.min(60, 2 ** tries)));
      return;
    }
    await this.fail(job, `could not send the job to ${job.provider}: ${message}`);
  }

  private async fail(job: CloudJobRecord, message: string): Promise<void> {
    const jobId = job.jobId;
    if (await this.finishedWith(jobId, { providerError: message, costFinal: true })) {
      const change = await finishCloudJob(this.db(), jobId, "failed", message);
      await applyEffects(this.effects("cloud job failed"), change);
    }
    // The job as it is now: `job` may have been read before the archive was uploaded (its file id unknown then).
    const now = (await this.read(jobId).catch(() => null)) ?? job;
    await this.cleanUp({ ...now, phase: "finished" }).catch(() => {});
  }

  /**
   * Moves the job to finished with `fields`. False when it already was (a failure met while only
   * its archive's removal was left): the table refuses it, and whatever finished it ended its
   * queue entry too, so there is nothing to fail.
   */
  private async finishedWith(jobId: string, fields: CloudJobFields): Promise<boolean> {
    try {
      await this.move(jobId, "finished", fields);
      return true;
    } catch (error) {
      if (!(error instanceof PhaseTransitionError) || error.from !== "finished") throw error;
      this.log.warning("cloud job already finished: not failed again", { job_id: jobId, error: fields.providerError ?? null });
      return false;
    }
  }

  /**
   * The provider reported a status the client does not know. Counted (polls, webhooks and
   * cancels together); at MAX_UNKNOWN_STATUS_REPORTS the job is given up: a cancel is sent to
   * the provider (the run may still be billing; its answer, whatever it says, is not waited on)
   * and the job fails naming the status. True when it was given up.
   */
  private async unknownStatus(job: CloudJobRecord, error: UnknownStatusError): Promise<boolean> {
    const jobId = job.jobId;
    const reports = ((await this.ctx.storage.get<number>("unknown_status_reports")) ?? 0) + 1;
    await this.ctx.storage.put("unknown_status_reports", reports);
    this.log.warning("the provider reports a status this service does not know", { job_id: jobId, status: error.reported, reports });
    if (reports < MAX_UNKNOWN_STATUS_REPORTS) return false;
    const trainingId = job.providerJobId || error.trainingId;
    try {
      const { client } = await this.client(job.provider);
      await client.cancel_job(trainingId);
    } catch (problem) {
      this.log.warning("could not cancel a training of unknown status", { job_id: jobId, error: String(problem) });
    }
    await this.fail(
      job,
      `the provider reported the training's status as ${error.reported}, which this service does not know, ${reports} times; ` +
        `the job was given up and a cancel sent to the provider: check training ${trainingId} on the provider's dashboard`,
    );
    return true;
  }

  private effects(trigger: string) {
    return { env: this.env, db: this.db(), log: this.log, actor: null, origin: "request" as const, trigger };
  }

  /** The archive exactly as confirmed, uploaded to the provider's file hosting, then the training created. */
  private async dispatch(job: CloudJobRecord, cloud: CloudSettings): Promise<void> {
    const jobId = job.jobId;
    const { client, settings } = await this.client(job.provider);
    const bucket = this.env.STORAGE as unknown as PackageBucket;
    const dataloader = JSON.parse(job.dataloaderSnapshot ?? "[]") as unknown[];
    const config = JSON.parse(job.configSnapshot ?? "{}") as Record<string, unknown>;
    const plan = await planPackage(bucket, dataloader, config);
    const confirmed = JSON.parse(job.summary) as PackageSummary;
    if (plan.summary.summary_id !== confirmed.summary_id)
      return this.fail(
        job,
        "the datasets changed after the upload summary was confirmed; nothing was uploaded: submit again to review the new summary",
      );

    let archive: { id: string; url: string } | null = job.providerFileId
      ? { id: job.providerFileId, url: job.providerFileUrl ?? "" }
      : null;
    if (!archive && plan.entries.length > 0) {
      await this.move(jobId, "uploading", { uploadedBytes: 0, archiveBytes: plan.summary.archive_bytes });
      let written = 0;
      const progress = (sent: number) => {
        if (Date.now() - written < PROGRESS_EVERY_MS) return;
        written = Date.now();
        void this.patch(jobId, { uploadedBytes: sent }).catch(() => {});
      };
      // A function, so that a throttled upload is sent again from the start.
      const file = await client.upload_file(`${jobId}.zip`, () => archiveStream(bucket, plan), plan.summary.archive_bytes, progress);
      archive = { id: file.id, url: file.url };
      await this.patch(jobId, { providerFileId: file.id, providerFileUrl: file.url, uploadedBytes: plan.summary.archive_bytes });
    }
    const now = await this.read(jobId);
    if (!now || now.queueStatus !== "running") {
      // Cancelled while uploading: the archive goes, nothing is submitted.
      await this.move(jobId, "finished", { costFinal: true });
      return this.cleanUp({ ...job, providerFileId: archive?.id ?? null, phase: "finished" });
    }
    const servicePublicUrl = readConfig(this.env).publicUrl;
    const input = await trainerInput({
      db: this.db(),
      jobId,
      destination: job.destination,
      plan,
      archive,
      settings,
      cloud,
      servicePublicUrl,
    });
    await this.move(jobId, "submitting");
    const creating = client.run_job({
      job_id: jobId,
      input,
      webhook_url: webhookUrl(publicBase(cloud, servicePublicUrl), job.provider),
    });
    const training = await this.created(now, creating, cloud.poll_interval_seconds);
    if (!training) return;
    await this.move(jobId, "submitted", { providerJobId: training.id, submittedAt: new Date().toISOString() });
    this.log.info("cloud job sent to its provider", { job_id: jobId, provider: job.provider, provider_job_id: training.id });
    await this.apply({ ...job, phase: "submitted", providerJobId: training.id }, training);
    await this.again(cloud.poll_interval_seconds);
  }

  /**
   * The training create's outcome (issue 27: a create is never sent twice for one job). Answered:
   * the training. Certainly not acted on (a 429 past the client's retries, a refusal, nothing
   * sent): the job goes back to the phase it had before the create and the error is thrown, for
   * the alarm to retry or fail it as usual. Anything that may have been acted on (no answer, a
   * timeout, a 5xx, an answer it cannot read) fails the job, never sending it again: a second
   * create could start, and bill, a second run. Created in a status it does not know: tracked by
   * its id like any other. Null when the job was ended or will be polled.
   */
  private async created(job: CloudJobRecord, creating: Promise<ProviderJob>, interval: number): Promise<ProviderJob | null> {
    const jobId = job.jobId;
    try {
      return await creating;
    } catch (error) {
      if (error instanceof UnknownStatusError) {
        const submitted = { providerJobId: error.trainingId, submittedAt: new Date().toISOString() };
        await this.move(jobId, "submitted", submitted);
        if (!(await this.unknownStatus({ ...job, ...submitted, phase: "submitted" }, error))) await this.again(interval);
        return null;
      }
      if (error instanceof ProviderError && error.unprocessed) {
        await this.move(jobId, job.phase);
        throw error;
      }
      const why = error instanceof Error ? error.message : String(error);
      this.log.warning("the answer to a training create was lost", { job_id: jobId, error: why });
      await this.fail(
        job,
        `the provider's answer to the training create was lost (${why}); it may have started a training all the same, so the create was not sent again: ` +
          `check the provider's dashboard for a training of job ${jobId} (cancel it if it runs), then resubmit`,
      );
      return null;
    }
  }

  /** The provider's view of the job, applied: status, times, billed seconds and cost, new log lines as events; the end when it ended. */
  private async apply(job: CloudJobRecord, run: ProviderJob): Promise<void> {
    const jobId = job.jobId;
    const over = ended(run.status);
    const rate = job.rateUsdPerSecond;
    // Aborted: it never ran, so nothing is billed whatever the times say.
    const seconds =
      run.status === "aborted"
        ? 0
        : billedSecondsNow({ startedAt: run.started_at, completedAt: run.completed_at, billedSeconds: run.billed_seconds }, Date.now());
    const error = run.status === "aborted" ? (run.error ?? ABORTED_REASON) : run.error;
    // The provider's log lines are recorded as a runner's are.
    const logs = providerLogEvents(run.logs, job.logsOffset, over);
    if (logs.events.length) await recordEvents(this.providerContext(), null, jobId, { attempt: 1, events: logs.events });
    const fields: CloudJobFields = {
      providerStatus: run.status,
      providerStartedAt: run.started_at,
      providerCompletedAt: run.completed_at,
      billedSeconds: seconds,
      costUsd: costOf(rate, seconds),
      costFinal: over,
      logsOffset: logs.offset,
      output: run.output === null || run.output === undefined ? null : JSON.stringify(run.output),
      providerError: error,
      lastPolledAt: new Date().toISOString(),
    };
    // A provider status that moves no phase (starting) leaves it where it is.
    const phase: CloudPhase | null = over ? "finished" : run.status === "processing" ? "running" : null;
    if (phase) await this.move(jobId, phase, fields);
    else await this.patch(jobId, fields);
    if (!over) {
      if (run.started_at && run.started_at !== job.providerStartedAt)
        await recordProviderStart(this.db(), jobId, run.started_at, job.expectedSeconds);
      if (job.queueStatus === "running")
        await this.enforceBudget({ ...job, ...fields, phase: phase ?? job.phase, costFinal: over }, costOf(rate, seconds));
      return;
    }
    const change = await finishCloudJob(this.db(), jobId, queueStatusOf(run.status) as "completed" | "failed" | "cancelled", error);
    await applyEffects(this.effects(`cloud job ${run.status}`), change);
    this.log.info("cloud job ended at its provider", {
      job_id: jobId,
      status: run.status,
      billed_seconds: seconds,
      cost_usd: costOf(rate, seconds),
    });
    // The job as it is now: `job` may predate the archive's upload.
    await this.cleanUp({ ...((await this.read(jobId)) ?? job), phase: "finished" });
  }

  /**
   * Money enforced (issue 27, Build 5; edge/cloud/budget.ts): a running job whose billed cost so
   * far reached its approved estimate, or what is left of the spending limit for it, gets the
   * `cloud.budget_exceeded` event, ends `cancelled` with the reason (the lifecycle's end event
   * and webhook carry it), and is cancelled at its provider at once. Both the polls and the
   * webhooks come here (apply), with the job as apply left it.
   */
  private async enforceBudget(job: CloudJobRecord, costUsd: number): Promise<void> {
    if (!(costUsd > 0) || !job.providerJobId) return;
    const jobId = job.jobId;
    const cloud = await getSetting(this.db(), "cloud");
    const estimateUsd = job.estimatedCost === null ? costOf(job.rateUsdPerSecond, job.expectedSeconds) : job.estimatedCost;
    let committedUsd = 0;
    if (cloud.spending_limit_usd !== null) {
      committedUsd = await committedSpending(this.db(), cloud.spending_period, new Date());
    }
    const verdict = budgetVerdict({
      costUsd,
      estimateUsd,
      limitUsd: cloud.spending_limit_usd,
      period: cloud.spending_period,
      committedUsd,
    });
    if (!verdict) return;
    this.log.warning("cloud job reached its budget: cancelling it", { job_id: jobId, reason: verdict.reason, cost_usd: costUsd });
    const event = {
      type: BUDGET_EVENT_TYPE,
      message: verdict.message,
      reason: verdict.reason,
      cost_usd: verdict.costUsd,
      budget_usd: verdict.capUsd,
      estimate_usd: estimateUsd,
      spending_limit_usd: cloud.spending_limit_usd,
    };
    await recordEvents(this.providerContext(), null, jobId, { attempt: 1, events: [{ seq: BUDGET_EVENT_SEQ, event }] });
    const change = await finishCloudJob(this.db(), jobId, "cancelled", verdict.message);
    await applyEffects(this.effects("cloud job over its budget"), change);
    // Stopped now; should the cancel fail, the alarm's cancel path (the job is no longer running) tries again.
    const { client } = await this.client(job.provider);
    const stopped = await client.cancel_job(job.providerJobId);
    await this.apply({ ...job, queueStatus: "cancelled" }, stopped);
  }

  /** Once the job is over, the archive it uploaded is removed from the provider. */
  private async cleanUp(job: CloudJobRecord): Promise<void> {
    if (!job.providerFileId || job.archiveDeletedAt) return;
    const { client } = await this.client(job.provider);
    await client.delete_file(job.providerFileId);
    await this.patch(job.jobId, { archiveDeletedAt: new Date().toISOString() });
  }
}
