import { matchesLabels } from "../../shared/labels";
import type { ConcurrencySettings, WaitReason } from "../../shared/schemas/queue";

/*
 * One scheduler pass as a pure function: given what runs, what waits and what capacity exists,
 * decide everything that starts now and why each other job waits. The Scheduler DO feeds it from
 * libSQL and applies its decisions; tests and the benchmark call it directly.
 *
 * Order: effective priority (priority_override, else the level's priority, plus the starvation
 * boost), then submission time, then id. Every job that fits is admitted in one pass; a job that
 * does not fit is skipped, so smaller jobs behind it may backfill - until it has waited
 * `starvation_threshold_minutes`: from then on the GPUs (or workers) it could use are held for
 * it, so a stream of small jobs cannot starve a large one. A job that can never fit (more GPUs
 * than exist, no worker that could ever match) holds nothing.
 */

/** Priority added per full `starvation_threshold_minutes` waited, up to the cap. */
export const STARVATION_BOOST_PER_THRESHOLD = 10;
/** At most one level's worth from viewer to admin: a long-waiting job ties the top and, older, wins. */
export const STARVATION_BOOST_CAP = 30;

export interface PendingJob {
  id: number;
  jobId: string;
  userId: number | null;
  teamId: string | null;
  priority: number;
  priorityOverride: number | null;
  /** Epoch ms. */
  queuedAt: number;
  jobType: "local" | "cloud";
  numProcesses: number;
  target: "auto" | "worker" | "local";
  workerLabels: Record<string, string> | null;
  deviceIds: number[] | null;
  anyGpu: boolean;
  /** USD a cloud job is estimated to cost (0 for local jobs): what it takes from the spending limit. */
  estimatedCost?: number;
  /**
   * How long it is expected to run once started, in ms (its --max_runtime_minutes, else the recent
   * runs of its environment on as many GPUs: edge/scheduler/estimate.ts); null or absent: unknown.
   */
  expectedMs?: number | null;
}

export interface RunningJob {
  id: number;
  userId: number | null;
  teamId: string | null;
  jobType: "local" | "cloud";
  allocatedGpus: number[];
  /** Set when a remote worker runs it; null on the local box (or the cloud). */
  workerId: number | null;
  /** Epoch ms it is expected to end (from its progress, else its --max_runtime_minutes); null or absent: unknown. */
  expectedEndAt?: number | null;
}

export interface WorkerView {
  id: number;
  labels: Record<string, string>;
  gpuCount: number;
  /** IDLE and free to take a job. */
  idle: boolean;
  /** Epoch ms it became idle: the longest-idle worker is taken first (FIFO). */
  idleSince: number;
}

export interface PlanInput {
  now: number;
  limits: ConcurrencySettings;
  pending: PendingJob[];
  running: RunningJob[];
  /** The local GPU box's device indices, or null when none is registered and online. */
  localDevices: number[] | null;
  /** True while local-box admissions are held (spec 3: after a running local job is cancelled). */
  localPaused?: boolean;
  /** Online remote workers (busy ones included: they tell whether a job could ever match). */
  workers: WorkerView[];
  /**
   * The cloud spending limit of the current period, and what is committed against it (finished
   * jobs' costs this period plus running jobs' estimates); null or absent: no limit.
   */
  cloudBudget?: { limitUsd: number; committedUsd: number } | null;
}

export interface Admission {
  id: number;
  jobId: string;
  /** Local box devices given to the job ([] for a CPU job); null when not on the local box. */
  gpus: number[] | null;
  workerId: number | null;
}

export interface Waiting {
  id: number;
  jobId: string;
  /** 1-based place among the jobs still waiting, in scheduling order. */
  position: number;
  effectivePriority: number;
  reason: WaitReason;
  message: string;
}

export interface Plan {
  admitted: Admission[];
  waiting: Waiting[];
}

/** The priority a job is scheduled by at `now`. */
export function effectivePriority(
  job: Pick<PendingJob, "priority" | "priorityOverride" | "queuedAt">,
  now: number,
  thresholdMinutes: number,
): number {
  const base = job.priorityOverride ?? job.priority;
  if (thresholdMinutes <= 0) return base;
  const thresholds = Math.floor((now - job.queuedAt) / (thresholdMinutes * 60_000));
  return base + Math.min(STARVATION_BOOST_CAP, Math.max(0, thresholds) * STARVATION_BOOST_PER_THRESHOLD);
}

const list = (xs: number[]) => `[${xs.join(", ")}]`;

/**
 * Decides one pass.
 *
 * @example
 * const { admitted, waiting } = planPass({ now: Date.now(), limits, pending, running, localDevices: [0, 1], workers: [] });
 */
export function planPass(input: PlanInput): Plan {
  const { now, limits } = input;
  const threshold = limits.starvation_threshold_minutes;
  const ordered = input.pending
    .map((job) => ({ job, priority: effectivePriority(job, now, threshold) }))
    .sort((a, b) => b.priority - a.priority || a.job.queuedAt - b.job.queuedAt || a.job.id - b.job.id);

  // Cloud pool counters.
  let cloudRunning = 0;
  const cloudByUser = new Map<number | null, number>();
  const byTeam = new Map<string, number>();
  // Local pool state.
  let localJobs = 0;
  const usedDevices = new Set<number>();
  for (const job of input.running) {
    if (job.teamId !== null) byTeam.set(job.teamId, (byTeam.get(job.teamId) ?? 0) + 1);
    if (job.jobType === "cloud") {
      cloudRunning++;
      cloudByUser.set(job.userId, (cloudByUser.get(job.userId) ?? 0) + 1);
    } else if (job.workerId === null) {
      localJobs++;
      for (const gpu of job.allocatedGpus) usedDevices.add(gpu);
    }
  }
  const devices = input.localDevices;
  const heldDevices = new Map<number, string>(); // device -> job id it is held for
  const workers = [...input.workers].sort((a, b) => a.idleSince - b.idleSince || a.id - b.id);
  const takenWorkers = new Set<number>();
  const heldWorkers = new Map<number, string>();

  const admitted: Admission[] = [];
  const waiting: Omit<Waiting, "position">[] = [];
  const starving = (job: PendingJob) => threshold > 0 && now - job.queuedAt >= threshold * 60_000;

  type Outcome =
    { ok: true; gpus: number[] | null; workerId: number | null } | { ok: false; reason: WaitReason; message: string; never?: boolean };

  let committedUsd = input.cloudBudget?.committedUsd ?? 0;
  function tryCloud(job: PendingJob): Outcome {
    const budget = input.cloudBudget;
    const cost = job.estimatedCost ?? 0;
    if (budget && committedUsd + cost > budget.limitUsd + 1e-9)
      return {
        ok: false,
        reason: "spending_limit",
        message: `its estimated $${cost.toFixed(2)} would pass the spending limit: $${committedUsd.toFixed(2)} of $${budget.limitUsd.toFixed(2)} is committed this period`,
      };
    if (cloudRunning >= limits.max_concurrent)
      return {
        ok: false,
        reason: "global_limit",
        message: `${cloudRunning} of ${limits.max_concurrent} cloud jobs are running (max_concurrent)`,
      };
    const mine = cloudByUser.get(job.userId) ?? 0;
    if (mine >= limits.user_max_concurrent)
      return {
        ok: false,
        reason: "user_limit",
        message: `its owner has ${mine} of ${limits.user_max_concurrent} cloud jobs running (user_max_concurrent)`,
      };
    if (limits.enable_fair_share && job.teamId !== null) {
      const team = byTeam.get(job.teamId) ?? 0;
      if (team >= limits.team_max_concurrent)
        return {
          ok: false,
          reason: "team_limit",
          message: `team ${job.teamId} has ${team} of ${limits.team_max_concurrent} jobs running (team_max_concurrent)`,
        };
    }
    return { ok: true, gpus: null, workerId: null };
  }

  function tryLocal(job: PendingJob): Outcome {
    if (devices === null) return { ok: false, reason: "no_local_box", message: "no local GPU box is registered and online" };
    const n = job.numProcesses;
    const allowed = job.anyGpu || !job.deviceIds?.length ? devices : job.deviceIds.filter((d) => devices.includes(d));
    if (n > allowed.length) {
      const where =
        job.anyGpu || !job.deviceIds?.length
          ? `the local box has ${devices.length}`
          : `only ${list(allowed)} of its configured devices ${list(job.deviceIds!)} exist here (submit with any_gpu to use others)`;
      return { ok: false, reason: "insufficient_gpus", message: `needs ${n} GPU(s) but ${where}`, never: true };
    }
    if (input.localPaused)
      return {
        ok: false,
        reason: "local_paused",
        message: "a running local job was cancelled; local jobs wait until POST /api/queue/process (or a restart) starts them (spec 3)",
      };
    if (localJobs >= limits.local_job_max_concurrent)
      return {
        ok: false,
        reason: "local_job_limit",
        message: `${localJobs} of ${limits.local_job_max_concurrent} local jobs are running (local_job_max_concurrent)`,
      };
    const gpuLimit = limits.local_gpu_max_concurrent;
    if (gpuLimit !== null && usedDevices.size + n > gpuLimit) {
      return {
        ok: false,
        reason: "local_gpu_limit",
        message: `local jobs use ${usedDevices.size} GPU(s); ${n} more would pass the limit of ${gpuLimit} (local_gpu_max_concurrent)`,
      };
    }
    const free = allowed.filter((d) => !usedDevices.has(d));
    const open = free.filter((d) => !heldDevices.has(d));
    if (open.length < n) {
      if (free.length >= n) {
        const holder = heldDevices.get(free.find((d) => heldDevices.has(d))!)!;
        return {
          ok: false,
          reason: "reserved",
          message: `GPUs ${list(free)} are held for ${holder}, which has waited past the starvation threshold`,
        };
      }
      return { ok: false, reason: "gpus_busy", message: `needs ${n} GPU(s) of ${list(allowed)}; free now: ${list(free)}` };
    }
    return { ok: true, gpus: open.sort((a, b) => a - b).slice(0, n), workerId: null };
  }

  function tryWorker(job: PendingJob): Outcome {
    const candidates = workers.filter((w) => w.gpuCount >= job.numProcesses && matchesLabels(job.workerLabels, w.labels));
    const available = candidates.filter((w) => w.idle && !takenWorkers.has(w.id));
    const pick = available.find((w) => !heldWorkers.has(w.id));
    if (pick) return { ok: true, gpus: null, workerId: pick.id };
    const wants = `${job.workerLabels && Object.keys(job.workerLabels).length ? `labels ${JSON.stringify(job.workerLabels)} and ` : ""}at least ${job.numProcesses} GPU(s)`;
    if (candidates.length === 0) return { ok: false, reason: "no_matching_worker", message: `no online worker has ${wants}`, never: true };
    if (available.length > 0)
      return {
        ok: false,
        reason: "reserved",
        message: `the matching idle workers are held for ${heldWorkers.get(available[0]!.id)}, which has waited past the starvation threshold`,
      };
    return { ok: false, reason: "workers_busy", message: `all ${candidates.length} worker(s) with ${wants} are busy` };
  }

  for (const { job, priority } of ordered) {
    let outcome: Outcome;
    if (job.jobType === "cloud") outcome = tryCloud(job);
    else if (job.target === "local") outcome = tryLocal(job);
    else if (job.target === "worker") outcome = tryWorker(job);
    else {
      const remote = tryWorker(job);
      outcome = remote.ok ? remote : tryLocal(job);
      // Report the remote reason only when the local box cannot help at all.
      if (!outcome.ok && outcome.never && !remote.ok && !remote.never) outcome = remote;
    }
    if (outcome.ok) {
      admitted.push({ id: job.id, jobId: job.jobId, gpus: outcome.gpus, workerId: outcome.workerId });
      if (job.teamId !== null) byTeam.set(job.teamId, (byTeam.get(job.teamId) ?? 0) + 1);
      if (job.jobType === "cloud") {
        cloudRunning++;
        cloudByUser.set(job.userId, (cloudByUser.get(job.userId) ?? 0) + 1);
        committedUsd += job.estimatedCost ?? 0;
      } else if (outcome.workerId !== null) {
        takenWorkers.add(outcome.workerId);
      } else {
        localJobs++;
        for (const gpu of outcome.gpus ?? []) usedDevices.add(gpu);
      }
      continue;
    }
    waiting.push({ id: job.id, jobId: job.jobId, effectivePriority: priority, reason: outcome.reason, message: outcome.message });
    // A job starved past the threshold holds the capacity it could use, so it is next to start.
    if (!outcome.never && job.jobType === "local" && starving(job)) {
      if (job.target !== "worker" && devices !== null) {
        const allowed = job.anyGpu || !job.deviceIds?.length ? devices : job.deviceIds.filter((d) => devices.includes(d));
        for (const d of allowed) if (!heldDevices.has(d)) heldDevices.set(d, job.jobId);
      }
      if (job.target !== "local") {
        for (const w of workers)
          if (w.gpuCount >= job.numProcesses && matchesLabels(job.workerLabels, w.labels) && !heldWorkers.has(w.id))
            heldWorkers.set(w.id, job.jobId);
      }
    }
  }
  return { admitted, waiting: waiting.map((w, i) => ({ ...w, position: i + 1 })) };
}
