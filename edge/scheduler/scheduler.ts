import { DurableObject } from "cloudflare:workers";
import type { LocalSubmit } from "../../shared/schemas/queue";
import { readConfig } from "../config";
import { openDatabase, type Database } from "../db/client";
import type { Env } from "../env";
import { endAtStart, type ExpectedEnd } from "../jobs/estimate";
import type { NewJob, PreviewOutcome, SubmitOutcome, Submitter, WaitInfo } from "../jobs/job";
import { admitJobs, assignedWorker, type Admitted } from "../jobs/lifecycle/admit";
import { writeBatch } from "../jobs/lifecycle/batch";
import { applyEffects } from "../jobs/lifecycle/effects";
import { startEnd, submitJobs, type Submitted } from "../jobs/lifecycle/submit";
import { sweepSilentWorkers } from "../jobs/lifecycle/sweep-offline";
import { markStalledJobs } from "../jobs/lifecycle/stall";
import { prepareLocalJob, type EnvironmentConfig } from "../jobs/prepare";
import { maxRuntimeMinutes } from "../jobs/runtime";
import { createLogger, type Logger } from "../log";
import { publicUrlOf } from "../notifications/notify";
import { setSetting } from "../settings-store";
import { announceBudgets, CHECK_EVERY_MS } from "../spend/budget-notices";
import { budgetApplies } from "../spend/budgets";
import { ActiveEntries } from "./active";
import { CapacityCache } from "./cache";
import { WaitingSubmissions } from "./waiting-submissions";
import { sweepLeftovers } from "./housekeeping";
import { expectedStarts, type ExpectedStart } from "./forecast";
import { Frontier, keyOf, type OrderKey } from "./frontier";
import { planPass, type Admission, type PendingJob, type Plan, type PlanInput, type Waiting } from "./plan";
import { capacitySignature, loadCapacity, localBoxStatus, planInput, withRecentRuns } from "./store";
import type { ActiveEntry, CapacityWithRules } from "./store";
import {
  CANDIDATE_ID_BASE,
  candidateOf,
  candidatesOf,
  facts,
  freshOutcome,
  invalidOutcome,
  isNew,
  prepareSubmissions,
  sortSubmissions,
  storedAnswers,
  type Sorted,
  type Submission,
} from "./submissions";
import type { PassResult, SchedulerApi } from "../jobs/objects";

/**
 * A submission waits this long for others to join its group (group commit, like PostgreSQL's
 * commit_delay): under load, groups grow and each costs one plan and one write batch, so
 * sustained submits gain far more than the wait costs one submission.
 */
export const GROUP_WAIT_MS = 4;
/**
 * The only place capacity is handed out: every admission (a pending job to running, with its GPUs
 * or worker) happens in a pass of this single object, one at a time. A pass runs on a 5 s alarm (SCHEDULER_PASS_SECONDS)
 * and at once whenever something may have freed or added capacity (routes call `pass`).
 * State lives in libSQL; this object keeps the last pass's positions and wait reasons, the
 * active entries, and what submissions read (CapacityCache, checked against the capacity version).
 */
export class Scheduler extends DurableObject<Env> implements SchedulerApi {
  // Passes and submissions run one after another: the libSQL round trips inside them yield, and
  // without this chain two could plan over the same free GPUs.
  private chain: Promise<unknown> = Promise.resolve();
  private lastPlan: LastPlan | null = null;
  /** What the last full plan lets submission groups skip (frontier.ts); null: the next group plans everything. */
  private frontier: Frontier | null = null;
  /** The latest forecast's expected starts by stored id: a submission group keeps them (forecast.ts). */
  private forecast = new Map<number, ExpectedStart>();
  private readonly active = new ActiveEntries();
  private readonly log: Logger;
  private readonly cache = new CapacityCache();
  /** Submissions waiting for a group, and the read made ahead for them (waiting-submissions.ts). */
  private readonly submissions = new WaitingSubmissions<
    Submission & { resolve: (o: SubmitOutcome | "budgeted") => void; reject: (e: unknown) => void },
    ReturnType<CapacityCache["readAhead"]>
  >();
  private armed = false;
  /** When this object (the edge) started: a worker's silence counts from here at the earliest (sweep-offline.ts). */
  private readonly startedAt = Date.now();
  /** When the beat last looked at every budget (edge/spend/budget-notices.ts). */
  private budgetsCheckedAt = 0;

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
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + readConfig(this.env).passIntervalMs);
    this.armed = true;
  }

  override async alarm(): Promise<void> {
    try {
      await this.pass("timer");
      await sweepLeftovers(this.env, this.db(), this.log);
    } finally {
      await this.ctx.storage.setAlarm(Date.now() + readConfig(this.env).passIntervalMs);
    }
  }

  /**
   * HTTP entry for `npm start -- --env <name>`'s submission (POST /submit), from the local host
   * process through Miniflare's binding proxy, which cannot call RPC methods. Not routed from the
   * Worker: only the host reaches it. (The host's start-up pass goes through the Worker:
   * edge/host-call.ts.)
   */
  override async fetch(request: Request): Promise<Response> {
    if (request.method === "POST" && new URL(request.url).pathname === "/submit") {
      const { user, body } = (await request.json()) as { user: Submitter; body: LocalSubmit };
      return Response.json(await this.submit(user, body));
    }
    return new Response("not found", { status: 404 });
  }

  /** The pass at the service's start (edge/host-call.ts): a restart starts the local jobs a cancelled running job left waiting. */
  async startupPass(): Promise<PassResult> {
    await setSetting(this.db(), "local_queue_paused", false);
    return this.pass("startup");
  }

  /** Runs one pass now and reports what it started. `changed`: job ids just changed elsewhere. */
  async pass(trigger: string, changed: string[] = [], rereadAll = false): Promise<PassResult> {
    await this.arm();
    return this.exclusive(() => {
      if (rereadAll) this.active.drop();
      return this.runPass(trigger, changed);
    });
  }

  /**
   * Positions and reasons of waiting jobs as of the latest pass. Before any pass of this object
   * (just started), a plan over what is stored now, read-only as `preview`'s: it admits nothing and
   * writes nothing, and the alarm's pass (armed here) starts what fits. A job the plan would start
   * has no place until then.
   */
  async waitInfo(ids?: number[]): Promise<WaitInfo[]> {
    await this.arm();
    if (this.lastPlan === null)
      await this.exclusive(async () => {
        if (this.lastPlan !== null) return;
        const db = this.db();
        const [capacity, entries] = await Promise.all([loadCapacity(db), this.active.read(db, [])]);
        this.cache.keep(capacity);
        const { plan, pending, starts } = await this.planWith(db, new Date(), capacity, entries, []);
        this.remember(plan.waiting, new Map(), pending, starts);
      });
    return this.lastPlan?.info(ids) ?? [];
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
    return decided(await this.enqueue({ user, body }));
  }

  /**
   * `submit` for a caller that has not held the submitter to their budgets: the group's read
   * batch reads the budgets too, and a submission no budget applies to is decided in that group
   * (no budget can refuse it or make it wait); one a budget applies to answers "budgeted", with
   * nothing stored, for the caller to check it and call `submit`. The budgets are read just before
   * the group's write, later than a caller's own read could be. `answerTo`: the Idempotency-Key the
   * request claimed; every outcome but "budgeted" and invalid is stored as its answer (submitAnswer's
   * body, status 200) in the batch that stores the job.
   */
  async submitUnlessBudgeted(
    user: Submitter,
    body: LocalSubmit,
    answerTo?: { userId: number; key: string },
  ): Promise<SubmitOutcome | "budgeted"> {
    return this.enqueue({ user, body, budgetsUnchecked: true, ...(answerTo ? { answerTo } : {}) });
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
      const [{ capacity, configs }, entries] = await Promise.all([this.cache.read(db, [body.config_name]), this.active.read(db, [])]);
      let job: NewJob;
      try {
        job = prepareLocalJob(user, body, configs.get(body.config_name) ?? null, capacity.approvalRules);
      } catch (error) {
        return invalidOutcome(error);
      }
      if (job.approvalRule !== null) return { status: "blocked", rule: job.approvalRule };
      const { plan, pending, starts } = await this.planWith(db, new Date(), capacity, entries, [job]);
      const admission = plan.admitted.find((a) => a.id === CANDIDATE_ID_BASE);
      if (admission) return { status: "running", gpus: admission.gpus, workerId: admission.workerId };
      const place = plan.waiting.find((w) => w.id === CANDIDATE_ID_BASE)!;
      if (body.no_wait) return { status: "rejected", reason: place.reason, message: place.message };
      const candidate = pending.find((p) => p.id === CANDIDATE_ID_BASE);
      const expected =
        candidate?.expectedMs != null
          ? { ms: candidate.expectedMs, basis: candidate.expectedBasis ?? candidate.expectedMethod ?? "" }
          : null;
      const start = starts?.get(CANDIDATE_ID_BASE) ?? { at: null, basis: "unknown: not simulated" };
      return { status: "queued", position: place.position, reason: place.reason, message: place.message, start, expected };
    });
  }

  /** A cloud submission, prepared by edge/cloud/submit.ts: decided in the same group and pass as local ones. */
  async submitJob(job: NewJob): Promise<SubmitOutcome> {
    return decided(await this.enqueue({ prepared: job }));
  }

  private async enqueue(submission: Submission): Promise<SubmitOutcome | "budgeted"> {
    await this.arm();
    return new Promise<SubmitOutcome | "budgeted">((resolve, reject) => {
      this.submissions.push({ ...submission, resolve, reject });
      // The first one in schedules a group; submissions arriving within GROUP_WAIT_MS (and while
      // earlier work runs) join it.
      if (this.submissions.length === 1) setTimeout(() => void this.exclusive(() => this.submitGroup()), GROUP_WAIT_MS);
    });
  }

  private async submitGroup(): Promise<void> {
    const { group, read: ahead } = this.submissions.take();
    // Those that arrived after the read made ahead was started: the next group.
    if (this.submissions.length) void this.exclusive(() => this.submitGroup());
    if (!group.length) return;
    try {
      const db = this.db();
      const names = namesOf(group);
      const [{ capacity, configs, budgets }, entries] = await Promise.all([this.cache.read(db, names, ahead), this.active.read(db, [])]);
      // A submission not yet held to a budget that applies goes back to its caller undecided.
      const ready = group.filter((s) => {
        if (!("body" in s) || !s.budgetsUnchecked || !budgetApplies(budgets, s.user)) return true;
        s.resolve("budgeted");
        return false;
      });
      if (!ready.length) return;
      const { outcomes } = await this.decide(db, new Date(), capacity, entries, "submit", ready, configs);
      ready.forEach((s, i) => s.resolve(outcomes[i]!));
    } catch (error) {
      for (const s of group) s.reject(error);
    }
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
    const stalled = await markStalledJobs({ env: this.env, db, log: this.log }, now, this.startedAt);
    if (stalled.jobs.length)
      void applyEffects({ env: this.env, db, log: this.log, actor: null, origin: "scheduler", trigger: "stall policy" }, stalled);
    if (now.getTime() - this.budgetsCheckedAt >= CHECK_EVERY_MS) {
      this.budgetsCheckedAt = now.getTime();
      // Not awaited: telling people of a budget's crossing need not hold up admissions.
      void announceBudgets({ db, env: this.env, log: this.log, publicUrl: publicUrlOf(this.env) }, now, "all");
    }
    const [capacity, entries] = await Promise.all([
      offline.workers.length ? loadCapacity(db) : before,
      this.active.read(db, [...changed, ...offline.jobs.map((j) => j.jobId), ...stalled.jobs.map((j) => j.jobId)]),
    ]);
    this.cache.keep(capacity, now.getTime());
    const { started, waiting } = await this.decide(db, now, capacity, entries, trigger);
    return { started, waiting, offline: offline.workers.map((w) => w.name) };
  }

  /**
   * One pass, the only admission path, over what the caller read (1. read: the capacity, the
   * active entries, the submissions' environments): the stored pending entries and the new
   * submissions (none for a timer or nudged pass) are the candidates of one plan, written as one
   * batch, remembered, and their effects applied as one change. `outcomes` answers the
   * submissions, in their order.
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
    // 2. Prepare: each submission made a job, or answered at once when it is invalid.
    const { jobs, outcomes } = prepareSubmissions(submissions, configs, capacity.approvalRules);
    // 3. Plan: the stored pending entries and the new jobs, in one plan.
    // A submission group keeps the last pass's expected starts: the simulation costs a plan per
    // expected end, and the next timer pass (within 5 s) refreshes them.
    // A group while the last full plan's frontier holds plans only the new jobs, what runs and the
    // waiting jobs that may act on them (frontier.ts); anything else, or a stored job admitted by
    // such a plan (which the frontier says cannot happen), plans everything.
    const signature = capacitySignature(capacity);
    const frontier = submissions.length && this.frontier?.serves(now.getTime(), signature, this.active.generation) ? this.frontier : null;
    let planned = frontier ? await this.planWith(db, now, capacity, frontier.entries(entries), jobs, false) : null;
    if (planned?.plan.admitted.some((a) => a.id < CANDIDATE_ID_BASE)) planned = null;
    const { plan, pending, starts, input } = planned ?? (await this.planWith(db, now, capacity, entries, jobs, trigger !== "submit"));
    // 4. Sort the new jobs by the plan: stored running, pending or blocked, or answered rejected.
    const sorted = sortSubmissions(plan, jobs, submissions, outcomes);
    // Over the frontier, the new jobs' places are their places in the whole queue.
    const keys = new Map<number, OrderKey>();
    if (planned) {
      const threshold = capacity.limits.starvation_threshold_minutes;
      const byId = new Map(pending.map((j) => [j.id, j]));
      let ahead = 0;
      for (const w of sorted.waiting) {
        if (!isNew(w)) continue;
        const key = keyOf(byId.get(w.id)!, now.getTime(), threshold);
        keys.set(w.id, key);
        sorted.places.set(w.id, { ...w, position: frontier!.positionOf(key, ahead++) });
      }
    }
    // 5. Write: the new jobs, then the stored ones admitted, then the local box's status, then the
    // answers of the submissions that claimed an Idempotency-Key; one batch.
    const stored = plan.admitted.filter((a) => a.id < CANDIDATE_ID_BASE);
    const ends = expectedEnds(stored, entries, now.getTime());
    const stamp = now.toISOString();
    this.submissions.readAhead((waiting) => this.cache.readAhead(db, namesOf(waiting)));
    const [submitted, admitted] = await writeBatch(db, [
      submitJobs(
        sorted.fresh.map((f) => f.submission),
        capacity.localWorkerId,
        stamp,
      ),
      admitJobs(stored, capacity.localWorkerId, stamp, ends),
      localBoxStatus(capacity.localWorkerId),
      storedAnswers(submissions, sorted, outcomes),
    ]);
    // 6. Remember what the batch really did: the entries, the waiting jobs' places, the answers.
    const realIds = this.rememberSubmitted(entries, sorted, submitted, capacity, now.getTime(), outcomes);
    rememberAdmitted(entries, stored, admitted, ends, capacity.localWorkerId);
    if (planned) this.rememberOverFrontier(frontier!, sorted, submitted, realIds, pending, keys);
    else {
      this.remember(sorted.waiting, realIds, pending, starts);
      const running: number[] = [];
      for (const [id, e] of entries) if (e.status === "running") running.push(id);
      const storedId = (id: number) => (isNew({ id }) ? realIds.get(id) : id);
      this.frontier = Frontier.of({ ...input, pending }, sorted.waiting, running, signature, this.active.generation, storedId);
      this.lastPlan!.over(this.frontier);
    }
    // 7. Effects, inside the pass: wakes the runners given jobs, and asks for no further pass.
    const effects = { env: this.env, db, log: this.log, actor: null, origin: "scheduler", trigger } as const;
    void applyEffects(effects, { jobs: [...submitted.change.jobs, ...admitted.change.jobs] });
    const started = admitted.change.jobs.map((j) => j.jobId);
    this.report(started, trigger);
    return { started, waiting: sorted.waiting.length, outcomes: outcomes.map((o) => o!) };
  }

  /**
   * One plan over the stored entries and the new jobs (null ones skipped, as are those an approval
   * rule caught), each waiting job's run time from recent runs when it has no max runtime. Reads
   * recent runs at most; writes nothing.
   */
  private async planWith(
    db: Database,
    now: Date,
    capacity: CapacityWithRules,
    entries: Map<number, ActiveEntry>,
    jobs: (NewJob | null)[],
    forecast = true,
  ): Promise<{ plan: Plan; pending: PendingJob[]; starts: Map<number, ExpectedStart> | null; input: PlanInput }> {
    const candidates = candidatesOf(jobs, now.getTime());
    const recent = await this.active.recentRuns(db, entries, candidates);
    const input = planInput(entries.values(), capacity, now.getTime(), recent);
    const estimated = candidates.map((c) => withRecentRuns(c, facts(jobs[c.id - CANDIDATE_ID_BASE]!), recent));
    const pending = candidates.length ? [...input.pending, ...estimated] : input.pending;
    const plan = planPass({ ...input, pending });
    // Each waiting job's expected start: this plan run forward (forecast.ts).
    return { plan, pending, starts: forecast ? expectedStarts({ ...input, pending }, plan) : null, input };
  }

  /**
   * The new jobs as stored: kept among the active entries under their stored ids, and answered in
   * `outcomes`. Returns each placeholder id's stored id.
   */
  private rememberSubmitted(
    entries: Map<number, ActiveEntry>,
    sorted: Sorted,
    submitted: Submitted,
    capacity: CapacityWithRules,
    now: number,
    outcomes: (SubmitOutcome | null)[],
  ): Map<number, number> {
    const realIds = new Map<number, number>();
    sorted.fresh.forEach((fresh, k) => {
      const { index, submission } = fresh;
      const { id } = submitted.stored[k]!;
      const { job } = submission;
      outcomes[index] = freshOutcome(fresh, sorted.places, submitted.stored[k]!);
      if (submission.to === "blocked") {
        this.log.info("job blocked for approval", { job_id: job.jobId, rule: job.approvalRule });
        return;
      }
      const candidate = candidateOf(job, id, now);
      const kept = {
        ...facts(job),
        maxRuntimeMinutes: maxRuntimeMinutes(job.configSnapshot["--max_runtime_minutes"]),
        cloudSeconds: job.cloudSeconds ?? null,
      };
      realIds.set(CANDIDATE_ID_BASE + index, id);
      if (submission.to === "running") {
        entries.set(id, {
          job: candidate,
          status: "running",
          allocatedGpus: submission.admission.gpus ?? [],
          workerId: assignedWorker(submission.admission, capacity.localWorkerId),
          ...kept,
          expectedEndAt: startEnd(job, now, submission.admission)?.at ?? null,
        });
      } else {
        entries.set(id, { job: candidate, status: "pending", allocatedGpus: [], workerId: null, ...kept, expectedEndAt: null });
      }
    });
    return realIds;
  }

  /**
   * Keeps the pass's waiting jobs for `waitInfo`; `realIds` maps new submissions' placeholder ids
   * to their stored ids. Kept as the plan made them: a job's WaitInfo is made when asked for, so a
   * deep queue costs a pass nothing here.
   */
  private remember(
    waiting: Waiting[],
    realIds: Map<number, number>,
    pending: PendingJob[],
    starts: Map<number, ExpectedStart> | null,
  ): void {
    if (starts) this.forecast = starts;
    this.lastPlan = new LastPlan(waiting, realIds, pending, this.forecast);
  }

  /**
   * A group planned over the frontier: its new jobs started join what runs, those stored waiting
   * join the queue at their places (the others' places move back behind them).
   */
  private rememberOverFrontier(
    frontier: Frontier,
    sorted: Sorted,
    submitted: Submitted,
    realIds: Map<number, number>,
    pending: PendingJob[],
    keys: Map<number, OrderKey>,
  ): void {
    const started = sorted.fresh.flatMap((f, k) => (f.submission.to === "running" ? [submitted.stored[k]!.id] : []));
    const waiting: { id: number; place: Waiting; key: OrderKey }[] = [];
    for (const [placeholder, key] of keys) {
      const id = realIds.get(placeholder);
      if (id !== undefined) waiting.push({ id, place: sorted.places.get(placeholder)!, key: { ...key, id } });
    }
    frontier.add(
      started,
      waiting.map((w) => w.key),
    );
    const jobs = new Map(pending.map((j) => [j.id, j]));
    if (this.lastPlan?.frontier === frontier) for (const w of waiting) this.lastPlan.add(w.id, w.place, jobs.get(w.place.id), w.key);
  }

  private report(started: string[], trigger: string): void {
    if (started.length) this.log.info(`scheduler started ${started.length} job(s)`, { trigger, job_ids: started.slice(0, 50) });
  }
}

/** The environments a group of submissions names (a cloud one, prepared elsewhere, names none here). */
function namesOf(submissions: readonly Submission[]): string[] {
  return submissions.flatMap((s) => ("body" in s ? [s.body.config_name] : []));
}

/**
 * Each admitted stored job's end as it starts now, from its max runtime or cloud allowance, else
 * from the run time the plan expected of it (recent runs), until its progress says better.
 */
function expectedEnds(stored: Admission[], entries: Map<number, ActiveEntry>, now: number): Map<number, ExpectedEnd> {
  const ends = new Map<number, ExpectedEnd>();
  for (const a of stored) {
    const e = entries.get(a.id);
    const end = e && endAtStart({ maxRuntime: e.maxRuntimeMinutes, cloudSeconds: e.cloudSeconds }, now, a);
    if (end) ends.set(a.id, end);
  }
  return ends;
}

/** The stored jobs the batch started, kept running; one not started (cancelled meanwhile, or its GPU quarantined) is dropped until the periodic re-read finds it or not. */
function rememberAdmitted(
  entries: Map<number, ActiveEntry>,
  stored: Admission[],
  admitted: Admitted,
  ends: Map<number, ExpectedEnd>,
  localWorkerId: number | null,
): void {
  for (const a of stored) {
    const e = entries.get(a.id);
    if (!e) continue;
    if (!admitted.started.has(a.id)) entries.delete(a.id);
    else
      entries.set(a.id, {
        ...e,
        status: "running",
        allocatedGpus: a.gpus ?? [],
        workerId: assignedWorker(a, localWorkerId),
        expectedEndAt: ends.get(a.id)?.at ?? null,
      });
  }
}

/**
 * The latest full plan's waiting jobs, with the index `waitInfo` needs built on its first call,
 * and the new jobs submission groups over its frontier stored waiting since (their places moving
 * the others back).
 */
class LastPlan {
  private byId: Map<number, Waiting> | null = null;
  private jobs: Map<number, PendingJob> | null = null;
  private readonly added = new Map<number, { place: Waiting; job: PendingJob | undefined; key: OrderKey }>();
  /** The frontier made from this plan, once there is one. */
  frontier: Frontier | null = null;

  constructor(
    private readonly waiting: Waiting[],
    private readonly realIds: Map<number, number>,
    private readonly pending: PendingJob[],
    private readonly starts: Map<number, ExpectedStart>,
  ) {}

  over(frontier: Frontier): void {
    this.frontier = frontier;
  }

  /** A new job stored waiting at `place`, at `key` in the scheduling order. */
  add(id: number, place: Waiting, job: PendingJob | undefined, key: OrderKey): void {
    this.added.set(id, { place, job, key });
  }

  /** The named stored jobs' places (those waiting), or every waiting job's without `ids`. */
  info(ids?: number[]): WaitInfo[] {
    if (!this.byId) {
      this.byId = new Map();
      for (const w of this.waiting) {
        const id = isNew(w) ? this.realIds.get(w.id) : w.id;
        if (id !== undefined) this.byId.set(id, w);
      }
      this.jobs = new Map(this.pending.map((j) => [j.id, j]));
    }
    const shown: WaitInfo[] = [];
    for (const id of ids ?? [...this.byId.keys(), ...this.added.keys()]) {
      const added = this.added.get(id);
      if (added) {
        // Its place now: behind the new jobs stored ahead of it since it came.
        const position = this.frontier ? this.frontier.positionOf(added.key, 0) : added.place.position;
        shown.push(infoOf(id, { ...added.place, position }, added.job, undefined));
        continue;
      }
      const w = this.byId.get(id);
      if (!w) continue;
      const place = this.frontier ? { ...w, position: this.frontier.shifted(w.position) } : w;
      // A new job has no forecast until the next pass's; a stored one keeps the latest.
      shown.push(infoOf(id, place, this.jobs!.get(w.id), isNew(w) ? undefined : this.starts.get(id)));
    }
    return shown;
  }
}

/** A waiting job's WaitInfo: its place, its expected run time as the plan used it (the listing shows it as is), its expected start. */
function infoOf(id: number, w: Waiting, job: PendingJob | undefined, start: ExpectedStart | undefined): WaitInfo {
  const { expectedMs = null, expectedMethod = null, expectedBasis = null } = job ?? {};
  return {
    ...w,
    id,
    ...(expectedMs !== null && expectedMethod !== null
      ? { expected: { ms: expectedMs, method: expectedMethod, basis: expectedBasis ?? expectedMethod } }
      : {}),
    ...(start ? { start } : {}),
  };
}

/** A submission's outcome where no budget check was left to the Scheduler (`budgetsUnchecked` unset). */
function decided(outcome: SubmitOutcome | "budgeted"): SubmitOutcome {
  if (outcome === "budgeted") throw new Error("a submission whose budgets were checked came back unchecked");
  return outcome;
}
