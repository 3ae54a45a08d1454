// The scheduler pass is a pure function (edge/scheduler/plan.ts); these test its decisions
// directly. test/queue/queue.test.ts drives the same code through HTTP and the Scheduler DO.
import { describe, expect, it } from "vitest";
import { globMatch, matchesLabels } from "../../shared/labels";
import { effectivePriority } from "../../edge/jobs/priority";
import { planPass, type PendingJob, type WorkerView } from "../../edge/scheduler/plan";
import { MIN, NOW, ids, job, limits, local, plan, running, worker as workerOf } from "../helpers/plan";

describe("ordering", () => {
  it("admits higher priority first, then earlier submission, then lower id", () => {
    const a = job({ priority: 10, queuedAt: NOW - 5 * MIN });
    const b = job({ priority: 20, queuedAt: NOW - 1 * MIN });
    const c = job({ priority: 10, queuedAt: NOW - 9 * MIN });
    const d = job({ priority: 10, queuedAt: NOW - 9 * MIN });
    const p = plan([a, b, c, d], { limits: { max_concurrent: 1, user_max_concurrent: 10 } });
    expect(ids(p.admitted)).toEqual([b.jobId]);
    expect(p.waiting.map((w) => [w.jobId, w.position])).toEqual([
      [c.jobId, 1],
      [d.jobId, 2],
      [a.jobId, 3],
    ]);
  });

  it("orders by priority_override over the level's priority", () => {
    const lead = job({ priority: 20 });
    const overridden = job({ priority: 0, priorityOverride: 25 });
    expect(ids(plan([lead, overridden], { limits: { max_concurrent: 1 } }).admitted)).toEqual([overridden.jobId]);
  });

  it("boosts 10 per full starvation threshold waited, capped at +30, off at 0", () => {
    const base = { priority: 0, priorityOverride: null };
    expect(effectivePriority({ ...base, queuedAt: NOW - 59 * MIN }, NOW, 60)).toBe(0);
    expect(effectivePriority({ ...base, queuedAt: NOW - 60 * MIN }, NOW, 60)).toBe(10);
    expect(effectivePriority({ ...base, queuedAt: NOW - 150 * MIN }, NOW, 60)).toBe(20);
    expect(effectivePriority({ ...base, queuedAt: NOW - 1000 * MIN }, NOW, 60)).toBe(30);
    expect(effectivePriority({ ...base, queuedAt: NOW - 1000 * MIN }, NOW, 0)).toBe(0);
    expect(effectivePriority({ priority: 0, priorityOverride: 50, queuedAt: NOW - 1000 * MIN }, NOW, 60)).toBe(80);
  });

  it("lets a viewer's job that waited three thresholds go before a fresh admin job", () => {
    const viewer = job({ priority: 0, queuedAt: NOW - 180 * MIN });
    const admin = job({ priority: 30, queuedAt: NOW - MIN });
    expect(ids(plan([admin, viewer], { limits: { max_concurrent: 1 } }).admitted)).toEqual([viewer.jobId]);
  });
});

describe("cloud limits, checked global, then user, then team", () => {
  it("admits every job that fits in one pass, up to the global limit", () => {
    const jobs = Array.from({ length: 8 }, (_, i) => job({ userId: i }));
    const p = plan(jobs, { limits: { max_concurrent: 5 } });
    expect(p.admitted).toHaveLength(5);
    expect(p.waiting.map((w) => w.reason)).toEqual(["global_limit", "global_limit", "global_limit"]);
  });

  it("counts already running jobs against the global and user limits", () => {
    const p = plan([job({ userId: 1 }), job({ userId: 2 })], {
      running: [running({ userId: 1 }), running({ userId: 1 })],
      limits: { max_concurrent: 5, user_max_concurrent: 2 },
    });
    expect(p.admitted.map((a) => a.jobId)).toHaveLength(1);
    expect(p.waiting[0]).toMatchObject({ reason: "user_limit", message: "its owner has 2 of 2 cloud jobs running (user_max_concurrent)" });
  });

  it("reports the global limit before the user limit", () => {
    const p = plan([job({ userId: 1 })], {
      running: [running({ userId: 1 }), running({ userId: 1 })],
      limits: { max_concurrent: 2, user_max_concurrent: 2 },
    });
    expect(p.waiting[0]!.reason).toBe("global_limit");
  });

  it("lets a later user's job pass one that hit its user limit", () => {
    const a1 = job({ userId: 1, queuedAt: NOW - 3 * MIN });
    const a2 = job({ userId: 1, queuedAt: NOW - 2 * MIN });
    const b1 = job({ userId: 2, queuedAt: NOW - 1 * MIN });
    const p = plan([a1, a2, b1], { limits: { max_concurrent: 5, user_max_concurrent: 1 } });
    expect(ids(p.admitted)).toEqual([a1.jobId, b1.jobId]);
    expect(p.waiting).toMatchObject([{ jobId: a2.jobId, reason: "user_limit", position: 1 }]);
  });

  it("applies team limits only with fair share on, and never to jobs without a team", () => {
    const pending = () => [job({ userId: 1, teamId: "vision" }), job({ userId: 2, teamId: "vision" }), job({ userId: 3, teamId: null })];
    const on = plan(pending(), { limits: { max_concurrent: 10, team_max_concurrent: 1, enable_fair_share: true } });
    expect(on.admitted).toHaveLength(2);
    expect(on.waiting).toMatchObject([{ reason: "team_limit", message: "team vision has 1 of 1 jobs running (team_max_concurrent)" }]);
    const off = plan(pending(), { limits: { max_concurrent: 10, team_max_concurrent: 1, enable_fair_share: false } });
    expect(off.admitted).toHaveLength(3);
  });

  it("checks the user limit before the team limit", () => {
    const p = plan([job({ userId: 1, teamId: "t" })], {
      running: [running({ userId: 1, teamId: "t" })],
      limits: { user_max_concurrent: 1, team_max_concurrent: 1, enable_fair_share: true },
    });
    expect(p.waiting[0]!.reason).toBe("user_limit");
  });
});

describe("the cloud spending limit", () => {
  const budget = (limitUsd: number, committedUsd: number) => ({ limitUsd, committedUsd });
  const withBudget = (pending: PendingJob[], cloudBudget: { limitUsd: number; committedUsd: number } | null) =>
    planPass({
      now: NOW,
      limits: limits({ max_concurrent: 10, user_max_concurrent: 10 }),
      pending,
      running: [],
      localDevices: null,
      workers: [],
      cloudBudget,
    });

  it("admits cloud jobs while their estimates fit under what is left, in scheduling order; the rest wait with the figures", () => {
    const a = job({ estimatedCost: 4, queuedAt: NOW - 3 * MIN });
    const b = job({ estimatedCost: 4, queuedAt: NOW - 2 * MIN });
    const c = job({ estimatedCost: 1, queuedAt: NOW - 1 * MIN });
    const p = withBudget([a, b, c], budget(10, 3));
    // 3 committed + 4 = 7; + 4 would be 11 > 10: b waits; c (1) still fits: 8.
    expect(ids(p.admitted)).toEqual([a.jobId, c.jobId]);
    expect(p.waiting).toEqual([
      expect.objectContaining({
        jobId: b.jobId,
        reason: "spending_limit",
        message: "its estimated $4.00 would pass the spending limit: $7.00 of $10.00 is committed this period",
      }),
    ]);
  });

  it("lets an estimate exactly reach the limit, ignores local jobs, and has no effect without a limit", () => {
    expect(withBudget([job({ estimatedCost: 5 })], budget(5, 0)).admitted).toHaveLength(1);
    expect(withBudget([job({ estimatedCost: 5.01 })], budget(5, 0)).waiting[0]!.reason).toBe("spending_limit");
    expect(withBudget([job({ estimatedCost: 1_000 })], null).admitted).toHaveLength(1);
    const p = planPass({
      now: NOW,
      limits: limits(),
      pending: [local({ numProcesses: 1, estimatedCost: 0 })],
      running: [],
      localDevices: [0],
      workers: [],
      cloudBudget: budget(1, 1),
    });
    expect(p.admitted).toHaveLength(1);
  });
});

describe("local GPUs", () => {
  it("gives the lowest free devices and never a busy one", () => {
    const p = plan([local({ numProcesses: 2 })], {
      devices: [0, 1, 2, 3],
      running: [running({ jobType: "local", allocatedGpus: [0, 2] })],
      limits: { local_job_max_concurrent: 4 },
    });
    expect(p.admitted[0]!.gpus).toEqual([1, 3]);
  });

  it("uses the configured devices unless any_gpu", () => {
    const busy = [running({ jobType: "local", allocatedGpus: [0] })];
    const l = { local_job_max_concurrent: 4 };
    expect(
      plan([local({ deviceIds: [0, 1], numProcesses: 2 })], { devices: [0, 1, 2, 3], running: busy, limits: l }).waiting[0],
    ).toMatchObject({ reason: "gpus_busy" });
    expect(
      plan([local({ deviceIds: [0, 1], numProcesses: 2, anyGpu: true })], { devices: [0, 1, 2, 3], running: busy, limits: l }).admitted[0]!
        .gpus,
    ).toEqual([1, 2]);
    expect(plan([local({ deviceIds: [2, 3], numProcesses: 1 })], { devices: [0, 1, 2, 3], limits: l }).admitted[0]!.gpus).toEqual([2]);
  });

  it("enforces local_job_max_concurrent and local_gpu_max_concurrent", () => {
    const jobs = [local(), local(), local()];
    expect(plan(jobs, { devices: [0, 1, 2, 3], limits: { local_job_max_concurrent: 2 } }).waiting.map((w) => w.reason)).toEqual([
      "local_job_limit",
    ]);
    const gpuCapped = plan([local({ numProcesses: 2 }), local({ numProcesses: 2 })], {
      devices: [0, 1, 2, 3],
      limits: { local_job_max_concurrent: 5, local_gpu_max_concurrent: 3 },
    });
    expect(gpuCapped.admitted).toHaveLength(1);
    expect(gpuCapped.waiting[0]!.reason).toBe("local_gpu_limit");
  });

  it("runs a CPU job (num_processes 0) without a GPU but needs a local box", () => {
    expect(plan([local({ numProcesses: 0 })], { devices: [] }).admitted[0]!.gpus).toEqual([]);
    expect(plan([local({ numProcesses: 0 })], { devices: null }).waiting[0]!.reason).toBe("no_local_box");
  });

  it("backfills smaller jobs past one that does not fit yet", () => {
    const big = local({ numProcesses: 4, queuedAt: NOW - 5 * MIN });
    const small = local({ numProcesses: 1, queuedAt: NOW - 1 * MIN });
    const p = plan([big, small], {
      devices: [0, 1, 2, 3],
      running: [running({ jobType: "local", allocatedGpus: [0] })],
      limits: { local_job_max_concurrent: 4 },
    });
    expect(ids(p.admitted)).toEqual([small.jobId]);
    expect(p.waiting[0]).toMatchObject({ jobId: big.jobId, reason: "gpus_busy", position: 1 });
  });

  it("holds GPUs for a large job once it has waited the starvation threshold", () => {
    const big = local({ numProcesses: 4, queuedAt: NOW - 61 * MIN, priority: 10 });
    const small = local({ numProcesses: 1, queuedAt: NOW - 1 * MIN, priority: 20 });
    const p = plan([big, small], {
      devices: [0, 1, 2, 3],
      running: [running({ jobType: "local", allocatedGpus: [0] })],
      limits: { local_job_max_concurrent: 4 },
    });
    expect(p.admitted).toEqual([]);
    expect(p.waiting.map((w) => [w.jobId, w.reason])).toEqual([
      [big.jobId, "gpus_busy"],
      [small.jobId, "reserved"],
    ]);
  });

  it("never lets a job that can never fit hold anything or block others", () => {
    const huge = local({ numProcesses: 8, queuedAt: NOW - 600 * MIN });
    const small = local({ numProcesses: 1 });
    const p = plan([huge, small], { devices: [0, 1, 2, 3], limits: { local_job_max_concurrent: 4 } });
    expect(ids(p.admitted)).toEqual([small.jobId]);
    expect(p.waiting[0]).toMatchObject({ reason: "insufficient_gpus", message: "needs 8 GPU(s) but the local box has 4" });
  });

  it("never hands out a device twice across many jobs in one pass", () => {
    const jobs = Array.from({ length: 50 }, (_, i) => local({ numProcesses: 1 + (i % 3), anyGpu: true }));
    const p = plan(jobs, { devices: [0, 1, 2, 3, 4, 5, 6, 7], limits: { local_job_max_concurrent: 50 } });
    const given = p.admitted.flatMap((a) => a.gpus ?? []);
    expect(new Set(given).size).toBe(given.length);
    expect(given.length).toBe(8);
  });
});

describe("remote workers", () => {
  const worker = (id: number, over: Partial<WorkerView> = {}) => workerOf(id, over);

  it("matches label globs and GPU count, longest-idle worker first", () => {
    const w1 = worker(1, { idleSince: NOW - 1 * MIN });
    const w2 = worker(2, { idleSince: NOW - 9 * MIN });
    const w3 = worker(3, { labels: { gpu: "h100" } });
    const p = plan([local({ target: "worker", workerLabels: { gpu: "a100*" } })], { workers: [w1, w2, w3] });
    expect(p.admitted[0]!.workerId).toBe(2);
  });

  it("says no_matching_worker when none could ever match, workers_busy when they are busy", () => {
    expect(plan([local({ target: "worker", workerLabels: { gpu: "h200" } })], { workers: [worker(1)] }).waiting[0]!.reason).toBe(
      "no_matching_worker",
    );
    expect(plan([local({ target: "worker", numProcesses: 16 })], { workers: [worker(1)] }).waiting[0]!.reason).toBe("no_matching_worker");
    expect(plan([local({ target: "worker" })], { workers: [worker(1, { idle: false })] }).waiting[0]!.reason).toBe("workers_busy");
  });

  it("gives one worker one job per pass", () => {
    const p = plan([local({ target: "worker" }), local({ target: "worker" })], { workers: [worker(1)] });
    expect(p.admitted).toHaveLength(1);
    expect(p.waiting[0]!.reason).toBe("workers_busy");
  });

  it("tries workers first for target auto, then the local box", () => {
    const p = plan([local({ target: "auto" }), local({ target: "auto" })], {
      workers: [worker(1)],
      devices: [0],
      limits: { local_job_max_concurrent: 2 },
    });
    expect(p.admitted.map((a) => [a.workerId, a.gpus])).toEqual([
      [1, null],
      [null, [0]],
    ]);
  });
});

describe("label globs", () => {
  it.each([
    ["a100*", "a100-80gb", true],
    ["*80gb", "a100-80gb", true],
    ["a*-*gb", "a100-80gb", true],
    ["a100", "a100-80gb", false],
    ["*", "", true],
    ["a*a", "a", false],
    ["h100", "H100", false],
  ])("%s matches %s: %s", (pattern, value, expected) => {
    expect(globMatch(pattern, value)).toBe(expected);
  });

  it("needs every required key present", () => {
    expect(matchesLabels({ gpu: "*", zone: "eu-*" }, { gpu: "x", zone: "eu-1" })).toBe(true);
    expect(matchesLabels({ zone: "*" }, { gpu: "x" })).toBe(false);
    expect(matchesLabels(null, {})).toBe(true);
  });
});
