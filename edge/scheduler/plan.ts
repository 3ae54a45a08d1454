import { matchesLabels } from "../../shared/labels";
import type { ConcurrencySettings, DURATION_METHODS, WaitReason } from "../../shared/schemas/queue";
import { effectivePriority } from "../jobs/priority";
import type { Admission, Placement } from "../jobs/job";
import { Reservations, type Hold } from "./reservations";

export type { Admission };

/*
 * One scheduler pass as a pure function: given what runs, what waits and what capacity exists,
 * decide everything that starts now and why each other job waits. The Scheduler DO feeds it from
 * libSQL and applies its decisions; tests and the benchmarks call it directly.
 *
 * Order: effective priority (priority_override, else the level's priority, plus the starvation
 * boost), then submission time, then id. Every job that fits is admitted in one pass; a job that
 * does not fit is skipped, so smaller jobs behind it may start - until it has waited
 * `starvation_threshold_minutes`. From then on it holds a reservation (EASY backfill, as Slurm's
 * backfill scheduler and Maui do it, but with run times learnt from the jobs' own progress rather
 * than declared by users): its "shadow time" is the earliest moment enough of the GPUs it may use
 * are expected free, from the expected ends of the jobs running on them. Until then a job behind
 * it may take a reserved GPU only if it is expected to end before that moment, and any job may
 * take a GPU the reserved job will not need even then. A job of unknown run time takes only such
 * spare GPUs. When the reservation would depend on a running job whose end is unknown, or that is
 * already past its expected end, nothing is promised: the reservation holds every GPU it could
 * use, free ones included, until enough are free at once - so a wrong estimate can delay a
 * reserved job by its own error at most, never push it back again and again. The same for remote
 * workers, a worker being the unit. A job that can never fit (more GPUs than exist, no worker that
 * could ever match) holds nothing.
 */

type DurationMethod = (typeof DURATION_METHODS)[number];

export interface PendingJob extends Placement {
  id: number;
  jobId: string;
  userId: number | null;
  teamId: string | null;
  priority: number;
  priorityOverride: number | null;
  /** Epoch ms. */
  queuedAt: number;
  /** USD a cloud job is estimated to cost (0 for local jobs): what it takes from the spending limit. */
  estimatedCost?: number;
  /**
   * How long it is expected to run once started, in ms (its --max_runtime_minutes, else the recent
   * runs of its environment on as many GPUs: edge/jobs/estimate.ts); null or absent: unknown.
   */
  expectedMs?: number | null;
  /** How expectedMs was estimated, for people reading the queue; the planner does not look at it. */
  expectedMethod?: DurationMethod | null;
  /** How expectedMs was estimated, in words (edge/jobs/estimate.ts expectedDuration); for people only. */
  expectedBasis?: string | null;
  /** The trainer it runs (shared/trainers.ts): only a box that can run it takes it; null or absent: any box. */
  trainer?: string | null;
}

export interface RunningJob {
  id: number;
  /** Its job id, for the words of an expected start ("after local-ab12 ends"); the planner does not look at it. */
  jobId?: string;
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
  /** The trainers its runner can run; null or absent: it did not say, and takes any job. */
  trainers?: string[] | null;
}

/** What a box's runner said of its trainers: those it can run, and why it cannot run others. */
export interface BoxTrainers {
  available: string[];
  /** Trainer name -> why it is not available there. */
  missing: Record<string, string>;
}

export interface PlanInput {
  now: number;
  limits: ConcurrencySettings;
  pending: PendingJob[];
  running: RunningJob[];
  /** The local GPU box's device indices, or null when none is registered and online. */
  localDevices: number[] | null;
  /** True while local-box admissions are held (after a running local job is cancelled, until POST /api/queue/process or a restart). */
  localPaused?: boolean;
  /** The trainers the local box can run; null or absent: its runner did not say (it takes any job). */
  localTrainers?: BoxTrainers | null;
  /** Online remote workers (busy ones included: they tell whether a job could ever match). */
  workers: WorkerView[];
  /**
   * The cloud spending limit of the current period, and what is committed against it (finished
   * jobs' costs this period plus running jobs' estimates); null or absent: no limit.
   */
  cloudBudget?: { limitUsd: number; committedUsd: number } | null;
}

export interface Waiting {
  id: number;
  jobId: string;
  /** 1-based place among the jobs still waiting, in scheduling order. */
  position: number;
  effectivePriority: number;
  reason: WaitReason;
  message: string;
  /**
   * Set when it holds a reservation (it waited past the starvation threshold): when it is expected
   * to start (epoch ms), or null when no start can be promised yet.
   */
  expectedStartAt?: number | null;
}

export interface Plan {
  admitted: Admission[];
  waiting: Waiting[];
}

const list = (xs: number[]) => `[${xs.join(", ")}]`;
/** A time in messages: UTC to the minute, as in `2026-11-24T14:05Z`. */
const isoMinute = (ms: number) => `${new Date(ms).toISOString().slice(0, 16)}Z`;
const minutes = (ms: number) => `${Math.max(1, Math.round(ms / 60_000))} min`;
/** The earlier of two expected starts; null (unknown) only when neither is known. */
const minStart = (a: number | null | undefined, b: number | null) => (a === undefined || a === null ? b : b === null ? a : Math.min(a, b));

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
  // Reservations for jobs waiting past the threshold, over the local GPUs and the workers.
  const gpuPlan = new Reservations<number>(now);
  const workerPlan = new Reservations<number>(now);
  for (const job of input.running) {
    if (job.teamId !== null) byTeam.set(job.teamId, (byTeam.get(job.teamId) ?? 0) + 1);
    if (job.jobType === "cloud") {
      cloudRunning++;
      cloudByUser.set(job.userId, (cloudByUser.get(job.userId) ?? 0) + 1);
    } else if (job.workerId === null) {
      localJobs++;
      for (const gpu of job.allocatedGpus) {
        usedDevices.add(gpu);
        gpuPlan.occupy(gpu, job.expectedEndAt);
      }
    } else workerPlan.occupy(job.workerId, job.expectedEndAt);
  }
  const devices = input.localDevices;
  const workers = [...input.workers].sort((a, b) => a.idleSince - b.idleSince || a.id - b.id);
  const takenWorkers = new Set<number>();

  const admitted: Admission[] = [];
  const starving = (job: PendingJob) => threshold > 0 && now - job.queuedAt >= threshold * 60_000;
  const endOf = (job: PendingJob) => (job.expectedMs === null || job.expectedMs === undefined ? null : now + job.expectedMs);

  type Outcome =
    { ok: true; gpus: number[] | null; workerId: number | null } | { ok: false; reason: WaitReason; message: string; never?: boolean };
  const allowedDevices = (job: PendingJob, devices: number[]) =>
    job.anyGpu || !job.deviceIds?.length ? devices : job.deviceIds.filter((d) => devices.includes(d));
  const canRun = (trainers: string[] | null | undefined, job: PendingJob) => !job.trainer || !trainers || trainers.includes(job.trainer);
  const fittingWorkers = (job: PendingJob) =>
    workers.filter((w) => w.gpuCount >= job.numProcesses && matchesLabels(job.workerLabels, w.labels));
  const matchingWorkers = (job: PendingJob) => fittingWorkers(job).filter((w) => canRun(w.trainers, job));

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
    const local = input.localTrainers;
    if (local && !canRun(local.available, job)) {
      const why = local.missing[job.trainer!];
      return {
        ok: false,
        reason: "trainer_unavailable",
        message: `the local GPU box cannot run trainer "${job.trainer}"${why ? `: ${why}` : ` (it runs ${local.available.join(", ") || "none"})`}`,
        never: true,
      };
    }
    const n = job.numProcesses;
    const allowed = allowedDevices(job, devices);
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
        message: "a running local job was cancelled; local jobs wait until POST /api/queue/process (or a restart) starts them",
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
    const open = gpuPlan.usable(free, job.expectedMs);
    if (open.length < n) {
      const hold = free.length >= n ? gpuPlan.blocking(free, job.expectedMs) : undefined;
      if (hold) return { ok: false, reason: "reserved", message: `GPUs ${list(free)} are free, but ${heldFor(hold, job)}` };
      return { ok: false, reason: "gpus_busy", message: `needs ${n} GPU(s) of ${list(allowed)}; free now: ${list(free)}` };
    }
    // Reserved GPUs it gives back in time first, then spare ones (Reservations.usable's order).
    return { ok: true, gpus: open.slice(0, n).sort((a, b) => a - b), workerId: null };
  }

  function tryWorker(job: PendingJob): Outcome {
    const candidates = matchingWorkers(job);
    const available = candidates.filter((w) => w.idle && !takenWorkers.has(w.id)).map((w) => w.id);
    const pick = workerPlan.usable(available, job.expectedMs)[0];
    if (pick !== undefined) return { ok: true, gpus: null, workerId: pick };
    const wants = `${job.workerLabels && Object.keys(job.workerLabels).length ? `labels ${JSON.stringify(job.workerLabels)} and ` : ""}at least ${job.numProcesses} GPU(s)`;
    if (candidates.length === 0) {
      if (fittingWorkers(job).length)
        return {
          ok: false,
          reason: "trainer_unavailable",
          message: `no online worker with ${wants} can run trainer "${job.trainer}" (GET /api/system/workers says why)`,
          never: true,
        };
      return { ok: false, reason: "no_matching_worker", message: `no online worker has ${wants}`, never: true };
    }
    const hold = workerPlan.blocking(available, job.expectedMs);
    if (hold) return { ok: false, reason: "reserved", message: `the matching idle workers are free, but ${heldFor(hold, job)}` };
    return { ok: false, reason: "workers_busy", message: `all ${candidates.length} worker(s) with ${wants} are busy` };
  }

  /** What a job is told when a reservation keeps it from free capacity: whose, from when, and why it may not go first. */
  function heldFor(hold: Hold, job: PendingJob): string {
    if (hold.until === null)
      return `they are held for ${hold.holder}, which has waited past the starvation threshold (no start can be promised yet: a job it waits for has no expected end, or is past it)`;
    const own =
      job.expectedMs === null || job.expectedMs === undefined
        ? "this job's run time is unknown (set --max_runtime_minutes, or let its environment complete a run on as many GPUs), so it may use only capacity that job will not need"
        : `this job, expected to run ${minutes(job.expectedMs)}, would end after that`;
    return `they are reserved for ${hold.holder}, which has waited past the starvation threshold and is expected to start at ${isoMinute(hold.until)}; ${own}`;
  }

  function tryJob(job: PendingJob): Outcome {
    if (job.jobType === "cloud") return tryCloud(job);
    if (job.target === "local") return tryLocal(job);
    if (job.target === "worker") return tryWorker(job);
    const remote = tryWorker(job);
    const outcome = remote.ok ? remote : tryLocal(job);
    // Report the remote reason only when the local box cannot help at all.
    return !outcome.ok && outcome.never && !remote.ok && !remote.never ? remote : outcome;
  }

  function admit(job: PendingJob, outcome: Extract<Outcome, { ok: true }>): void {
    admitted.push({ id: job.id, jobId: job.jobId, gpus: outcome.gpus, workerId: outcome.workerId, expectedEndAt: endOf(job) });
    if (job.teamId !== null) byTeam.set(job.teamId, (byTeam.get(job.teamId) ?? 0) + 1);
    if (job.jobType === "cloud") {
      cloudRunning++;
      cloudByUser.set(job.userId, (cloudByUser.get(job.userId) ?? 0) + 1);
      committedUsd += job.estimatedCost ?? 0;
    } else if (outcome.workerId !== null) {
      takenWorkers.add(outcome.workerId);
      workerPlan.occupy(outcome.workerId, endOf(job));
    } else {
      localJobs++;
      for (const gpu of outcome.gpus ?? []) {
        usedDevices.add(gpu);
        gpuPlan.occupy(gpu, endOf(job));
      }
    }
  }

  // A deep queue is mostly jobs of a few shapes waiting behind the same full capacity: between two
  // changes of the pass's state (an admission, a reservation) a job's outcome depends only on its
  // shape, so it is decided once per shape and state. `decided` holds those outcomes, and
  // `unreserved` the shapes whose reservation failed, until the next change.
  const decided = new Map<string, Outcome>();
  const unreserved = new Set<string>();
  const changed = () => {
    decided.clear();
    unreserved.clear();
  };

  const waiting: Waiting[] = [];
  for (const { job, priority } of ordered) {
    const shape = shapeOf(job);
    let outcome = decided.get(shape);
    if (outcome === undefined) {
      outcome = tryJob(job);
      decided.set(shape, outcome);
    }
    if (outcome.ok) {
      admit(job, outcome);
      changed();
      continue;
    }
    let { message } = outcome;
    let expectedStartAt: number | null | undefined;
    // A job starved past the threshold gets a reservation on the capacity it could use.
    if (!outcome.never && job.jobType === "local" && starving(job) && !unreserved.has(shape)) {
      const held: string[] = [];
      if (job.target !== "worker" && devices !== null) {
        const r = gpuPlan.reserve(job.jobId, allowedDevices(job, devices), job.numProcesses);
        if (r) {
          held.push(r.startAt === null ? `GPUs ${list(r.units)} are held for it` : `GPUs ${list(r.units)} from ${isoMinute(r.startAt)}`);
          expectedStartAt = minStart(expectedStartAt, r.startAt);
        }
      }
      if (job.target !== "local") {
        const r = workerPlan.reserve(
          job.jobId,
          matchingWorkers(job).map((w) => w.id),
          1,
        );
        if (r) {
          const which = r.units.length === 1 ? `worker ${r.units[0]}` : `workers ${list(r.units)}`;
          held.push(r.startAt === null ? `${which} held for it` : `${which} from ${isoMinute(r.startAt)}`);
          expectedStartAt = minStart(expectedStartAt, r.startAt);
        }
      }
      if (held.length) changed();
      else unreserved.add(shape);
      if (held.length) {
        const when =
          expectedStartAt === null
            ? "no start can be promised yet (a job it waits for has no expected end, or is past it), so nothing else may use them"
            : `expected to start at ${isoMinute(expectedStartAt!)}`;
        message += `; reserved (waited past the starvation threshold): ${held.join(", ")}; ${when}`;
      }
    }
    const place: Waiting = {
      id: job.id,
      jobId: job.jobId,
      position: waiting.length + 1,
      effectivePriority: priority,
      reason: outcome.reason,
      message,
    };
    if (expectedStartAt !== undefined) place.expectedStartAt = expectedStartAt;
    waiting.push(place);
  }
  return { admitted, waiting: waiting };
}

/**
 * What a job's outcome in a pass depends on besides the pass's state: jobs of one shape fare
 * alike until the state changes.
 */
function shapeOf(job: PendingJob): string {
  let shape = shapes.get(job);
  if (shape === undefined) shapes.set(job, (shape = shapeText(job)));
  return shape;
}
/** Kept with the job object: a deep queue's kept entries are planned pass after pass. */
const shapes = new WeakMap<PendingJob, string>();

function shapeText(job: PendingJob): string {
  if (job.jobType === "cloud") return `cloud|${job.userId}|${job.teamId}|${job.estimatedCost ?? 0}`;
  const devices = job.anyGpu ? "any" : (job.deviceIds?.join(",") ?? "");
  const labels = job.workerLabels ? JSON.stringify(job.workerLabels) : "";
  return `${job.target}|${job.numProcesses}|${devices}|${job.trainer ?? ""}|${job.expectedMs ?? ""}|${labels}`;
}
