import { DurableObject } from "cloudflare:workers";
import type { InStatement } from "@libsql/client/web";
import { readConfig } from "../config";
import { setSetting } from "../settings";
import { channelOf } from "../workers/channel-types";
import { openDatabase, type Database } from "../db/client";
import type { Env } from "../env";
import { createLogger, type Logger } from "../log";
import { planPass, type PendingJob, type Plan } from "./plan";
import type { NewJob, PassResult, SchedulerApi, SubmitOutcome, Submitter, WaitInfo } from "./types";
import type { LocalSubmit } from "../../shared/schemas/queue";
import { ApiError } from "../errors";
import { prepareLocalJob, type EnvironmentConfig } from "../queue/submit";
import { forgetOldWebhooks } from "../providers/intake";
import { applyEffects } from "../jobs/lifecycle/effects";
import { sweepSilentWorkers } from "../jobs/lifecycle/sweep-offline";
import type { StorageBucket } from "../storage/endpoint";
import { abortEndedUploads } from "../storage/sweep";
import { admissionStatements, capacityFrom, capacityStatements, loadActive, loadCapacity, loadEntries, localBoxStatusStatement, planInput, workerBusyStatement, type ActiveEntry, type CapacityWithRules } from "./store";

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
  private submissions: { user: Submitter; body: LocalSubmit; resolve: (o: SubmitOutcome) => void; reject: (e: unknown) => void }[] = [];
  private capacityRead: { capacity: CapacityWithRules; at: number } | null = null;
  private configs = new Map<string, { environment: EnvironmentConfig; at: number }>();
  /** Bumped by forget(): a read that began before it must not refill the cache with what it read. */
  private generation = 0;
  private armed = false;

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

  /** What must not pile up (issue 12): uploads that ended jobs left open, provider webhooks past retention. */
  private async sweepLeftovers(): Promise<void> {
    const db = this.db();
    await Promise.all([abortEndedUploads(db, this.env.STORAGE as unknown as StorageBucket), forgetOldWebhooks(db)]).catch((error: unknown) => this.log.warning("sweep failed", { error: String(error) }));
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
    if (this.active === null || Date.now() - this.active.loadedAt > FULL_RELOAD_MS) {
      const loadedAt = Date.now();
      this.active = { entries: new Map((await loadActive(db)).map((e) => [e.job.id, e])), loadedAt };
      return this.active.entries;
    }
    const { active, inactiveIds } = await loadEntries(db, changed);
    const entries = this.active.entries;
    for (const id of inactiveIds) entries.delete(id);
    for (const e of active) entries.set(e.job.id, e);
    return entries;
  }

  /** Records in memory what an admission batch really did (entries cancelled meanwhile did not start). */
  private admitted(entries: Map<number, ActiveEntry>, plan: Plan, results: { rows: Record<string, unknown>[] }[], localWorkerId: number | null): void {
    const started = new Set(results.flatMap((r) => r.rows.map((row) => row.admitted_id)).filter((id) => id !== undefined).map(Number));
    for (const a of plan.admitted) {
      const e = entries.get(a.id);
      if (!e) continue;
      if (started.has(a.id)) entries.set(a.id, { ...e, status: "running", allocatedGpus: a.gpus ?? [], workerId: a.workerId ?? (a.gpus !== null ? localWorkerId : null) });
      else entries.delete(a.id); // no longer pending: re-read on the next full load
    }
  }

  /** Positions and reasons of waiting jobs as of the latest pass (running one first if none). */
  async waitInfo(): Promise<WaitInfo[]> {
    if (this.lastPlan === null) await this.pass("first read");
    return [...(this.lastPlan?.waiting.values() ?? [])];
  }

  /**
   * Decides a local submission in the same pass that would start it, so two submissions can
   * never be given the same GPU: admitted jobs are inserted as running, others as pending (or not
   * at all with `noWait`), jobs caught by an approval rule as blocked.
   *
   * Submissions that arrive while another is being decided are decided together (group commit):
   * one read of the capacity, one plan with every new job in arrival order, one write batch. A
   * burst of submits then costs a few round trips in all instead of a few each.
   */
  async submit(user: Submitter, body: LocalSubmit): Promise<SubmitOutcome> {
    await this.arm();
    return new Promise<SubmitOutcome>((resolve, reject) => {
      this.submissions.push({ user, body, resolve, reject });
      // The first one in schedules a group; submissions arriving within GROUP_WAIT_MS (and while
      // earlier work runs) join it.
      if (this.submissions.length === 1) setTimeout(() => void this.exclusive(() => this.submitGroup()), GROUP_WAIT_MS);
    });
  }

  private async submitGroup(): Promise<void> {
    const group = this.submissions.splice(0);
    if (!group.length) return;
    try {
      const outcomes = await this.decide(group);
      group.forEach((s, i) => s.resolve(outcomes[i]!));
    } catch (error) {
      for (const s of group) s.reject(error);
    }
  }

  /** One group of submissions: one read (capacity, rules, environments), one plan, one write batch. */
  private async decide(submissions: { user: Submitter; body: LocalSubmit }[]): Promise<SubmitOutcome[]> {
    const db = this.db();
    const [{ capacity, configs }, entries] = await Promise.all([this.submissionReads(db, submissions), this.entries(db, [])]);
    const now = new Date();
    const stamp = now.toISOString();
    const outcomes: (SubmitOutcome | null)[] = submissions.map(() => null);
    const group: { job: NewJob; noWait: boolean }[] = [];
    submissions.forEach(({ user, body }, index) => {
      try {
        group[index] = { job: prepareLocalJob(user, body, configs.get(body.config_name) ?? null, capacity.approvalRules), noWait: body.no_wait };
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        outcomes[index] = { status: "invalid", httpStatus: error.status === 404 ? 404 : 422, code: error.code, message: error.detail, ...(error.fields ? { errors: error.fields } : {}) };
      }
    });
    const statements: InStatement[] = [];
    // Where each submission's insert sits in the write batch (its RETURNING id), by group index.
    const insertAt = new Map<number, number>();
    const approvalAt = new Map<number, number>();
    const candidates: { index: number; job: PendingJob }[] = [];
    group.forEach(({ job }, index) => {
      if (job.approvalRule !== null) {
        insertAt.set(index, statements.length);
        approvalAt.set(index, statements.length + 1);
        statements.push(insertStatement(job, "blocked", stamp, null, null), ...approvalStatements(job, stamp));
        this.log.info("job blocked for approval", { job_id: job.jobId, rule: job.approvalRule });
      } else {
        candidates.push({ index, job: candidateOf(job, CANDIDATE_ID_BASE + index, now.getTime()) });
      }
    });

    let plan: Plan = { admitted: [], waiting: [] };
    const stored = new Map<number, ActiveEntry>(); // group index -> entry to keep in memory
    const rejected = new Set<number>(); // candidate ids answered "rejected" (no_wait)
    if (candidates.length) {
      const input = planInput(entries.values(), capacity, now.getTime());
      plan = planPass({ ...input, pending: [...input.pending, ...candidates.map((c) => c.job)] });
      const admittedById = new Map(plan.admitted.map((a) => [a.id, a]));
      const waitingById = new Map(plan.waiting.map((w) => [w.id, w]));
      for (const { index, job: candidate } of candidates) {
        const job = group[index]!.job;
        const mine = admittedById.get(candidate.id);
        if (mine) {
          const workerId = mine.workerId ?? (mine.gpus !== null ? capacity.localWorkerId : null);
          insertAt.set(index, statements.length);
          statements.push(insertStatement(job, "running", stamp, mine.gpus, workerId));
          if (mine.workerId !== null) statements.push(workerBusyStatement(mine.workerId, job.jobId));
          outcomes[index] = { status: "running", id: 0, jobId: job.jobId, gpus: mine.gpus, workerId: mine.workerId };
          stored.set(index, { job: candidate, status: "running", allocatedGpus: mine.gpus ?? [], workerId });
        } else if (group[index]!.noWait) {
          const waiting = waitingById.get(candidate.id)!;
          outcomes[index] = { status: "rejected", reason: waiting.reason, message: waiting.message };
          rejected.add(candidate.id);
        } else {
          insertAt.set(index, statements.length);
          statements.push(insertStatement(job, "pending", stamp, null, null));
          stored.set(index, { job: candidate, status: "pending", allocatedGpus: [], workerId: null });
        }
      }
      // Rejected submissions were never stored: the others' positions close up behind them.
      plan = { admitted: plan.admitted, waiting: plan.waiting.filter((w) => !rejected.has(w.id)).map((w, i) => ({ ...w, position: i + 1 })) };
    }
    const others: Plan = { admitted: plan.admitted.filter((a) => a.id < CANDIDATE_ID_BASE), waiting: [] };
    const othersAt = statements.length;
    statements.push(...admissionStatements(others.admitted, capacity.localWorkerId, stamp));
    if (capacity.localWorkerId !== null) statements.push(localBoxStatusStatement(capacity.localWorkerId));
    const results = (statements.length ? await db.$client.batch(statements, "write") : []) as unknown as { rows: Record<string, unknown>[] }[];

    // The real ids, in memory and in the answers.
    const realIds = new Map<number, number>(); // candidate id -> stored id
    const waitingById = new Map(plan.waiting.map((w) => [w.id, w]));
    group.forEach((s, index) => {
      const at = insertAt.get(index);
      if (at === undefined) return;
      const id = Number(results[at]!.rows[0]!.id);
      if (s.job.approvalRule !== null) {
        const approvalId = Number(results[approvalAt.get(index)!]!.rows[0]!.id);
        outcomes[index] = { status: "blocked", id, jobId: s.job.jobId, approvalId, message: `awaiting an admin's approval: ${s.job.approvalRule}` };
        return;
      }
      const entry = stored.get(index)!;
      realIds.set(entry.job.id, id);
      entries.set(id, { ...entry, job: { ...entry.job, id } });
      const outcome = outcomes[index];
      if (outcome?.status === "running") outcome.id = id;
      else {
        const waiting = waitingById.get(entry.job.id)!;
        outcomes[index] = { status: "queued", id, jobId: s.job.jobId, position: waiting.position, reason: waiting.reason, message: waiting.message };
      }
    });
    this.admitted(entries, others, results.slice(othersAt), capacity.localWorkerId);
    this.wake(plan.admitted, capacity.localWorkerId);
    if (candidates.length) this.remember(plan, realIds);
    this.report(others.admitted.map((a) => a.jobId), "submit");
    return outcomes.map((o) => o!);
  }

  /** Capacity and the environments' options a group needs: from the last read when recent, else one read batch. */
  private async submissionReads(db: Database, submissions: { body: LocalSubmit }[]) {
    const at = Date.now();
    const fresh = (read: { at: number } | null | undefined) => read !== null && read !== undefined && at - read.at < READ_CACHE_MS;
    const cached = fresh(this.capacityRead) ? this.capacityRead!.capacity : null;
    const missing = [...new Set(submissions.map((s) => s.body.config_name))].filter((name) => !fresh(this.configs.get(name)));
    const statements: InStatement[] = cached ? [] : capacityStatements();
    if (missing.length) statements.push({ sql: `SELECT name, config, dataloader FROM environments WHERE name IN (${missing.map(() => "?").join(", ")})`, args: missing });
    const generation = this.generation;
    const reads = statements.length ? (await db.$client.batch(statements, "read")).map((r) => r.rows as unknown as Row[]) : [];
    const capacity = cached ?? capacityFrom(reads[0]!, reads[1]!);
    // An environment changed while this read was in flight (forget() ran): what was read serves
    // this group, which was submitted before the change answered, but is not kept for the next.
    const keep = generation === this.generation;
    if (!cached && keep) this.capacityRead = { capacity, at };
    const configs = new Map<string, EnvironmentConfig>();
    for (const [name, read] of this.configs) if (fresh(read)) configs.set(name, read.environment);
    for (const row of missing.length ? reads.at(-1)! : []) {
      const environment = { config: JSON.parse(String(row.config ?? "{}")) as Record<string, unknown>, dataloader: JSON.parse(String(row.dataloader ?? "[]")) as unknown[] };
      configs.set(String(row.name), environment);
      if (keep) this.configs.set(String(row.name), { environment, at });
    }
    return { capacity, configs };
  }

  private async runPass(trigger: string, changed: string[]): Promise<PassResult> {
    const db = this.db();
    const now = new Date();
    const before = await loadCapacity(db);
    const offline = await sweepSilentWorkers(db, before.limits.worker_heartbeat_timeout_seconds, now);
    for (const w of offline.workers) this.log.warning("worker went offline: no heartbeat", { worker_id: w.id, worker: w.name, timeout_s: before.limits.worker_heartbeat_timeout_seconds });
    // Not awaited: the failed jobs' end events and webhooks need not hold up this pass's admissions.
    if (offline.jobs.length) void applyEffects({ env: this.env, db, log: this.log, actor: null, origin: "scheduler", trigger: "offline sweep" }, offline);
    const [capacity, entries] = await Promise.all([offline.workers.length ? loadCapacity(db) : before, this.entries(db, [...changed, ...offline.jobs.map((j) => j.jobId)])]);
    this.capacityRead = { capacity, at: now.getTime() };
    const plan = planPass(planInput(entries.values(), capacity, now.getTime()));
    const statements = admissionStatements(plan.admitted, capacity.localWorkerId, now.toISOString());
    if (capacity.localWorkerId !== null) statements.push(localBoxStatusStatement(capacity.localWorkerId));
    const results = statements.length ? await db.$client.batch(statements, "write") : [];
    this.admitted(entries, plan, results as unknown as { rows: Record<string, unknown>[] }[], capacity.localWorkerId);
    this.wake(plan.admitted, capacity.localWorkerId);
    this.remember(plan);
    const started = plan.admitted.map((a) => a.jobId);
    this.report(started, trigger);
    return { started, waiting: plan.waiting.length, offline: offline.workers.map((w) => w.name) };
  }

  /** Keeps the plan's waiting jobs for `waitInfo`; `realIds` maps new submissions' placeholder ids to their stored ids. */
  private remember(plan: Plan, realIds: Map<number, number> = new Map()): void {
    const waiting = new Map<number, WaitInfo>();
    for (const w of plan.waiting) {
      const id = w.id >= CANDIDATE_ID_BASE ? realIds.get(w.id) : w.id;
      if (id !== undefined) waiting.set(id, { id, position: w.position, effectivePriority: w.effectivePriority, reason: w.reason, message: w.message });
    }
    this.lastPlan = { at: Date.now(), waiting };
  }

  /** Tells the runners that were just given jobs to fetch them now (their worker channels). */
  private wake(admitted: Plan["admitted"], localWorkerId: number | null): void {
    const ids = new Set<number>();
    for (const a of admitted) {
      const id = a.workerId ?? (a.gpus !== null ? localWorkerId : null);
      if (id !== null) ids.add(id);
    }
    for (const id of ids) {
      void channelOf(this.env, id)
        .notify()
        .catch((error: unknown) => this.log.warning("could not wake a runner", { worker_id: id, error: String(error) }));
    }
  }

  private report(started: string[], trigger: string): void {
    if (started.length) this.log.info(`scheduler started ${started.length} job(s)`, { trigger, job_ids: started.slice(0, 50) });
  }
}

type Row = Record<string, unknown>;

/** Placeholder ids of new submissions sort after every stored job of the same priority and time, in arrival order. */
const CANDIDATE_ID_BASE = Number.MAX_SAFE_INTEGER - 1_000_000;

function candidateOf(job: NewJob, id: number, queuedAt: number): PendingJob {
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
  };
}

function insertStatement(job: NewJob, status: "running" | "pending" | "blocked", stamp: string, gpus: number[] | null, workerId: number | null): InStatement {
  return {
    sql: `INSERT INTO queue_entries (job_id, user_id, team_id, provider, config_name, priority, status, queued_at, started_at, estimated_cost,
            requires_approval, metadata, allocated_gpus, job_type, num_processes, target, worker_labels, device_ids, any_gpu, worker_id, updated_at,
            config_snapshot, dataloader_snapshot)
          VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
    args: [
      job.jobId,
      job.userId,
      job.teamId,
      job.configName,
      job.priority,
      status,
      stamp,
      status === "running" ? stamp : null,
      job.estimatedCost,
      job.approvalRule !== null ? 1 : 0,
      job.metadata ? JSON.stringify(job.metadata) : null,
      gpus === null ? null : JSON.stringify(gpus),
      job.jobType,
      job.numProcesses,
      job.target,
      job.workerLabels ? JSON.stringify(job.workerLabels) : null,
      job.deviceIds ? JSON.stringify(job.deviceIds) : null,
      job.anyGpu ? 1 : 0,
      workerId,
      stamp,
      JSON.stringify(job.configSnapshot),
      JSON.stringify(job.dataloaderSnapshot),
    ],
  };
}

// The request row, then its id on the entry; in the same write batch as the insert.
function approvalStatements(job: NewJob, stamp: string): InStatement[] {
  return [
    {
      sql: `INSERT INTO approval_requests (entry_id, job_id, rule, status, requested_at)
            SELECT id, job_id, ?, 'pending', ? FROM queue_entries WHERE job_id = ? RETURNING id`,
      args: [job.approvalRule, stamp, job.jobId],
    },
    {
      sql: `UPDATE queue_entries SET approval_id = (SELECT max(id) FROM approval_requests WHERE job_id = ?1) WHERE job_id = ?1`,
      args: [job.jobId],
    },
  ];
}
