import type { InStatement } from "@libsql/client/web";
import type { ApprovalRules, ConcurrencySettings } from "../../shared/schemas/queue";
import type { Budgets } from "../../shared/schemas/spend";
import type { Database } from "../db/client";
import { parseSetting } from "../settings-store";
import type { BatchPart } from "../jobs/lifecycle/batch";
import { environmentFrom, type EnvironmentConfig } from "../jobs/prepare";
import type { BoxTrainers, PendingJob, PlanInput, RunningJob, WorkerView } from "./plan";
import { committedFrom, committedSpendingStatement } from "../cloud/spending";
import { maxRuntimeMinutes } from "../jobs/runtime";
import { expectedDuration, maxRuntimeBasis, recentRuns, type RecentRuns } from "../jobs/estimate";
import { jobTrainer } from "../../shared/trainers";
import type { TrainerAvailability } from "../../shared/schemas/workers";
import type { z } from "@hono/zod-openapi";

/*
 * The Scheduler DO's reads and its writes apart from job transitions. Reads build a plan's input
 * from libSQL; a pass is written as one batch (edge/jobs/lifecycle: submit, admit, then the local
 * box's status here), so a job cancelled meanwhile is simply not started, and a crash leaves
 * either the whole pass or none of it.
 */

export const ONLINE_STATUSES = ["IDLE", "busy", "draining"] as const;

const parseJson = <T>(text: string | null, fallback: T): T => (text ? (JSON.parse(text) as T) : fallback);

/** An active entry as the Scheduler keeps it between passes. */
export interface ActiveEntry {
  /** Its `expectedMs` is its --max_runtime_minutes; planInput fills it from recent runs when that is absent. */
  job: PendingJob;
  status: "pending" | "running";
  allocatedGpus: number[];
  /** The worker id stored on the entry (the local box's id for local-box jobs). */
  workerId: number | null;
  /** The environment it runs: recent runs of it estimate its run time. */
  configName: string | null;
  /** Its config snapshot's --max_runtime_minutes; null when unset or invalid. */
  maxRuntimeMinutes: number | null;
  /** Its config snapshot's --max_train_steps, as stored (estimate.ts trainSteps reads it). */
  trainSteps: unknown;
  /** A cloud job's run-time allowance (cloud_jobs.expected_seconds); null for other jobs. */
  cloudSeconds: number | null;
  /** Epoch ms a running job is expected to end, as stored when read (Capacity.expectedEnds is fresher). */
  expectedEndAt: number | null;
}

// The snapshot's max runtime is extracted in SQL, so the whole snapshot never leaves the database.
const ACTIVE_COLUMNS = `id, job_id, user_id, team_id, priority, priority_override, queued_at, job_type, num_processes, target,
  worker_labels, device_ids, any_gpu, status, allocated_gpus, worker_id, estimated_cost, config_name, expected_end_at,
  json_extract(config_snapshot, '$."--max_runtime_minutes"') AS max_runtime,
  json_extract(config_snapshot, '$."--max_train_steps"') AS train_steps,
  json_extract(config_snapshot, '$."--trainer"') AS trainer, json_extract(config_snapshot, '$."--trainer_command"') AS trainer_command,
  CASE WHEN job_type = 'cloud' THEN (SELECT expected_seconds FROM cloud_jobs c WHERE c.job_id = queue_entries.job_id) END AS cloud_seconds`;

const timeOf = (v: unknown) => {
  const ms = v === null || v === undefined ? NaN : Date.parse(String(v));
  return Number.isNaN(ms) ? null : ms;
};

function toActive(r: Record<string, unknown>): ActiveEntry {
  const text = (v: unknown) => (v === null || v === undefined ? null : String(v));
  const minutes = maxRuntimeMinutes(r.max_runtime);
  return {
    job: {
      id: Number(r.id),
      jobId: String(r.job_id),
      userId: r.user_id === null ? null : Number(r.user_id),
      teamId: text(r.team_id),
      priority: Number(r.priority),
      priorityOverride: r.priority_override === null ? null : Number(r.priority_override),
      queuedAt: Date.parse(String(r.queued_at)),
      jobType: r.job_type === "local" ? "local" : "cloud",
      numProcesses: Number(r.num_processes),
      target: r.target === "worker" || r.target === "local" ? r.target : "auto",
      workerLabels: parseJson<Record<string, string> | null>(text(r.worker_labels), null),
      deviceIds: parseJson<number[] | null>(text(r.device_ids), null),
      anyGpu: Number(r.any_gpu) === 1,
      estimatedCost: Number(r.estimated_cost ?? 0),
      expectedMs: minutes === null ? null : minutes * 60_000,
      expectedMethod: minutes === null ? null : "max_runtime",
      expectedBasis: minutes === null ? null : maxRuntimeBasis(minutes),
      trainer: r.job_type === "local" ? jobTrainer({ "--trainer": r.trainer, "--trainer_command": r.trainer_command }) : null,
    },
    status: r.status === "running" ? "running" : "pending",
    allocatedGpus: parseJson<number[]>(text(r.allocated_gpus), []),
    workerId: r.worker_id === null ? null : Number(r.worker_id),
    configName: text(r.config_name),
    maxRuntimeMinutes: minutes,
    trainSteps: r.train_steps ?? null,
    cloudSeconds: r.cloud_seconds === null || r.cloud_seconds === undefined ? null : Number(r.cloud_seconds),
    expectedEndAt: timeOf(r.expected_end_at),
  };
}

/** Every pending and running entry. */
export async function loadActive(db: Database): Promise<ActiveEntry[]> {
  const result = await db.$client.execute(`SELECT ${ACTIVE_COLUMNS} FROM queue_entries WHERE status IN ('pending', 'running')`);
  return result.rows.map((r) => toActive(r as Record<string, unknown>));
}

/** The named entries as they are now: the active ones, and the ids of those no longer active. */
export async function loadEntries(db: Database, jobIds: string[]): Promise<{ active: ActiveEntry[]; inactiveIds: number[] }> {
  if (jobIds.length === 0) return { active: [], inactiveIds: [] };
  const result = await db.$client.execute({
    sql: `SELECT ${ACTIVE_COLUMNS} FROM queue_entries WHERE job_id IN (${jobIds.map(() => "?").join(", ")})`,
    args: jobIds,
  });
  const rows = result.rows.map((r) => r as Record<string, unknown>);
  const isActive = (r: Record<string, unknown>) => r.status === "pending" || r.status === "running";
  return { active: rows.filter(isActive).map(toActive), inactiveIds: rows.filter((r) => !isActive(r)).map((r) => Number(r.id)) };
}

/** The columns of an active entry that anything but a submission changes, for comparing what is kept with what is stored. */
export interface EntryState {
  id: number;
  status: string;
  priority: number;
  priorityOverride: number | null;
  allocatedGpus: string | null;
  workerId: number | null;
  expectedEndAt: string | null;
}

/** Up to `limit` pending and running entries' changeable columns after id `after`, by id: a few narrow columns each, no snapshot read. */
export async function loadActiveStates(db: Database, after: number, limit: number): Promise<EntryState[]> {
  const result = await db.$client.execute({
    sql: `SELECT id, status, priority, priority_override, allocated_gpus, worker_id, expected_end_at FROM queue_entries
          WHERE id > ? AND status IN ('pending', 'running') ORDER BY id LIMIT ?`,
    args: [after, limit],
  });
  return result.rows.map((r) => ({
    id: Number(r.id),
    status: String(r.status),
    priority: Number(r.priority),
    priorityOverride: r.priority_override === null ? null : Number(r.priority_override),
    allocatedGpus: r.allocated_gpus === null ? null : String(r.allocated_gpus),
    workerId: r.worker_id === null ? null : Number(r.worker_id),
    expectedEndAt: r.expected_end_at === null ? null : String(r.expected_end_at),
  }));
}

/** Whether a kept entry still says what its stored columns say. */
export function sameState(kept: ActiveEntry, stored: EntryState): boolean {
  return (
    kept.status === stored.status &&
    kept.job.priority === stored.priority &&
    kept.job.priorityOverride === stored.priorityOverride &&
    JSON.stringify(kept.allocatedGpus) === (stored.allocatedGpus ?? "[]") &&
    kept.workerId === stored.workerId &&
    kept.expectedEndAt === timeOf(stored.expectedEndAt)
  );
}

/** The named entries (by id) that are still active, as stored now. */
export async function loadActiveByIds(db: Database, ids: number[]): Promise<ActiveEntry[]> {
  const entries: ActiveEntry[] = [];
  // Bound parameters, a few hundred a statement.
  for (let i = 0; i < ids.length; i += 500) {
    const chunk = ids.slice(i, i + 500);
    const result = await db.$client.execute({
      sql: `SELECT ${ACTIVE_COLUMNS} FROM queue_entries WHERE status IN ('pending', 'running') AND id IN (${chunk.map(() => "?").join(", ")})`,
      args: chunk,
    });
    entries.push(...result.rows.map((r) => toActive(r as Record<string, unknown>)));
  }
  return entries;
}

export interface Capacity {
  limits: ConcurrencySettings;
  /** Local-box admissions held after a running local job was cancelled, until POST /api/queue/process or a restart. */
  localPaused: boolean;
  localWorkerId: number | null;
  localDevices: number[] | null;
  /** The trainers the local box's runner can run; null when it did not say. */
  localTrainers: BoxTrainers | null;
  /** Remote workers that may take jobs (not connecting, draining or offline); idle is decided with the entries. */
  remote: (Omit<WorkerView, "idle"> & { statusIdle: boolean })[];
  /** The cloud spending limit of this period and what is committed against it; null without a limit. */
  cloudBudget: { limitUsd: number; committedUsd: number } | null;
  /** Running entries' expected ends (epoch ms) by id, as stored now: progress batches move them without telling the Scheduler. */
  expectedEnds: Map<number, number>;
  /** The capacity version this was read at (capacity_version): unchanged, the limits, rules and workers are too. */
  version: number;
}

/**
 * The reads a plan's capacity is made of: the settings it needs, the workers not offline (less
 * their quarantined GPUs: README "GPU health"), the
 * cloud spending committed, and the running jobs' expected ends (a few rows, through the
 * status index).
 */
function capacityStatements(now = new Date()): InStatement[] {
  return [
    "SELECT key, value FROM settings WHERE key IN ('concurrency', 'approval_rules', 'local_queue_paused', 'cloud')",
    `SELECT id, role, status, labels, gpus, idle_since, registered_at, created_at, trainers,
       (SELECT json_group_array(gpu_index) FROM gpu_quarantines q WHERE q.worker_id = workers.id AND q.cleared_at IS NULL) AS quarantined
     FROM workers WHERE status != 'offline'`,
    committedSpendingStatement(now),
    // Only local and worker jobs: the planner reserves GPUs and workers, never cloud capacity.
    "SELECT id, expected_end_at FROM queue_entries WHERE job_type = 'local' AND status = 'running' AND expected_end_at IS NOT NULL",
    VERSION_STATEMENT,
  ];
}

/** The capacity version: moved by the database in the same statement as any change of what `capacityStatements` reads but the spending and ends (migration 0021). */
const VERSION_STATEMENT = "SELECT version FROM capacity_version WHERE id = 1";

/** The budgets (edge/spend/budgets.ts), which a submission group reads to see whether one applies to a submitter. */
const BUDGETS_STATEMENT = "SELECT value FROM settings WHERE key = 'budgets'";

const versionFrom = (rows: Row[]) => Number(rows[0]?.version ?? 0);

type Row = Record<string, unknown>;

/** A worker's stored trainers (workers.trainers) as the planner reads them; null when its runner did not say. */
function boxTrainers(stored: unknown): BoxTrainers | null {
  if (stored === null || stored === undefined) return null;
  const list = parseJson<z.infer<typeof TrainerAvailability>[]>(String(stored), []);
  return {
    available: list.filter((t) => t.available).map((t) => t.name),
    missing: Object.fromEntries(list.filter((t) => !t.available).map((t) => [t.name, t.detail ?? "not available"])),
  };
}

/** Limits, approval rules, workers, the cloud budget and running jobs' ends from the rows of `capacityStatements`. */
function capacityFrom(
  settingRows: Row[],
  workerRows: Row[],
  spendingRows: Row[],
  endRows: Row[],
  versionRows: Row[],
): Capacity & { approvalRules: ApprovalRules } {
  const stored = (key: string) => {
    const row = settingRows.find((r) => r.key === key);
    return row ? String(row.value) : null;
  };
  const workerList = workerRows.map((w) => {
    const out = new Set(parseJson<number[]>(w.quarantined === undefined || w.quarantined === null ? null : String(w.quarantined), []));
    return {
      id: Number(w.id),
      role: String(w.role),
      status: String(w.status),
      labels: String(w.labels),
      gpus: parseJson<{ index: number }[]>(String(w.gpus), []).filter((g) => !out.has(g.index)),
      idleSince: String(w.idle_since ?? w.registered_at ?? w.created_at),
      trainers: boxTrainers(w.trainers),
    };
  });
  const expectedEnds = new Map<number, number>();
  for (const r of endRows) {
    const at = timeOf(r.expected_end_at);
    if (at !== null) expectedEnds.set(Number(r.id), at);
  }
  const localBox = workerList.find((w) => w.role === "local") ?? null;
  const localOnline = localBox !== null && (localBox.status === "IDLE" || localBox.status === "busy");
  const cloud = parseSetting("cloud", stored("cloud"));
  return {
    cloudBudget:
      cloud.spending_limit_usd === null
        ? null
        : { limitUsd: cloud.spending_limit_usd, committedUsd: committedFrom(spendingRows[0] ?? {}, cloud.spending_period) },
    limits: parseSetting("concurrency", stored("concurrency")),
    approvalRules: parseSetting("approval_rules", stored("approval_rules")),
    localPaused: parseSetting("local_queue_paused", stored("local_queue_paused")),
    localWorkerId: localBox?.id ?? null,
    localDevices: localOnline ? localBox.gpus.map((g) => g.index) : null,
    localTrainers: localBox?.trainers ?? null,
    remote: workerList
      .filter((w) => w.role !== "local" && w.status !== "connecting" && w.status !== "draining")
      .map((w) => ({
        id: w.id,
        labels: parseJson<Record<string, string>>(w.labels, {}),
        gpuCount: w.gpus.length,
        statusIdle: w.status === "IDLE",
        idleSince: Date.parse(w.idleSince),
        trainers: w.trainers?.available ?? null,
      })),
    expectedEnds,
    version: versionFrom(versionRows),
  };
}

export type CapacityWithRules = Capacity & { approvalRules: ApprovalRules };

/**
 * Everything of a capacity that can let a waiting job start: equal signatures, equal chances
 * (frontier.ts). Made once per capacity read.
 */
export function capacitySignature(capacity: Capacity): string {
  let signature = signatures.get(capacity);
  if (signature === undefined) {
    signature = JSON.stringify([
      capacity.version,
      capacity.limits,
      capacity.localPaused,
      capacity.localDevices,
      capacity.localTrainers,
      capacity.remote,
      capacity.cloudBudget,
      [...capacity.expectedEnds],
    ]);
    signatures.set(capacity, signature);
  }
  return signature;
}
const signatures = new WeakMap<Capacity, string>();

/** Limits and workers, read fresh on every pass (a handful of rows, one round trip). */
export async function loadCapacity(db: Database): Promise<CapacityWithRules> {
  const reads = (await db.$client.batch(capacityStatements(), "read")).map((r) => r.rows as unknown as Row[]);
  return capacityFrom(reads[0]!, reads[1]!, reads[2]!, reads[3]!, reads[4]!);
}

const NO_RUNS: RecentRuns = new Map();

/**
 * A pass's input from the active entries and the capacity: a running job's expected end as
 * stored now, a waiting job's expected run time from its max runtime, else from `recent` runs.
 */
export function planInput(entries: Iterable<ActiveEntry>, capacity: Capacity, now: number, recent = NO_RUNS): PlanInput {
  const pending: PendingJob[] = [];
  const running: RunningJob[] = [];
  const busyWorkers = new Set<number>();
  for (const e of entries) {
    if (e.status === "pending") pending.push(withRecentRuns(e.job, e, recent));
    else {
      if (e.workerId !== null) busyWorkers.add(e.workerId);
      running.push({
        id: e.job.id,
        jobId: e.job.jobId,
        userId: e.job.userId,
        teamId: e.job.teamId,
        jobType: e.job.jobType,
        allocatedGpus: e.allocatedGpus,
        workerId: e.workerId === capacity.localWorkerId ? null : e.workerId,
        expectedEndAt: capacity.expectedEnds.get(e.job.id) ?? e.expectedEndAt,
      });
    }
  }
  const workersView: WorkerView[] = capacity.remote.map(({ statusIdle, ...w }) => ({ ...w, idle: statusIdle && !busyWorkers.has(w.id) }));
  return {
    now,
    limits: capacity.limits,
    pending,
    running,
    localDevices: capacity.localDevices,
    localTrainers: capacity.localTrainers,
    localPaused: capacity.localPaused,
    workers: workersView,
    cloudBudget: capacity.cloudBudget,
  };
}

/**
 * A waiting job with its run time from `recent` runs of its environment when its own max runtime
 * gives none (its `expectedMs` is null). A copy, so the kept entry holds only what its snapshot
 * says, while recent runs change.
 *
 * @example
 * planPass({ ...input, pending: [...input.pending, withRecentRuns(candidate, { configName: "sdxl", trainSteps: 900 }, recent)] });
 */
export function withRecentRuns(
  job: PendingJob,
  { configName, trainSteps }: Pick<ActiveEntry, "configName" | "trainSteps">,
  recent: RecentRuns,
): PendingJob {
  if (job.expectedMs != null || recent.size === 0) return job;
  const facts = { jobType: job.jobType, configName, numProcesses: job.numProcesses, maxRuntime: null, steps: trainSteps };
  const estimate = expectedDuration(facts, recent);
  return estimate ? { ...job, expectedMs: estimate.ms, expectedMethod: estimate.method, expectedBasis: estimate.basis } : job;
}

/** Whether some waiting entry or new candidate is a local job without a max runtime, so its run time needs recent runs. */
export function needsRecentRuns(entries: Iterable<ActiveEntry>, candidates: PendingJob[] = []): boolean {
  const unknown = (job: PendingJob) => job.jobType === "local" && job.expectedMs == null;
  for (const e of entries) if (e.status === "pending" && unknown(e.job)) return true;
  return candidates.some(unknown);
}

/** How far back completed runs count for a waiting job's run time. */
export const RECENT_RUNS_DAYS = 30;

/**
 * Completed local runs of the last RECENT_RUNS_DAYS, newest first, as edge/jobs/estimate.ts
 * recentRuns reads them: one query on the completed-entries index, at most 1,000 rows.
 *
 * @example
 * const recent = await loadRecentRuns(db, new Date());
 */
export async function loadRecentRuns(db: Database, now: Date): Promise<RecentRuns> {
  const since = new Date(now.getTime() - RECENT_RUNS_DAYS * 86_400_000).toISOString();
  const result = await db.$client.execute({
    sql: `SELECT config_name, num_processes, started_at, completed_at, json_extract(config_snapshot, '$."--max_train_steps"') AS steps FROM queue_entries
          WHERE status = 'completed' AND job_type = 'local' AND completed_at >= ? ORDER BY completed_at DESC LIMIT 1000`,
    args: [since],
  });
  return recentRuns(result.rows as unknown as Row[]);
}

/**
 * The local box shows busy while it runs anything, IDLE otherwise: the last statement of every
 * pass's batch (nothing without a local box).
 *
 * @example
 * await writeBatch(db, [admitJobs(admissions, localWorkerId, stamp), localBoxStatus(localWorkerId)]);
 */
export function localBoxStatus(localWorkerId: number | null): BatchPart<void> {
  const statements: InStatement[] = [];
  if (localWorkerId !== null) {
    statements.push({
      sql: `UPDATE workers SET status = CASE WHEN EXISTS (SELECT 1 FROM queue_entries WHERE worker_id = ?1 AND status = 'running') THEN 'busy' ELSE 'IDLE' END
            WHERE id = ?1 AND status IN ('IDLE', 'busy')`,
      args: [localWorkerId],
    });
  }
  return { statements, read: () => undefined };
}

/**
 * What a group of submissions reads, in one read batch: the capacity version, the capacity
 * (unless `withCapacity` is false: the caller holds one it may still use at that version), the
 * budgets (read every time: no version covers them) and the named environments' option maps and
 * dataloaders. An environment that does not exist is absent from the map.
 *
 * @example
 * const { capacity, version, budgets, environments } = await readForSubmissions(db, true, ["sdxl"]);
 */
export async function readForSubmissions(
  db: Database,
  withCapacity: boolean,
  environmentNames: string[],
): Promise<{ capacity: CapacityWithRules | null; version: number; budgets: Budgets; environments: Map<string, EnvironmentConfig> }> {
  const statements: InStatement[] = withCapacity ? capacityStatements() : [VERSION_STATEMENT];
  const budgetsAt = statements.push(BUDGETS_STATEMENT) - 1;
  if (environmentNames.length) {
    const names = environmentNames.map(() => "?").join(", ");
    statements.push({ sql: `SELECT name, config, dataloader FROM environments WHERE name IN (${names})`, args: environmentNames });
  }
  const reads = (await db.$client.batch(statements, "read")).map((r) => r.rows as unknown as Row[]);
  const environments = new Map<string, EnvironmentConfig>();
  for (const row of environmentNames.length ? reads.at(-1)! : []) environments.set(String(row.name), environmentFrom(row));
  const capacity = withCapacity ? capacityFrom(reads[0]!, reads[1]!, reads[2]!, reads[3]!, reads[4]!) : null;
  const budgets = parseSetting("budgets", (reads[budgetsAt]![0]?.value as string | undefined) ?? null);
  return { capacity, version: capacity?.version ?? versionFrom(reads[0]!), budgets, environments };
}
