// The expected start of every waiting job (edge/scheduler/forecast.ts): the pass's plan run
// forward in simulated time. Pure; test/queue/expected-start.test.ts runs it through the real stack.
import { describe, expect, it } from "vitest";
import { expectedStarts } from "../../edge/scheduler/forecast";
import { planPass, type PendingJob, type PlanInput, type RunningJob } from "../../edge/scheduler/plan";
import { MIN, NOW, limits, local, running, worker } from "../helpers/plan";

const at = (minutes: number) => NOW + minutes * MIN;
const iso = (ms: number) => `${new Date(ms).toISOString().slice(0, 16)}Z`;
const onBox = (jobId: string, gpus: number[], endsInMinutes: number | null): RunningJob =>
  running({ jobId, jobType: "local", allocatedGpus: gpus, expectedEndAt: endsInMinutes === null ? null : at(endsInMinutes) });
const waiting = (minutes: number | null, over: Partial<PendingJob> = {}) =>
  local({ numProcesses: 1, expectedMs: minutes === null ? null : minutes * MIN, ...over });

function forecast(pending: PendingJob[], runningJobs: RunningJob[], over: Partial<PlanInput> = {}) {
  const input: PlanInput = {
    now: NOW,
    limits: limits({ starvation_threshold_minutes: 60 }),
    pending,
    running: runningJobs,
    localDevices: [0],
    workers: [],
    ...over,
  };
  const plan = planPass(input);
  return { plan, starts: expectedStarts(input, plan) };
}

describe("expected starts on a one-GPU box", () => {
  it("puts each waiting job after the one ahead of it, from the running job's end and the run times", () => {
    const first = waiting(30);
    const second = waiting(45);
    const third = waiting(10);
    const { starts } = forecast([first, second, third], [onBox("local-run", [0], 20)]);
    expect(starts.get(first.id)).toEqual({ at: at(20), basis: `after local-run ends (expected ${iso(at(20))})` });
    expect(starts.get(second.id)).toEqual({ at: at(50), basis: `after ${first.jobId} ends (expected ${iso(at(50))})` });
    expect(starts.get(third.id)).toEqual({ at: at(95), basis: `after ${second.jobId} ends (expected ${iso(at(95))})` });
  });

  it("says unknown, naming the job, when a job ahead has no run-time estimate", () => {
    const first = waiting(null);
    const second = waiting(10);
    const { starts } = forecast([first, second], [onBox("local-run", [0], 5)]);
    expect(starts.get(first.id)).toEqual({ at: at(5), basis: `after local-run ends (expected ${iso(at(5))})` });
    expect(starts.get(second.id)).toEqual({
      at: null,
      basis: `unknown: no run-time estimate for ${first.jobId} ahead of it (set --max_runtime_minutes, or let its environment complete a run on as many GPUs)`,
    });
  });

  it("says unknown when the running job has no expected end", () => {
    const next = waiting(10);
    const { starts } = forecast([next], [onBox("local-run", [0], null)]);
    expect(starts.get(next.id)).toEqual({ at: null, basis: "unknown: local-run runs with no expected end" });
  });

  it("expects an overdue job to end any moment", () => {
    const next = waiting(10);
    const { starts } = forecast([next], [onBox("local-late", [0], -15)]);
    expect(starts.get(next.id)).toEqual({
      at: NOW,
      basis: `after local-late ends (expected by ${iso(at(-15))}, overdue: any moment)`,
    });
  });

  it("says unknown when no box can ever fit the job", () => {
    const huge = waiting(10, { numProcesses: 4 });
    const { starts } = forecast([huge], []);
    expect(starts.get(huge.id)).toEqual({ at: null, basis: "unknown: no box can ever fit it (needs 4 GPU(s) but the local box has 1)" });
  });

  it("says unknown while local jobs are paused", () => {
    const next = waiting(10);
    const { starts } = forecast([next], [onBox("local-run", [0], 5)], { localPaused: true });
    expect(starts.get(next.id)).toEqual({ at: null, basis: "unknown: local jobs are paused until POST /api/queue/process (or a restart)" });
  });
});

describe("expected starts with limits, priorities and reservations", () => {
  it("follows the scheduler's order and limits: a higher priority goes first, two GPUs run two jobs at once", () => {
    const low = waiting(30, { priority: 10 });
    const high = waiting(30, { priority: 50, queuedAt: NOW });
    const { starts } = forecast([low, high], [onBox("a", [0], 10), onBox("b", [1], 20)], {
      localDevices: [0, 1],
      limits: limits({ local_job_max_concurrent: 2 }),
    });
    expect(starts.get(high.id)?.at).toBe(at(10));
    expect(starts.get(low.id)?.at).toBe(at(20));
  });

  it("keeps a starved job's reservation: a long job behind it does not jump it, a short one backfills", () => {
    // Two GPUs: one free now, one busy for 30 min. The 2-GPU job has waited past the threshold.
    const big = local({ numProcesses: 2, queuedAt: NOW - 61 * MIN, expectedMs: 60 * MIN });
    const long = waiting(40);
    const { plan, starts } = forecast([big, long], [onBox("a", [0], 30)], {
      localDevices: [0, 1],
      limits: limits({ local_job_max_concurrent: 2 }),
    });
    expect(plan.admitted).toEqual([]);
    expect(starts.get(big.id)?.at).toBe(at(30));
    expect(starts.get(long.id)).toEqual({ at: at(90), basis: `after ${big.jobId} ends (expected ${iso(at(90))})` });
  });

  it("frees a remote worker when its job is expected to end", () => {
    const w = worker(1, { idle: false, gpuCount: 1 });
    const run = running({ jobId: "worker-job", jobType: "local", workerId: 1, expectedEndAt: at(15) });
    const next = local({ target: "worker", expectedMs: 10 * MIN });
    const { starts } = forecast([next], [run], { workers: [w], localDevices: null });
    expect(starts.get(next.id)).toEqual({ at: at(15), basis: `after worker-job ends (expected ${iso(at(15))})` });
  });

  it("counts cloud jobs against the cloud limit until their expected end", () => {
    const cloud = running({ jobId: "cloud-1", jobType: "cloud", expectedEndAt: at(25) });
    const next = waiting(10, { jobType: "cloud" });
    const { starts } = forecast([next], [cloud], { limits: limits({ max_concurrent: 1 }) });
    expect(starts.get(next.id)?.at).toBe(at(25));
  });
});
