import { DurableObject } from "cloudflare:workers";
import { jobTrainer } from "../../shared/trainers";
import { readConfig } from "../config";
import { getSetting, setSetting } from "../settings-store";
import { openDatabase, type Database } from "../db/client";
import type { Env } from "../env";
import { createLogger, type Logger } from "../log";
import { planPass, type PendingJob, type Waiting } from "./plan";
import type { NewJob, PassResult, PreviewOutcome, SchedulerApi, SubmitOutcome, Submitter, WaitInfo } from "./types";
import type { LocalSubmit } from "../../shared/schemas/queue";
import { ApiError } from "../errors";
import { prepareLocalJob, type EnvironmentConfig } from "../queue/submit";
import { forgetOldWebhooks } from "../cloud/webhook-intake";
import { cloudJobOf } from "../cloud/cloud-job-types";
import { unpolledCloudJobs } from "../cloud/record";
import { applyEffects } from "../jobs/lifecycle/effects";
import { sweepSilentWorkers } from "../jobs/lifecycle/sweep-offline";
import { abortEndedUploads } from "../storage/sweep";
import { forgetOldEvents } from "../jobs/event-retention";
import { admitJobs, assignedWorker } from "../jobs/lifecycle/admit";
import { writeBatch } from "../jobs/lifecycle/batch";
import { startEnd, submitJobs, type NewSubmission } from "../jobs/lifecycle/submit";
import { maxRuntimeMinutes } from "../cloud/cost";
import { endAtStart, type ExpectedEnd, type RecentRuns } from "./estimate";
import {
  loadActive,
  loadCapacity,
  loadEntries,
  loadRecentRuns,
  localBoxStatus,
  needsRecentRuns,
  planInput,
  readForSubmissions,
  withRecentRuns,
} from "./store";
import type { ActiveEntry, CapacityWithRules } from "./store";

/** Seconds between background passes (spec 8). */
export const PASS_INTERVAL_MS = 5_000;
/**
 * The active entries are kept in memory between passes and re-read in full at least this often.
 * Changes made elsewhere (cancel, approval, priority) are named by the route that made them and
 * re-read at once; the full re-read bounds how long anything unnamed can go unseen. A stale
 * entry can only make the Scheduler under-use capacity, never double-book it: admissions are
 * conditional on the entry still being pending, and only this object allocates.
 */
export const FULL_RELOAD_MS = 30_000;
/**
 * Limits, rules, workers and environments' GPU options are kept this long for the submissions
 * that follow a read, so a burst of submits does not re-read them per group. Every pass reads
 * them afresh, and the routes that change them without a pass call `forget`; this bound only
 * covers a change made behind the service's back (a hand edit of the database).
 */
export const READ_CACHE_MS = 2_000;
/**
 * A submission waits this long for others to join its group (group commit, like PostgreSQL's
 * commit_delay): under load, groups grow and each costs one plan and one write batch, so
 * sustained submits gain far more than the wait costs one submission.
 */
export const GROUP_WAIT_MS = 4;
/**
 * Recent completed runs (a waiting job's run time when it has no max runtime) are kept this long:
 * they change only as jobs complete, and a median over the last five hardly moves with one more.
 */
export const RECENT_RUNS_MS = 60_000;

/**
 * The only place capacity is handed out: every admission (a pending job to running, with its GPUs
 * or worker) happens in a pass of this single object, one at a time. A pass runs on a 5 s alarm
 * and at once whenever something may have freed or added capacity (routes call `pass`).
 * State lives in libSQL; this object keeps only the last pass's positions and wait reasons.
 */
export class Scheduler extends DurableObject<Env> implements SchedulerApi {
  // Passes and submissions run one after another: the libSQL round trips inside them yield, and
  // without this chain two could plan over the same free GPUs.
  private chain: Promise<unknown> = Promise.resolve();
  private lastPlan: { at: number; waiting: Map<number, WaitInfo> } | null = null;
  private active: { entries: Map<number, ActiveEntry>; loadedAt: number } | null = null;
  private readonly log: Logger;
  private submissions: (Submission & { resolve: (o: SubmitOutcome) => void; reject: (e: unknown) => void })[] = [];
  private capacityRead: { capacity: CapacityWithRules; at: number } | null = null;
  private configs = new Map<string, { environment: EnvironmentConfig; at: number }>();
  /** Bumped by forget(): a read that began before it must not refill the cache with what it read. */
  private generation = 0;
  private recent: { runs: RecentRuns; at: number } | null = null;
  private armed = false;
  /** When this object (the edge) started: a worker's silence counts from here at the earliest (sweep-offline.ts). */
  private readonly startedAt = Date.now();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.log = createLogger("edge/scheduler", readConfig(env));
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.chain.then(work, work);
    this.chain = run.catch(() => {});
    return run;
  }

  // One client for the object's lifetime: unlike a Worker's requests, a Durable Object's calls
  // share one I/O context, so nothing is cancelled across them.
  private database: Database | null = null;
  private db(): Database {
    return (this.database ??= openDatabase(readConfig(this.env)));
  }

  /** Makes sure the background alarm is set (once per instance: the alarm re-arms itself). */
  private async arm(): Promise<void> {
    if (this.armed) return;
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + PASS_INTERVAL_MS);
    this.armed = true;
  }

  override async alarm(): Promise<void> {
    try {
      await this.pass("timer");
      await this.sweepLeftovers();
    } finally {
      await this.ctx.storage.setAlarm(Date.now() + PASS_INTERVAL_MS);
    }
  }

  /**
   * What must not pile up (issues 12, 26): uploads that ended jobs left open, provider webhooks
   * and ended jobs' events past retention; and what must not be forgotten: a running cloud job not
   * polled for three poll intervals (its object's alarm lost) is handed back to its object.
   */
  private async sweepLeftovers(): Promise<void> {
    const db = this.db();
    const pokeCloudJobs = async () => {
      const interval = (await getSetting(db, "cloud")).poll_interval_seconds;
      for (const jobId of await unpolledCloudJobs(db, Math.max(30, 3 * interval))) await cloudJobOf(this.env, jobId).poke(jobId);
    };
    await Promise.all([abortEndedUploads(db, this.env.STORAGE), forgetOldWebhooks(db), forgetOldEvents(db), pokeCloudJobs()]).catch(
      (error: unknown) => this.log.warning("sweep failed", { error: String(error) }),
    );
  }

  /**
   * HTTP entry for the local host process, which cannot call RPC methods: a start-up pass, and
   * `npm start -- --env <name>`'s submission (POST /submit). Not routed from the Worker: only
   * the host reaches it, through the Durable Object namespace.
   */
  override async fetch(request: Request): Promise<Response> {
    if (request.method === "POST" && new URL(request.url).pathname === "/submit") {
      const { user, body } = (await request.json()) as { user: Submitter; body: LocalSubmit };
      return Response.json(await this.submit(user, body));
    }
    const trigger = new URL(request.url).searchParams.get("trigger") ?? "http";
    // Spec 3: a restart starts the local jobs a cancelled running job left waiting.
    if (trigger === "startup") await setSetting(this.db(), "local_queue_paused", false);
    return Response.json(await this.pass(trigger));
  }

  /**
   * Drops what was read for submissions (limits, rules, workers, environments): for the routes
   * that change those without running a pass (environments, approval rules, a draining worker).
   */
  async forget(): Promise<void> {
    this.generation++;
    this.capacityRead = null;
    this.configs.clear();
  }

  /** Runs one pass now and reports what it started. `changed`: job ids just changed elsewhere. */
  async pass(trigger: string, changed: string[] = [], rereadAll = false): Promise<PassResult> {
    await this.arm();
    return this.exclusive(() => {
      if (rereadAll) this.active = null;
      return this.runPass(trigger, changed);
    });
  }

  /** The active entries, brought up to date: in full when stale, else only the named ones. */
  private async entries(db: Database, changed: string[]): Promise<Map<number, ActiveEntry>> {
    // A run that ended is a recent run: waiting jobs' run times are read afresh with it.
    const ended = (ids: Iterable<number>) => {
      for (const id of ids) if (this.active?.entries.get(id)?.status === "running") this.recent = null;
    };
    if (this.active === null || Date.now() - this.active.loadedAt > FULL_RELOAD_MS) {
      const loadedAt = Date.now();
      const entries = new Map((await loadActive(db)).map((e) => [e.job.id, e]));
      if (this.active) ended([...this.active.entries.keys()].filter((id) => !entries.has(id)));
      this.active = { entries, loadedAt };
      return entries;
    }
    const { active, inactiveIds } = await loadEntries(db, changed);
    const entries = this.active.entries;
    ended(inactiveIds);
    for (const id of inactiveIds) entries.delete(id);
    for (const e of active) entries.set(e.job.id, e);
    return entries;
  }

  /** Positions and reasons of waiting jobs as of the latest pass (running one first if none). */
  async waitInfo(): Promise<WaitInfo[]> {
    if (this.lastPlan === null) await this.pass("first read");
    return [...(this.lastPlan?.waiting.values() ?? [])];
  }

  /**
   * Decides a local submission in the same pass that would start it, so two submissions can
   * never be given the same GPU: it is stored running when it fits now, pending otherwise (or not
   * at all with `noWait`), blocked when an approval rule caught it.
   *
   * Submissions that arrive while another is being decided are decided together (group commit):
   * one read of the capacity, then one pass with every new job among its pending candidates in
   * arrival order, one write batch. A burst of submits then costs a few round trips in all
   * instead of a few each.
   */
  async submit(user: Submitter, body: LocalSubmit): Promise<SubmitOutcome> {
    return this.enqueue({ user, body });
  }

  /**
   * What `submit` would answer for this submission now, storing nothing: the same reads, the same
   * preparation and one plan with it among the pending candidates, but no write batch, no
   * effects, and the last pass's positions kept as they were. In the chain, so it sees the state
   * between two passes or submission groups, never half of one.
   */
  async preview(user: Submitter, body: LocalSubmit): Promise<PreviewOutcome> {
    return this.exclusive(async () => {
      const db = this.db();
      const [{ capacity, configs }, entries] = await Promise.all([this.submissionReads(db, [{ user, body }]), this.entries(db, [])]);
      let job: NewJob;
      try {
        job = prepareLocalJob(user, body, configs.get(body.config_name) ?? null, capacity.approvalRules);
      } catch (error) {
        return invalidOutcome(error);
      }
      if (job.approvalRule !== null) return { status: "blocked", rule: job.approvalRule };
      const now = Date.now();
      const candidate = candidateOf(job, CANDIDATE_ID_BASE, now);
      const recent = await this.recentRuns(db, entries, [candidate]);
      const input = planInput(entries.values(), capacity, now, recent);
      const plan = planPass({ ...input, pending: [...input.pending, withRecentRuns(candidate, facts(job), recent)] });
      const admission = plan.admitted.find((a) => a.id === CANDIDATE_ID_BASE);
      if (admission) return { status: "running", gpus: admission.gpus, workerId: admission.workerId };
      const place = plan.waiting.find((w) => w.id === CANDIDATE_ID_BASE)!;
      if (body.no_wait) return { status: "rejected", reason: place.reason, message: place.message };
      return { status: "queued", position: place.position, reason: place.reason, message: place.message };
    });
  }

  /** A cloud submission, prepared by edge/cloud/submit.ts: decided in the same group and pass as local ones. */
  async submitJob(job: NewJob): Promise<SubmitOutcome> {
    return this.enqueue({ prepared: job });
  }

  private async enqueue(submission: Submission): Promise<SubmitOutcome> {
    await this.arm();
    return new Promise<SubmitOutcome>((resolve, reject) => {
      this.submissions.push({ ...submission, resolve, reject });
      // The first one in schedules a group; submissions arriving within GROUP_WAIT_MS (and while
      // earlier work runs) join it.
      if (this.submissions.length === 1) setTimeout(() => void this.exclusive(() => this.submitGroup()), GROUP_WAIT_MS);
    });
  }

  private async submitGroup(): Promise<void> {
    const group = this.submissions.splice(0);
    if (!group.length) return;
    try {
      const db = this.db();
      const [{ capacity, configs }, entries] = await Promise.all([this.submissionReads(db, group), this.entries(db, [])]);
      const { outcomes } = await this.decide(db, new Date(), capacity, entries, "submit", group, configs);
      group.forEach((s, i) => s.resolve(outcomes[i]!));
    } catch (error) {
      for (const s of group) s.reject(error);
    }
  }

  /** Capacity and the environments' options a group needs: from the last read when recent, else one read batch. */
  private async submissionReads(db: Database, submissions: Submission[]) {
    const at = Date.now();
    const fresh = (read: { at: number } | null | undefined) => read !== null && read !== undefined && at - read.at < READ_CACHE_MS;
    const cached = fresh(this.capacityRead) ? this.capacityRead!.capacity : null;
    const names = submissions.flatMap((s) => ("body" in s ? [s.body.config_name] : []));
    const missing = [...new Set(names)].filter((name) => !fresh(this.configs.get(name)));
    const generation = this.generation;
    const read = cached && !missing.length ? null : await readForSubmissions(db, !cached, missing);
    const capacity = cached ?? read!.capacity!;
    // An environment changed while this read was in flight (forget() ran): what was read serves
    // this group, which was submitted before the change answered, but is not kept for the next.
    const keep = generation === this.generation;
    if (!cached && keep) this.capacityRead = { capacity, at };
    const configs = new Map<string, EnvironmentConfig>();
    for (const [name, kept] of this.configs) if (fresh(kept)) configs.set(name, kept.environment);
    for (const [name, environment] of read?.environments ?? []) {
      configs.set(name, environment);
      if (keep) this.configs.set(name, { environment, at });
    }
    return { capacity, configs };
  }

  private async runPass(trigger: string, changed: string[]): Promise<PassResult> {
    const db = this.db();
    const now = new Date();
    const before = await loadCapacity(db);
    const offline = await sweepSilentWorkers(db, before.limits.worker_heartbeat_timeout_seconds, now, this.startedAt);
    for (const w of offline.workers)
      this.log.warning("worker went offline: no heartbeat", {
        worker_id: w.id,
        worker: w.name,
        timeout_s: before.limits.worker_heartbeat_timeout_seconds,
      });
    // Not awaited: the failed jobs' end events and webhooks need not hold up this pass's admissions.
    if (offline.jobs.length)
      void applyEffects({ env: this.env, db, log: this.log, actor: null, origin: "scheduler", trigger: "offline sweep" }, offline);
    const [capacity, entries] = await Promise.all([
      offline.workers.length ? loadCapacity(db) : before,
      this.entries(db, [...changed, ...offline.jobs.map((j) => j.jobId)]),
    ]);
    this.capacityRead = { capacity, at: now.getTime() };
    const { started, waiting } = await this.decide(db, now, capacity, entries, trigger);
    return { started, waiting, offline: offline.workers.map((w) => w.name) };
  }

  /**
   * One pass, the only admission path: the stored pending entries and the new submissions (none
   * for a timer or nudged pass) are the candidates of one plan, written as one batch - the new
   * jobs inserted with their outcome, then the stored ones admitted - whose effects are applied
   * as one change. `outcomes` answers the submissions, in their order.
   */
  private async decide(
    db: Database,
    now: Date,
    capacity: CapacityWithRules,
    entries: Map<number, ActiveEntry>,
    trigger: string,
    submissions: Submission[] = [],
    configs = new Map<string, EnvironmentConfig>(),
  ): Promise<{ started: string[]; waiting: number; outcomes: SubmitOutcome[] }> {
    const outcomes: (SubmitOutcome | null)[] = submissions.map(() => null);
    const jobs = submissions.map((submission, index) => {
      if ("prepared" in submission) return submission.prepared;
      const { user, body } = submission;
      try {
        return prepareLocalJob(user, body, configs.get(body.config_name) ?? null, capacity.approvalRules);
      } catch (error) {
        outcomes[index] = invalidOutcome(error);
        return null;
      }
    });
    // A new job waits on approval before it is a candidate; the others join the stored pending
    // entries under placeholder ids, which sort after stored jobs queued at the same time.
    const candidates: PendingJob[] = [];
    jobs.forEach((job, index) => {
      if (job !== null && job.approvalRule === null) candidates.push(candidateOf(job, CANDIDATE_ID_BASE + index, now.getTime()));
    });
    const recent = await this.recentRuns(db, entries, candidates);
    const input = planInput(entries.values(), capacity, now.getTime(), recent);
    const estimated = candidates.map((c) => withRecentRuns(c, facts(jobs[c.id - CANDIDATE_ID_BASE]!), recent));
    const pending = candidates.length ? [...input.pending, ...estimated] : input.pending;
    const plan = planPass({ ...input, pending });

    const admittedById = new Map(plan.admitted.map((a) => [a.id, a]));
    const isNew = (w: Waiting) => w.id >= CANDIDATE_ID_BASE;
    const waitingById = new Map(plan.waiting.filter(isNew).map((w) => [w.id, w]));
    const rejected = new Set<number>(); // placeholder ids answered "rejected" (no_wait): never stored
    const fresh: { index: number; submission: NewSubmission }[] = [];
    jobs.forEach((job, index) => {
      if (job === null) return;
      const id = CANDIDATE_ID_BASE + index;
      const admission = admittedById.get(id);
      if (job.approvalRule !== null) fresh.push({ index, submission: { job, to: "blocked" } });
      else if (admission) fresh.push({ index, submission: { job, to: "running", admission } });
      else if (noWait(submissions[index]!)) {
        const waiting = waitingById.get(id)!;
        outcomes[index] = { status: "rejected", reason: waiting.reason, message: waiting.message };
        rejected.add(id);
      } else fresh.push({ index, submission: { job, to: "pending" } });
    });
    // Rejected submissions were never stored: the others' positions close up behind them.
    const waiting = rejected.size
      ? plan.waiting.filter((w) => !rejected.has(w.id)).map((w, i) => ({ ...w, position: i + 1 }))
      : plan.waiting;
    const places = rejected.size ? new Map(waiting.filter(isNew).map((w) => [w.id, w])) : waitingById;
    const stored = plan.admitted.filter((a) => a.id < CANDIDATE_ID_BASE);
    const stamp = now.toISOString();
    // Each admitted job's end as it starts now, from its max runtime or cloud allowance, else
    // from the run time the plan expected of it (recent runs), until its progress says better.
    const ends = new Map<number, ExpectedEnd>();
    for (const a of stored) {
      const e = entries.get(a.id);
      const end = e && endAtStart({ maxRuntime: e.maxRuntimeMinutes, cloudSeconds: e.cloudSeconds }, now.getTime(), a);
      if (end) ends.set(a.id, end);
    }
    const [submitted, admitted] = await writeBatch(db, [
      submitJobs(
        fresh.map((f) => f.submission),
        capacity.localWorkerId,
        stamp,
      ),
      admitJobs(stored, capacity.localWorkerId, stamp, ends),
      localBoxStatus(capacity.localWorkerId),
    ]);

    // What the batch really did, in memory and in the answers; new jobs under their stored ids.
    const realIds = new Map<number, number>(); // placeholder id -> stored id
    fresh.forEach(({ index, submission }, k) => {
      const { id, approvalId } = submitted.stored[k]!;
      const { job } = submission;
      if (submission.to === "blocked") {
        outcomes[index] = {
          status: "blocked",
          id,
          jobId: job.jobId,
          approvalId: approvalId!,
          message: `awaiting an admin's approval: ${job.approvalRule}`,
        };
        this.log.info("job blocked for approval", { job_id: job.jobId, rule: job.approvalRule });
        return;
      }
      const candidate = candidateOf(job, id, now.getTime());
      const kept = {
        ...facts(job),
        maxRuntimeMinutes: maxRuntimeMinutes(job.configSnapshot["--max_runtime_minutes"]),
        cloudSeconds: job.cloudSeconds ?? null,
      };
      realIds.set(CANDIDATE_ID_BASE + index, id);
      if (submission.to === "running") {
        const { gpus, workerId } = submission.admission;
        entries.set(id, {
          job: candidate,
          status: "running",
          allocatedGpus: gpus ?? [],
          workerId: assignedWorker(submission.admission, capacity.localWorkerId),
          ...kept,
          expectedEndAt: startEnd(job, now.getTime(), submission.admission)?.at ?? null,
        });
        outcomes[index] = { status: "running", id, jobId: job.jobId, gpus, workerId };
      } else {
        entries.set(id, { job: candidate, status: "pending", allocatedGpus: [], workerId: null, ...kept, expectedEndAt: null });
        const place = places.get(CANDIDATE_ID_BASE + index)!;
        outcomes[index] = {
          status: "queued",
          id,
          jobId: job.jobId,
          position: place.position,
          reason: place.reason,
          message: place.message,
        };
      }
    });
    for (const a of stored) {
      const e = entries.get(a.id);
      if (!e) continue;
      // One not started is no longer pending: it is re-read on the next full load.
      if (!admitted.started.has(a.id)) entries.delete(a.id);
      else
        entries.set(a.id, {
          ...e,
          status: "running",
          allocatedGpus: a.gpus ?? [],
          workerId: assignedWorker(a, capacity.localWorkerId),
          expectedEndAt: ends.get(a.id)?.at ?? null,
        });
    }
    this.remember(waiting, realIds, pending);
    // Inside the pass: wakes the runners given jobs, and asks for no further pass.
    const effects = { env: this.env, db, log: this.log, actor: null, origin: "scheduler", trigger } as const;
    void applyEffects(effects, { jobs: [...submitted.change.jobs, ...admitted.change.jobs] });
    const started = admitted.change.jobs.map((j) => j.jobId);
    this.report(started, trigger);
    return { started, waiting: waiting.length, outcomes: outcomes.map((o) => o!) };
  }

  /**
   * Recent completed runs, for waiting local jobs without a max runtime (and none read when no
   * such job waits): kept RECENT_RUNS_MS.
   */
  private async recentRuns(db: Database, entries: Map<number, ActiveEntry>, candidates: PendingJob[]): Promise<RecentRuns> {
    if (!needsRecentRuns(entries.values(), candidates)) return new Map();
    const at = Date.now();
    if (this.recent === null || at - this.recent.at > RECENT_RUNS_MS) this.recent = { runs: await loadRecentRuns(db, new Date(at)), at };
    return this.recent.runs;
  }

  /** Keeps the pass's waiting jobs for `waitInfo`; `realIds` maps new submissions' placeholder ids to their stored ids. */
  private remember(waiting: Waiting[], realIds: Map<number, number>, pending: PendingJob[]): void {
    const kept = new Map<number, WaitInfo>();
    // Each waiting job's expected run time as this plan used it (the listing shows it as is).
    const jobs = new Map(pending.map((j) => [j.id, j]));
    for (const w of waiting) {
      const id = w.id >= CANDIDATE_ID_BASE ? realIds.get(w.id) : w.id;
      const { expectedMs = null, expectedMethod = null } = jobs.get(w.id) ?? {};
      if (id !== undefined)
        kept.set(id, {
          ...w,
          id,
          ...(expectedMs !== null && expectedMethod !== null ? { expected: { ms: expectedMs, method: expectedMethod } } : {}),
        });
    }
    this.lastPlan = { at: Date.now(), waiting: kept };
  }

  private report(started: string[], trigger: string): void {
    if (started.length) this.log.info(`scheduler started ${started.length} job(s)`, { trigger, job_ids: started.slice(0, 50) });
  }
}

/** A local submission to decide, or a job prepared elsewhere (a cloud submission, which always waits when it cannot start). */
type Submission = { user: Submitter; body: LocalSubmit } | { prepared: NewJob };
const noWait = (s: Submission) => "body" in s && s.body.no_wait;

/** A submission refused by prepareLocalJob (no such environment, bad GPU options), as the outcome that answers it. */
function invalidOutcome(error: unknown): Extract<SubmitOutcome, { status: "invalid" }> {
  if (!(error instanceof ApiError)) throw error;
  return {
    status: "invalid",
    httpStatus: error.status === 404 ? 404 : 422,
    code: error.code,
    message: error.detail,
    ...(error.fields ? { errors: error.fields } : {}),
  };
}

/** What a new job's run time is estimated from, besides its max runtime. */
const facts = (job: NewJob) => ({ configName: job.configName, trainSteps: job.configSnapshot["--max_train_steps"] ?? null });

/** Placeholder ids of new submissions sort after every stored job of the same priority and time, in arrival order. */
const CANDIDATE_ID_BASE = Number.MAX_SAFE_INTEGER - 1_000_000;

/** A new job as a plan's candidate; its expected run time is its max runtime only (withRecentRuns adds recent runs). */
function candidateOf(job: NewJob, id: number, queuedAt: number): PendingJob {
  const minutes = maxRuntimeMinutes(job.configSnapshot["--max_runtime_minutes"]);
  return {
    id,
    jobId: job.jobId,
    userId: job.userId,
    teamId: job.teamId,
    priority: job.priority,
    priorityOverride: null,
    queuedAt,
    jobType: job.jobType,
    numProcesses: job.numProcesses,
    target: job.target,
    workerLabels: job.workerLabels,
    deviceIds: job.deviceIds,
    anyGpu: job.anyGpu,
    estimatedCost: job.estimatedCost,
    expectedMs: minutes === null ? null : minutes * 60_000,
    expectedMethod: minutes === null ? null : "max_runtime",
    trainer: job.jobType === "local" ? jobTrainer(job.configSnapshot) : null,
  };
}
