// Builders for the planner's input (edge/scheduler/plan.ts), shared by its unit tests.
import { CONCURRENCY_DEFAULTS, type ConcurrencySettings } from "../../shared/schemas/queue";
import { planPass, type PendingJob, type RunningJob, type WorkerView } from "../../edge/scheduler/plan";

export const NOW = Date.parse("2026-11-23T12:00:00Z");
export const MIN = 60_000;
let nextId = 1;

/** A pending job (a cloud job unless told otherwise), queued a minute ago. */
export function job(over: Partial<PendingJob> = {}): PendingJob {
  const id = nextId++;
  return {
    id,
    jobId: `j${id}`,
    userId: 1,
    teamId: null,
    priority: 10,
    priorityOverride: null,
    queuedAt: NOW - MIN,
    jobType: "cloud",
    numProcesses: 1,
    target: "local",
    workerLabels: null,
    deviceIds: null,
    anyGpu: false,
    ...over,
  };
}
export const local = (over: Partial<PendingJob> = {}) => job({ jobType: "local", target: "local", ...over });
export const running = (over: Partial<RunningJob> = {}): RunningJob => ({
  id: nextId++,
  userId: 1,
  teamId: null,
  jobType: "cloud",
  allocatedGpus: [],
  workerId: null,
  ...over,
});
export const worker = (id: number, over: Partial<WorkerView> = {}): WorkerView => ({
  id,
  labels: { gpu: "a100-80gb", zone: "eu-west" },
  gpuCount: 8,
  idle: true,
  idleSince: NOW - id * MIN,
  ...over,
});
export const limits = (over: Partial<ConcurrencySettings> = {}) => ({ ...CONCURRENCY_DEFAULTS, ...over });
export const plan = (
  pending: PendingJob[],
  opts: { running?: RunningJob[]; limits?: Partial<ConcurrencySettings>; devices?: number[] | null; workers?: WorkerView[] } = {},
) =>
  planPass({
    now: NOW,
    limits: limits(opts.limits),
    pending,
    running: opts.running ?? [],
    localDevices: opts.devices === undefined ? null : opts.devices,
    workers: opts.workers ?? [],
  });
export const ids = (xs: { jobId: string }[]) => xs.map((x) => x.jobId);
