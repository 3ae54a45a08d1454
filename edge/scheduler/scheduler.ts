import { DurableObject } from "cloudflare:workers";
import type { InStatement } from "@libsql/client/web";
import { readConfig } from "../config";
import { openDatabase, type Database } from "../db/client";
import type { Env } from "../env";
import { createLogger, type Logger } from "../log";
import { planPass, type PendingJob, type Plan } from "./plan";
import type { NewJob, PassResult, SchedulerApi, SubmitOutcome, WaitInfo } from "./types";
import { admissionStatements, loadActive, loadCapacity, loadEntries, localBoxStatusStatement, planInput, sweepOfflineWorkers, workerBusyStatement, type ActiveEntry } from "./store";

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

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.log = createLogger("edge/scheduler", readConfig(env));
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.chain.then(work, work);
    this.chain = run.catch(() => {});
    return run;
  }

  private db(): Database {
    return openDatabase(readConfig(this.env));
  }

  private async arm(): Promise<void> {
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + PASS_INTERVAL_MS);
  }

  override async alarm(): Promise<void> {
    try {
      await this.pass("timer");
    } finally {
      await this.ctx.storage.setAlarm(Date.now() + PASS_INTERVAL_MS);
    }
  }

  /** HTTP entry for the local host process, which cannot call RPC methods: a start-up pass. */
  override async fetch(request: Request): Promise<Response> {
    const trigger = new URL(request.url).searchParams.get("trigger") ?? "http";
    return Response.json(await this.pass(trigger));
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
   */
  async submit(job: NewJob, noWait: boolean): Promise<SubmitOutcome> {
    await this.arm();
    return this.exclusive(async () => {
      const db = this.db();
      const now = new Date();
      const stamp = now.toISOString();
      if (job.approvalRule !== null) {
        const [inserted, approval] = await db.$client.batch([insertStatement(job, "blocked", stamp, null, null), ...approvalStatements(job, stamp)], "write");
        const id = Number(inserted!.rows[0]!.id);
        const approvalId = Number(approval!.rows[0]!.id);
        this.log.info("job blocked for approval", { job_id: job.jobId, rule: job.approvalRule });
        return { status: "blocked", id, approvalId, message: `awaiting an admin's approval: ${job.approvalRule}` };
      }
      const [capacity, entries] = await Promise.all([loadCapacity(db), this.entries(db, [])]);
      const candidate: PendingJob = {
        id: Number.MAX_SAFE_INTEGER, // sorts after every stored job of the same priority and time
        jobId: job.jobId,
        userId: job.userId,
        teamId: job.teamId,
        priority: job.priority,
        priorityOverride: null,
        queuedAt: now.getTime(),
        jobType: job.jobType,
        numProcesses: job.numProcesses,
        target: job.target,
        workerLabels: job.workerLabels,
        deviceIds: job.deviceIds,
        anyGpu: job.anyGpu,
      };
      const input = planInput(entries.values(), capacity, now.getTime());
      const plan = planPass({ ...input, pending: [...input.pending, candidate] });
      const mine = plan.admitted.find((a) => a.id === candidate.id);
      const others: Plan = { admitted: plan.admitted.filter((a) => a.id !== candidate.id), waiting: [] };
      const statements: InStatement[] = [];
      let outcome: SubmitOutcome;
      let stored: ActiveEntry | null = null;
      if (mine) {
        const workerId = mine.workerId ?? (mine.gpus !== null ? capacity.localWorkerId : null);
        statements.push(insertStatement(job, "running", stamp, mine.gpus, workerId));
        if (mine.workerId !== null) statements.push(workerBusyStatement(mine.workerId, job.jobId));
        outcome = { status: "running", id: 0, gpus: mine.gpus, workerId: mine.workerId };
        stored = { job: candidate, status: "running", allocatedGpus: mine.gpus ?? [], workerId };
      } else {
        const waiting = plan.waiting.find((w) => w.id === candidate.id)!;
        if (noWait) outcome = { status: "rejected", reason: waiting.reason, message: waiting.message };
        else {
          statements.push(insertStatement(job, "pending", stamp, null, null));
          outcome = { status: "queued", id: 0, position: waiting.position, reason: waiting.reason, message: waiting.message };
          stored = { job: candidate, status: "pending", allocatedGpus: [], workerId: null };
        }
      }
      statements.push(...admissionStatements(others.admitted, capacity.localWorkerId, stamp));
      if (capacity.localWorkerId !== null) statements.push(localBoxStatusStatement(capacity.localWorkerId));
      const results = statements.length ? await db.$client.batch(statements, "write") : [];
      if (stored !== null && (outcome.status === "running" || outcome.status === "queued")) {
        outcome.id = Number(results[0]!.rows[0]!.id);
        entries.set(outcome.id, { ...stored, job: { ...stored.job, id: outcome.id } });
      }
      this.admitted(entries, others, results as unknown as { rows: Record<string, unknown>[] }[], capacity.localWorkerId);
      this.remember(plan, candidate.id, outcome.status === "queued" ? outcome.id : null);
      this.report(others.admitted.map((a) => a.jobId), "submit");
      return outcome;
    });
  }

  private async runPass(trigger: string, changed: string[]): Promise<PassResult> {
    const db = this.db();
    const now = new Date();
    const before = await loadCapacity(db);
    const offline = await sweepOfflineWorkers(db, before.limits.worker_heartbeat_timeout_seconds, now);
    for (const w of offline.workers) this.log.warning("worker went offline: no heartbeat", { worker_id: w.id, worker: w.name, timeout_s: before.limits.worker_heartbeat_timeout_seconds });
    const [capacity, entries] = await Promise.all([offline.workers.length ? loadCapacity(db) : before, this.entries(db, [...changed, ...offline.jobIds])]);
    const plan = planPass(planInput(entries.values(), capacity, now.getTime()));
    const statements = admissionStatements(plan.admitted, capacity.localWorkerId, now.toISOString());
    if (capacity.localWorkerId !== null) statements.push(localBoxStatusStatement(capacity.localWorkerId));
    const results = statements.length ? await db.$client.batch(statements, "write") : [];
    this.admitted(entries, plan, results as unknown as { rows: Record<string, unknown>[] }[], capacity.localWorkerId);
    this.remember(plan, null, null);
    const started = plan.admitted.map((a) => a.jobId);
    this.report(started, trigger);
    return { started, waiting: plan.waiting.length, offline: offline.workers.map((w) => w.name) };
  }

  private remember(plan: Plan, placeholderId: number | null, realId: number | null): void {
    const waiting = new Map<number, WaitInfo>();
    for (const w of plan.waiting) {
      const id = w.id === placeholderId ? realId : w.id;
      if (id !== null) waiting.set(id, { id, position: w.position, effectivePriority: w.effectivePriority, reason: w.reason, message: w.message });
    }
    this.lastPlan = { at: Date.now(), waiting };
  }

  private report(started: string[], trigger: string): void {
    if (started.length) this.log.info(`scheduler started ${started.length} job(s)`, { trigger, job_ids: started.slice(0, 50) });
  }
}

function insertStatement(job: NewJob, status: "running" | "pending" | "blocked", stamp: string, gpus: number[] | null, workerId: number | null): InStatement {
  return {
    sql: `INSERT INTO queue_entries (job_id, user_id, team_id, provider, config_name, priority, status, queued_at, started_at, estimated_cost,
            requires_approval, metadata, allocated_gpus, job_type, num_processes, target, worker_labels, device_ids, any_gpu, worker_id, updated_at)
          VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
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
