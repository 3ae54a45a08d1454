import { DurableObject } from "cloudflare:workers";
import type { CloudSettings, PackageSummary } from "../../shared/schemas/cloud";
import { readConfig } from "../config";
import { openDatabase, type Database } from "../db/client";
import type { Env } from "../env";
import { ApiError } from "../errors";
import { appendEvents } from "../jobs/events";
import { hubOf } from "../jobs/hub-types";
import { applyEffects } from "../jobs/lifecycle/effects";
import { finishCloudJob } from "../jobs/lifecycle/finish-cloud";
import { createLogger, type Logger } from "../log";
import { billedSecondsNow, costOf } from "./cost";
import { recordProviderStart } from "./record";
import { archiveStream, planPackage, type PackageBucket } from "./package";
import type { CloudJobApi } from "./cloud-job-types";
import { budgetVerdict, BUDGET_EVENT_SEQ, BUDGET_EVENT_TYPE } from "./budget";
import { parseTraining } from "./providers/replicate";
import { committedSpending } from "../scheduler/store";
import { hostedClient } from "./registry";
import { publicBase } from "./cloud-settings";
import { trainerInput, webhookUrl } from "./trainer-input";
import { getSetting } from "../settings";
import { isEndStatus, ProviderError, queueStatusOf, UnknownStatusError, type ProviderJob } from "./types";

/*
 * One cloud job's life at its provider (spec 1 "Cloud data flow" steps 3-6), one Durable Object
 * per job so that its webhooks, polls and cancel never race. All state is in libSQL
 * (cloud_jobs); this object keeps only an alarm. Phases:
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

type Row = Record<string, unknown>;

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
      const row = await this.read(jobId);
      if (!row || !row.provider_job_id || row.phase === "finished") return;
      const id = typeof payload === "object" && payload !== null ? (payload as { id?: unknown }).id : undefined;
      if (id !== row.provider_job_id) return;
      let job: ProviderJob;
      try {
        job = parseTraining(payload);
      } catch (error) {
        if (error instanceof UnknownStatusError) return this.unknownStatus(row, error);
        throw error;
      }
      await this.apply(row, job);
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

  private async read(jobId: string): Promise<Row | null> {
    const result = await this.db().$client.execute({
      sql: `SELECT c.*, q.status AS queue_status, q.user_id, q.config_snapshot, q.dataloader_snapshot, q.estimated_cost
            FROM cloud_jobs c JOIN queue_entries q ON q.job_id = c.job_id WHERE c.job_id = ?`,
      args: [jobId],
    });
    return (result.rows[0] as Row | undefined) ?? null;
  }

  private async patch(jobId: string, fields: Record<string, unknown>): Promise<void> {
    const names = Object.keys(fields);
    await this.db().$client.execute({
      sql: `UPDATE cloud_jobs SET ${names.map((n) => `${n} = ?`).join(", ")}, updated_at = ? WHERE job_id = ?`,
      args: [...names.map((n) => fields[n] as string | number | null), new Date().toISOString(), jobId],
    });
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
    const row = await this.read(jobId);
    if (!row) return;
    const phase = String(row.phase);
    const cancelled = row.queue_status !== "running";
    const cloud = await getSetting(this.db(), "cloud");
    const interval = cloud.poll_interval_seconds;
    try {
      if (phase === "finished") return await this.cleanUp(row);
      if (cancelled && (phase === "queued" || phase === "uploading")) {
        // Never submitted: nothing runs and nothing is billed; only an uploaded archive is left to remove.
        await this.patch(jobId, { phase: "finished", cost_final: 1 });
        return await this.cleanUp({ ...row, phase: "finished" });
      }
      if (cancelled && row.provider_job_id && row.provider_status !== "canceled") {
        const { client } = await this.client(String(row.provider));
        const job = await client.cancel_job(String(row.provider_job_id));
        await this.apply(row, job);
        // The provider may take a moment to stop: polled until it reports the final billed time.
        if (!ended(job.status)) await this.again(Math.min(interval, 5));
        return;
      }
      if (phase === "queued" || phase === "uploading") return await this.dispatch(row, cloud);
      if (phase === "submitting") {
        // Interrupted between asking the provider to train and hearing its answer: a second
        // request could start (and bill) a second run, so the job fails with what to check.
        return await this.fail(
          row,
          "interrupted while being submitted to the provider; check its dashboard for a stray training, then resubmit",
        );
      }
      if (row.provider_job_id) {
        const { client } = await this.client(String(row.provider));
        const job = await client.get_job_status(String(row.provider_job_id));
        await this.apply(row, job);
        if (!ended(job.status)) await this.again(interval);
      }
    } catch (error) {
      await this.failed(row, error, interval);
    }
  }

  /** A transient failure is retried on the alarm (up to MAX_DISPATCH_TRIES while dispatching); anything else fails the job. */
  private async failed(row: Row, error: unknown, interval: number): Promise<void> {
    const jobId = String(row.job_id);
    // A throttled call (429 past the client's own retries) is tried again later too.
    const transient = error instanceof ProviderError && (error.countsAsFailure || error.status === null || error.status === 429);
    const message = error instanceof ApiError ? error.detail : error instanceof Error ? error.message : String(error);
    this.log.warning("cloud job step failed", { job_id: jobId, phase: String(row.phase), transient, error: message });
    if (error instanceof UnknownStatusError && row.phase !== "finished") {
      // Asked again at the next poll, a bounded number of times.
      if (!(await this.unknownStatus(row, error))) await this.again(interval);
      return;
    }
    if (row.phase === "finished") {
      // Only the archive's removal is left: tried again a few times, then left to the provider's own expiry.
      const tries = ((await this.ctx.storage.get<number>("cleanup_tries")) ?? 0) + 1;
      await this.ctx.storage.put("cleanup_tries", tries);
      if (tries < MAX_DISPATCH_TRIES) await this.again(60);
      return;
    }
    if (row.phase === "submitted" || row.phase === "running") {
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
    await this.fail(row, `could not send the job to ${String(row.provider)}: ${message}`);
  }

  private async fail(row: Row, message: string): Promise<void> {
    const jobId = String(row.job_id);
    await this.patch(jobId, { phase: "finished", provider_error: message, cost_final: 1 });
    const change = await finishCloudJob(this.db(), jobId, "failed", message);
    await applyEffects(this.effects("cloud job failed"), change);
    // The row as it is now: `row` may have been read before the archive was uploaded (its file id unknown then).
    const now = (await this.read(jobId).catch(() => null)) ?? row;
    await this.cleanUp({ ...now, phase: "finished" }).catch(() => {});
  }

  /**
   * The provider reported a status the client does not know. Counted (polls, webhooks and
   * cancels together); at MAX_UNKNOWN_STATUS_REPORTS the job is given up: a cancel is sent to
   * the provider (the run may still be billing; its answer, whatever it says, is not waited on)
   * and the job fails naming the status. True when it was given up.
   */
  private async unknownStatus(row: Row, error: UnknownStatusError): Promise<boolean> {
    const jobId = String(row.job_id);
    const reports = ((await this.ctx.storage.get<number>("unknown_status_reports")) ?? 0) + 1;
    await this.ctx.storage.put("unknown_status_reports", reports);
    this.log.warning("the provider reports a status this service does not know", { job_id: jobId, status: error.reported, reports });
    if (reports < MAX_UNKNOWN_STATUS_REPORTS) return false;
    const trainingId = row.provider_job_id ? String(row.provider_job_id) : error.trainingId;
    try {
      const { client } = await this.client(String(row.provider));
      await client.cancel_job(trainingId);
    } catch (problem) {
      this.log.warning("could not cancel a training of unknown status", { job_id: jobId, error: String(problem) });
    }
    await this.fail(
      row,
      `the provider reported the training's status as ${error.reported}, which this service does not know, ${reports} times; ` +
        `the job was given up and a cancel sent to the provider: check training ${trainingId} on the provider's dashboard`,
    );
    return true;
  }

  private effects(trigger: string) {
    return { env: this.env, db: this.db(), log: this.log, actor: null, origin: "request" as const, trigger };
  }

  /** Spec 1 steps 2-4: the archive exactly as confirmed, uploaded to the provider's file hosting, then the training. */
  private async dispatch(row: Row, cloud: CloudSettings): Promise<void> {
    const jobId = String(row.job_id);
    const { client, settings } = await this.client(String(row.provider));
    const bucket = this.env.STORAGE as unknown as PackageBucket;
    const dataloader = JSON.parse(String(row.dataloader_snapshot ?? "[]")) as unknown[];
    const config = JSON.parse(String(row.config_snapshot ?? "{}")) as Record<string, unknown>;
    const plan = await planPackage(bucket, dataloader, config);
    const confirmed = JSON.parse(String(row.summary)) as PackageSummary;
    if (plan.summary.summary_id !== confirmed.summary_id)
      return this.fail(
        row,
        "the datasets changed after the upload summary was confirmed; nothing was uploaded: submit again to review the new summary",
      );

    let archive: { id: string; url: string } | null = row.provider_file_id
      ? { id: String(row.provider_file_id), url: String(row.provider_file_url) }
      : null;
    if (!archive && plan.entries.length > 0) {
      await this.patch(jobId, { phase: "uploading", uploaded_bytes: 0, archive_bytes: plan.summary.archive_bytes });
      let written = 0;
      const progress = (sent: number) => {
        if (Date.now() - written < PROGRESS_EVERY_MS) return;
        written = Date.now();
        void this.patch(jobId, { uploaded_bytes: sent }).catch(() => {});
      };
      // A function, so that a throttled upload is sent again from the start.
      const file = await client.upload_file(`${jobId}.zip`, () => archiveStream(bucket, plan), plan.summary.archive_bytes, progress);
      archive = { id: file.id, url: file.url };
      await this.patch(jobId, { provider_file_id: file.id, provider_file_url: file.url, uploaded_bytes: plan.summary.archive_bytes });
    }
    const now = await this.read(jobId);
    if (!now || now.queue_status !== "running") {
      // Cancelled while uploading: the archive goes, nothing is submitted.
      await this.patch(jobId, { phase: "finished", cost_final: 1 });
      return this.cleanUp({ ...row, provider_file_id: archive?.id ?? null, phase: "finished" });
    }
    const servicePublicUrl = readConfig(this.env).publicUrl;
    const input = await trainerInput({
      db: this.db(),
      jobId,
      destination: String(row.destination),
      plan,
      archive,
      settings,
      cloud,
      servicePublicUrl,
    });
    await this.patch(jobId, { phase: "submitting" });
    const creating = client.run_job({
      job_id: jobId,
      input,
      webhook_url: webhookUrl(publicBase(cloud, servicePublicUrl), String(row.provider)),
    });
    const training = await this.created(now, creating, cloud.poll_interval_seconds);
    if (!training) return;
    await this.patch(jobId, { phase: "submitted", provider_job_id: training.id, submitted_at: new Date().toISOString() });
    this.log.info("cloud job sent to its provider", { job_id: jobId, provider: String(row.provider), provider_job_id: training.id });
    await this.apply({ ...row, phase: "submitted", provider_job_id: training.id }, training);
    await this.again(cloud.poll_interval_seconds);
  }

  /**
   * The training create's outcome (issue 27: a create is never sent twice for one job). Answered:
   * the training. Certainly not acted on (a 429 past the client's retries, a refusal, nothing
   * sent): the job goes back to where it was before the create and the error is thrown, for the
   * alarm to retry or fail it as usual. Anything that may have been acted on (no answer, a
   * timeout, a 5xx, an answer it cannot read) fails the job, never sending it again: a second
   * create could start, and bill, a second run. Created in a status it does not know: tracked by
   * its id like any other. Null when the job was ended or will be polled.
   */
  private async created(row: Row, creating: Promise<ProviderJob>, interval: number): Promise<ProviderJob | null> {
    const jobId = String(row.job_id);
    try {
      return await creating;
    } catch (error) {
      if (error instanceof UnknownStatusError) {
        const submitted = { phase: "submitted", provider_job_id: error.trainingId, submitted_at: new Date().toISOString() };
        await this.patch(jobId, submitted);
        if (!(await this.unknownStatus({ ...row, ...submitted }, error))) await this.again(interval);
        return null;
      }
      if (error instanceof ProviderError && error.unprocessed) {
        await this.patch(jobId, { phase: String(row.phase) });
        throw error;
      }
      const why = error instanceof Error ? error.message : String(error);
      this.log.warning("the answer to a training create was lost", { job_id: jobId, error: why });
      await this.fail(
        row,
        `the provider's answer to the training create was lost (${why}); it may have started a training all the same, so the create was not sent again: ` +
          `check the provider's dashboard for a training of job ${jobId} (cancel it if it runs), then resubmit`,
      );
      return null;
    }
  }

  /** The provider's view of the job, applied: status, times, billed seconds and cost, new log lines as events; the end when it ended. */
  private async apply(row: Row, job: ProviderJob): Promise<void> {
    const jobId = String(row.job_id);
    const over = ended(job.status);
    const rate = Number(row.rate_usd_per_second);
    // Aborted: it never ran, so nothing is billed whatever the times say.
    const seconds =
      job.status === "aborted"
        ? 0
        : billedSecondsNow({ startedAt: job.started_at, completedAt: job.completed_at, billedSeconds: job.billed_seconds }, Date.now());
    const error = job.status === "aborted" ? (job.error ?? ABORTED_REASON) : job.error;
    const offset = Number(row.logs_offset ?? 0);
    // Complete lines only, until the end: a line the provider is still writing is taken whole next time.
    const fresh = job.logs.length > offset ? job.logs.slice(offset) : "";
    const cut = over ? fresh.length : fresh.lastIndexOf("\n") + 1;
    // Each line's seq is where it starts in the provider's log text: a line applied twice (a
    // webhook and a poll with the same text) is stored once.
    const events: { seq: number; event: { type: string; message: string } }[] = [];
    let start = 0;
    for (const line of fresh.slice(0, cut).split("\n")) {
      if (start < cut && (line || start + 1 < cut))
        events.push({ seq: offset + start, event: { type: "log", message: line.slice(0, 4000) } });
      start += line.length + 1;
    }
    for (let at = 0; at < events.length; at += 500) {
      const { stored } = await appendEvents(this.db(), null, jobId, { attempt: 1, events: events.slice(at, at + 500) });
      if (stored.length)
        await hubOf(this.env, jobId)
          .publish(jobId, stored)
          .catch(() => {});
    }
    await this.patch(jobId, {
      provider_status: job.status,
      provider_started_at: job.started_at,
      provider_completed_at: job.completed_at,
      billed_seconds: seconds,
      cost_usd: costOf(rate, seconds),
      cost_final: over ? 1 : 0,
      logs_offset: offset + cut,
      output: job.output === null || job.output === undefined ? null : JSON.stringify(job.output),
      provider_error: error,
      phase: over ? "finished" : job.status === "processing" ? "running" : String(row.phase),
      last_polled_at: new Date().toISOString(),
    });
    if (!over) {
      if (job.started_at && job.started_at !== row.provider_started_at)
        await recordProviderStart(this.db(), jobId, job.started_at, Number(row.expected_seconds));
      if (row.queue_status === "running") await this.enforceBudget(row, costOf(rate, seconds));
      return;
    }
    const change = await finishCloudJob(this.db(), jobId, queueStatusOf(job.status) as "completed" | "failed" | "cancelled", error);
    await applyEffects(this.effects(`cloud job ${job.status}`), change);
    this.log.info("cloud job ended at its provider", {
      job_id: jobId,
      status: job.status,
      billed_seconds: seconds,
      cost_usd: costOf(rate, seconds),
    });
    // The row as it is now: `row` may predate the archive's upload.
    await this.cleanUp({ ...((await this.read(jobId)) ?? row), phase: "finished" });
  }

  /**
   * Money enforced (issue 27, Build 5; edge/cloud/budget.ts): a running job whose billed cost so
   * far reached its approved estimate, or what is left of the spending limit for it, gets the
   * `cloud.budget_exceeded` event, ends `cancelled` with the reason (the lifecycle's end event
   * and webhook carry it), and is cancelled at its provider at once. Both the polls and the
   * webhooks come here (apply).
   */
  private async enforceBudget(row: Row, costUsd: number): Promise<void> {
    if (!(costUsd > 0) || !row.provider_job_id) return;
    const jobId = String(row.job_id);
    const cloud = await getSetting(this.db(), "cloud");
    const estimateUsd =
      row.estimated_cost === null || row.estimated_cost === undefined
        ? costOf(Number(row.rate_usd_per_second), Number(row.expected_seconds))
        : Number(row.estimated_cost);
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
    const { stored } = await appendEvents(this.db(), null, jobId, { attempt: 1, events: [{ seq: BUDGET_EVENT_SEQ, event }] });
    if (stored.length)
      await hubOf(this.env, jobId)
        .publish(jobId, stored)
        .catch(() => {});
    const change = await finishCloudJob(this.db(), jobId, "cancelled", verdict.message);
    await applyEffects(this.effects("cloud job over its budget"), change);
    // Stopped now; should the cancel fail, the alarm's cancel path (the job is no longer running) tries again.
    const { client } = await this.client(String(row.provider));
    const stopped = await client.cancel_job(String(row.provider_job_id));
    await this.apply({ ...row, queue_status: "cancelled" }, stopped);
  }

  /** Spec 1 step 6: the uploaded archive is removed from the provider once the job is over. */
  private async cleanUp(row: Row): Promise<void> {
    if (!row.provider_file_id || row.archive_deleted_at) return;
    const { client } = await this.client(String(row.provider));
    await client.delete_file(String(row.provider_file_id));
    await this.patch(String(row.job_id), { archive_deleted_at: new Date().toISOString() });
  }
}
