import type { WaitReason } from "../../shared/schemas/queue";
import { planPass, type PendingJob, type Plan, type PlanInput, type RunningJob, type Waiting, type WorkerView } from "./plan";

/*
 * When each waiting job is expected to start: the pass's own plan run forward in simulated time.
 * From the pass's input and decisions (what runs, with its expected end; what this pass started,
 * with its expected run time), the simulation jumps to the next expected end, frees what that job
 * held, and plans again with the same planner (priorities with their starvation boost at that
 * time, limits, reservations and backfill), until every waiting job has started or nothing more
 * is expected to end. A job started in the simulation ends after its own expected run time; one
 * without an estimate never ends there, so jobs that wait for its capacity are "unknown".
 *
 * Pure, like planPass: the Scheduler calls it after each pass, the tests and the benchmark directly.
 * Every figure is an estimate; the planner never relies on these.
 */

/** A waiting job's expected start (epoch ms; null: unknown) and how it was estimated, in words. */
export interface ExpectedStart {
  at: number | null;
  basis: string;
}

/** How far ahead the simulation looks: beyond this a start is "unknown". */
export const FORECAST_HORIZON_MS = 30 * 24 * 3_600_000;
/** At most this many waiting jobs (in scheduling order) are simulated; the rest are "unknown". */
export const FORECAST_MAX_JOBS = 200;
/** The start of every job behind the first FORECAST_MAX_JOBS: one object for them all. */
const TOO_FAR_AHEAD: ExpectedStart = Object.freeze({ at: null, basis: `unknown: more than ${FORECAST_MAX_JOBS} jobs wait ahead of it` });
/** At most this many simulated passes. */
const MAX_STEPS = 2_000;

/** Reasons a job cannot start whatever ends: no box that could ever take it as configured. */
const NEVER: ReadonlySet<WaitReason> = new Set(["insufficient_gpus", "no_matching_worker", "trainer_unavailable"]);

const isoMinute = (ms: number) => `${new Date(ms).toISOString().slice(0, 16)}Z`;
const names = (ids: string[]) => (ids.length > 3 ? `${ids.slice(0, 3).join(", ")} and ${ids.length - 3} more` : ids.join(", "));

interface SimRunning {
  job: RunningJob;
  label: string;
  /** Expected end (epoch ms); null: unknown. */
  end: number | null;
  /** Started in the simulation (a waiting job now), not running for real. */
  simulated: boolean;
  /** Its real expected end, when it is past it (an overdue job is expected to end any moment). */
  overdueSince?: number;
}

/**
 * Each waiting job's expected start, by its id, from the input and the plan of one pass.
 *
 * @example
 * const plan = planPass(input);
 * const starts = expectedStarts(input, plan); // Map { 7 => { at: ..., basis: "after local-ab12 ends (expected 2026-11-27T14:20Z)" } }
 */
export function expectedStarts(input: PlanInput, plan: Plan): Map<number, ExpectedStart> {
  const { now } = input;
  const starts = new Map<number, ExpectedStart>();
  const admittedIds = new Set(plan.admitted.map((a) => a.id));
  // What waits, in the plan's order (its waiting list is in position order); a job that can never
  // fit is not simulated, nor one behind the first FORECAST_MAX_JOBS: only the jobs simulated and
  // those admitted are looked up, so a deep queue costs one scan of its pending jobs.
  const simulated: Waiting[] = [];
  for (const w of plan.waiting) {
    if (admittedIds.has(w.id)) continue;
    if (NEVER.has(w.reason)) starts.set(w.id, { at: null, basis: `unknown: no box can ever fit it (${w.message})` });
    else if (simulated.length >= FORECAST_MAX_JOBS) starts.set(w.id, TOO_FAR_AHEAD);
    else simulated.push(w);
  }
  const wanted = new Set([...admittedIds, ...simulated.map((w) => w.id)]);
  const pendingById = new Map<number, PendingJob>();
  for (const j of input.pending) if (wanted.has(j.id)) pendingById.set(j.id, j);

  // What runs: the running jobs and what this pass started.
  const running: SimRunning[] = input.running.map((job) => {
    const end = job.expectedEndAt ?? null;
    const overdue = end !== null && end <= now;
    return {
      job,
      label: job.jobId ?? `job ${job.id}`,
      end: overdue ? now : end,
      simulated: false,
      ...(overdue ? { overdueSince: end } : {}),
    };
  });
  for (const a of plan.admitted) {
    const p = pendingById.get(a.id);
    if (!p) continue;
    running.push({
      job: { ...runningOf(p, a.gpus ?? [], a.workerId), expectedEndAt: a.expectedEndAt ?? null },
      label: p.jobId,
      end: a.expectedEndAt ?? null,
      simulated: false,
    });
  }
  const workers = new Map<number, WorkerView>(input.workers.map((w) => [w.id, { ...w }]));
  for (const a of plan.admitted) if (a.workerId !== null && workers.has(a.workerId)) workers.get(a.workerId)!.idle = false;
  let committedUsd = input.cloudBudget?.committedUsd ?? 0;
  for (const a of plan.admitted) committedUsd += pendingById.get(a.id)?.estimatedCost ?? 0;

  let left: PendingJob[] = simulated.flatMap((w) => pendingById.get(w.id) ?? []);
  const lastReason = new Map(simulated.map((w) => [w.id, w]));

  let beyond = false;
  for (let step = 0; left.length; step++) {
    const ends = running.flatMap((r) => (r.end === null ? [] : [r.end]));
    if (!ends.length) break;
    const t = Math.max(now, Math.min(...ends));
    if (t > now + FORECAST_HORIZON_MS || step >= MAX_STEPS) {
      beyond = true;
      break;
    }
    const ended = running.filter((r) => r.end !== null && r.end <= t);
    for (const r of ended) {
      running.splice(running.indexOf(r), 1);
      const w = r.job.workerId === null ? undefined : workers.get(r.job.workerId);
      if (w) Object.assign(w, { idle: true, idleSince: t });
    }
    const simPlan = planPass({
      ...input,
      now: t,
      pending: left,
      running: running.map((r) => ({ ...r.job, expectedEndAt: r.end })),
      workers: [...workers.values()],
      cloudBudget: input.cloudBudget ? { ...input.cloudBudget, committedUsd } : input.cloudBudget,
    });
    if (!simPlan.admitted.length) continue;
    const basis = afterEnds(ended, t);
    const started = new Set<number>();
    for (const a of simPlan.admitted) {
      const job = pendingById.get(a.id)!;
      started.add(a.id);
      starts.set(a.id, { at: t, basis });
      running.push({
        job: runningOf(job, a.gpus ?? [], a.workerId),
        label: job.jobId,
        end: a.expectedEndAt ?? null,
        simulated: true,
      });
      if (a.workerId !== null && workers.has(a.workerId)) workers.get(a.workerId)!.idle = false;
      committedUsd += job.estimatedCost ?? 0;
    }
    left = left.filter((j) => !started.has(j.id));
  }

  // What never started in the simulation: why not.
  const endless = running.filter((r) => r.end === null);
  for (const job of left) {
    const w = lastReason.get(job.id)!;
    starts.set(job.id, { at: null, basis: unknownBasis(w.reason, w.message, endless, beyond) });
  }
  return starts;
}

function runningOf(job: PendingJob, gpus: number[], workerId: number | null): RunningJob {
  return {
    id: job.id,
    jobId: job.jobId,
    userId: job.userId,
    teamId: job.teamId,
    jobType: job.jobType,
    allocatedGpus: job.jobType === "cloud" ? [] : gpus,
    workerId,
  };
}

/** "after local-ab12 ends (expected 14:20Z)", for the jobs whose end frees what a job starts on. */
function afterEnds(ended: SimRunning[], t: number): string {
  const overdue = ended.filter((r) => r.overdueSince !== undefined);
  if (overdue.length === ended.length && overdue.length)
    return `after ${names(overdue.map((r) => r.label))} ${overdue.length === 1 ? "ends" : "end"} (expected by ${isoMinute(overdue[0]!.overdueSince!)}, overdue: any moment)`;
  const who = names(ended.map((r) => r.label));
  return `after ${who} ${ended.length === 1 ? "ends" : "end"} (expected ${isoMinute(t)})`;
}

function unknownBasis(reason: WaitReason, message: string, endless: SimRunning[], beyond: boolean): string {
  if (reason === "local_paused") return "unknown: local jobs are paused until POST /api/queue/process (or a restart)";
  if (reason === "no_local_box") return "unknown: no local GPU box is registered and online";
  if (reason === "spending_limit") return `unknown: ${message}`;
  const ahead = endless.filter((r) => r.simulated).map((r) => r.label);
  if (ahead.length)
    return `unknown: no run-time estimate for ${names(ahead)} ahead of it (set --max_runtime_minutes, or let its environment complete a run on as many GPUs)`;
  const running = endless.map((r) => r.label);
  if (running.length) return `unknown: ${names(running)} ${running.length === 1 ? "runs" : "run"} with no expected end`;
  if (beyond) return `unknown: not expected to start within ${FORECAST_HORIZON_MS / 86_400_000} days`;
  return `unknown: no job is expected to end that would let it start (${reason}: ${message})`;
}
