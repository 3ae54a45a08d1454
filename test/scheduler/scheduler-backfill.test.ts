// EASY backfill in the pure planner (edge/scheduler/plan.ts, edge/scheduler/reservations.ts): one
// test per rule of issue 17. An 8-GPU box, the default 60-minute starvation threshold; "big" jobs
// have waited past it. test/scheduler/backfill.test.ts runs the same rules through the real stack.
import { describe, expect, it } from "vitest";
import type { PendingJob, RunningJob } from "../../edge/scheduler/plan";
import { MIN, NOW, ids, local, plan, running, worker } from "../helpers/plan";

const BOX = [0, 1, 2, 3, 4, 5, 6, 7];
const LIMITS = { local_job_max_concurrent: 8 };
const at = (minutes: number) => NOW + minutes * MIN;
/** A job that has waited past the threshold. */
const big = (over: Partial<PendingJob> = {}) => local({ numProcesses: 8, queuedAt: NOW - 61 * MIN, ...over });
/** A fresh job behind it, expected to run `minutes` (null: unknown). */
const small = (minutes: number | null, over: Partial<PendingJob> = {}) =>
  local({ numProcesses: 1, expectedMs: minutes === null ? null : minutes * MIN, ...over });
const onBox = (gpus: number[], endsInMinutes: number | null): RunningJob =>
  running({ jobType: "local", allocatedGpus: gpus, expectedEndAt: endsInMinutes === null ? null : at(endsInMinutes) });
const pass = (pending: PendingJob[], runningJobs: RunningJob[]) => plan(pending, { devices: BOX, running: runningJobs, limits: LIMITS });

describe("backfill into the shadow window", () => {
  it("starts a job behind a reservation when it is expected to end by the reservation's start, on the reserved GPUs", () => {
    const reserved = big();
    const fits = small(20);
    const exactly = small(30);
    const p = pass([reserved, fits, exactly], [onBox([0, 1, 2, 3], 30)]);
    expect(ids(p.admitted)).toEqual([fits.jobId, exactly.jobId]);
    expect(p.admitted.map((a) => a.gpus)).toEqual([[4], [5]]);
    expect(p.waiting).toEqual([
      {
        id: reserved.id,
        jobId: reserved.jobId,
        position: 1,
        effectivePriority: 20,
        reason: "gpus_busy",
        message:
          "needs 8 GPU(s) of [0, 1, 2, 3, 4, 5, 6, 7]; free now: [4, 5, 6, 7]; reserved (waited past the starvation threshold): GPUs [0, 1, 2, 3, 4, 5, 6, 7] from 2026-11-23T12:30Z; expected to start at 2026-11-23T12:30Z",
        expectedStartAt: at(30),
      },
    ]);
  });

  it("refuses a job that would end after the reservation starts, saying whose reservation, from when, and why", () => {
    const reserved = big();
    const tooLong = small(31);
    const p = pass([reserved, tooLong], [onBox([0, 1, 2, 3], 30)]);
    expect(p.admitted).toEqual([]);
    expect(p.waiting[1]).toMatchObject({
      jobId: tooLong.jobId,
      position: 2,
      reason: "reserved",
      message: `GPUs [4, 5, 6, 7] are free, but they are reserved for ${reserved.jobId}, which has waited past the starvation threshold and is expected to start at 2026-11-23T12:30Z; this job, expected to run 31 min, would end after that`,
    });
    expect(p.waiting[1]).not.toHaveProperty("expectedStartAt");
  });

  it("takes the shadow time from the jobs that free enough GPUs first, not from the last one", () => {
    // 6 of 8 needed; 2 free; the 2 on [2, 3] end in 10 min, the 2 on [0, 1] in 90.
    const reserved = big({ numProcesses: 6 });
    const p = pass([reserved, small(10), small(11)], [onBox([0, 1], 90), onBox([2, 3], 10), onBox([4, 5], 50)]);
    expect(p.waiting[0]).toMatchObject({ jobId: reserved.jobId, expectedStartAt: at(50) });
    // Within 50 min both fit, on the two free GPUs.
    expect(p.admitted.map((a) => a.gpus)).toEqual([[6], [7]]);
  });
});

describe("backfill into GPUs the reserved job will not need", () => {
  it("lets a long job, or one of unknown run time, take a GPU the reservation leaves spare", () => {
    // 4 needed; the 6 busy GPUs all free in 30 min, so the 2 free ones are not needed then.
    const reserved = big({ numProcesses: 4 });
    const long = small(600);
    const unknown = small(null);
    const p = pass([reserved, long, unknown], [onBox([0, 1, 2, 3, 4, 5], 30)]);
    expect(ids(p.admitted)).toEqual([long.jobId, unknown.jobId]);
    expect(p.admitted.map((a) => a.gpus)).toEqual([[6], [7]]);
    expect(p.waiting[0]).toMatchObject({ jobId: reserved.jobId, reason: "gpus_busy", expectedStartAt: at(30) });
    expect(p.waiting[0]!.message).toContain("GPUs [0, 1, 2, 3] from 2026-11-23T12:30Z");
  });

  it("gives a short job the reserved GPUs first, so the spare ones stay for jobs that may use nothing else", () => {
    // 4 needed, 3 free: the pair [0, 1] frees in 20 min, so [0, 1] and two free GPUs are reserved, [7] is spare.
    const reserved = big({ numProcesses: 4 });
    const short = small(10);
    const p = pass([reserved, short], [onBox([0, 1], 20), onBox([2, 3, 4], 60)]);
    expect(p.waiting[0]!.message).toContain("GPUs [0, 1, 5, 6] from 2026-11-23T12:20Z");
    expect(p.admitted.map((a) => a.gpus)).toEqual([[5]]);
  });
});

describe("unknown run times", () => {
  it("keeps a job of unknown run time off the reserved GPUs, and tells it how to become known", () => {
    const reserved = big();
    const unknown = small(null);
    const p = pass([reserved, unknown], [onBox([0, 1, 2, 3], 30)]);
    expect(p.admitted).toEqual([]);
    expect(p.waiting[1]).toMatchObject({ jobId: unknown.jobId, reason: "reserved" });
    expect(p.waiting[1]!.message).toContain(
      "this job's run time is unknown (set --max_runtime_minutes, or let its environment complete a run on as many GPUs), so it may use only capacity that job will not need",
    );
  });

  it("holds every GPU for the reserved job, as with no estimates at all, while a job it needs has no expected end", () => {
    const reserved = big();
    const p = pass([reserved, small(1)], [onBox([0, 1], null), onBox([2, 3], 10)]);
    expect(p.admitted).toEqual([]);
    expect(p.waiting[0]).toMatchObject({ jobId: reserved.jobId, expectedStartAt: null });
    expect(p.waiting[0]!.message).toContain(
      "GPUs [0, 1, 2, 3, 4, 5, 6, 7] are held for it; no start can be promised yet (a job it waits for has no expected end, or is past it), so nothing else may use them",
    );
    expect(p.waiting[1]!.message).toContain(
      `they are held for ${reserved.jobId}, which has waited past the starvation threshold (no start can be promised yet`,
    );
  });

  it("plans exactly as before backfill when nothing is known: the reserved job holds what it could use", () => {
    const reserved = big({ numProcesses: 4 });
    const p = pass([reserved, small(null), small(null)], [onBox([0, 1, 2, 3, 4], null)]);
    expect(p.admitted).toEqual([]);
    expect(p.waiting.map((w) => w.reason)).toEqual(["gpus_busy", "reserved", "reserved"]);
  });
});

describe("a running job past its expected end", () => {
  it("does not move the reservation later: it holds every GPU until enough are free, as with no estimates", () => {
    const reserved = big();
    // Expected to have ended 5 min ago: it may end any moment, or never.
    const p = pass([reserved, small(1)], [onBox([0, 1, 2, 3], -5)]);
    expect(p.admitted).toEqual([]);
    expect(p.waiting[0]).toMatchObject({ jobId: reserved.jobId, expectedStartAt: null });
    expect(p.waiting[1]).toMatchObject({ reason: "reserved" });
  });

  it("does not stop backfill when the reservation does not need its GPUs", () => {
    // 6 needed: 4 free plus the pair ending in 10 min; the overrunning pair [0, 1] is not needed.
    const reserved = big({ numProcesses: 6 });
    const short = small(5);
    const p = pass([reserved, short], [onBox([0, 1], -5), onBox([2, 3], 10)]);
    expect(p.waiting[0]).toMatchObject({ jobId: reserved.jobId, expectedStartAt: at(10) });
    expect(ids(p.admitted)).toEqual([short.jobId]);
  });
});

describe("several reservations", () => {
  it("gives each job past the threshold its own GPUs, and a job behind must fit them all", () => {
    const first = big({ numProcesses: 4, queuedAt: NOW - 90 * MIN });
    const second = big({ numProcesses: 4 });
    const p = pass([first, second, small(15), small(25)], [onBox([0, 1, 2, 3], 20), onBox([4, 5], 40)]);
    expect(p.waiting.slice(0, 2)).toMatchObject([
      { jobId: first.jobId, expectedStartAt: at(20) },
      { jobId: second.jobId, expectedStartAt: at(40) },
    ]);
    // [6, 7] are the second reservation's from 40 min: the 15-min job fits, then the 25-min one too.
    expect(p.admitted.map((a) => a.gpus)).toEqual([[6], [7]]);
  });

  it("gives a job no reservation while the ones before it hold what it needs; it waits behind them", () => {
    const first = big({ numProcesses: 8, queuedAt: NOW - 90 * MIN });
    const second = big({ numProcesses: 2 });
    const p = pass([first, second], [onBox([0, 1, 2, 3, 4, 5], 20)]);
    expect(p.waiting[0]).toMatchObject({ jobId: first.jobId, expectedStartAt: at(20) });
    expect(p.waiting[1]).toMatchObject({ jobId: second.jobId, reason: "reserved" });
    expect(p.waiting[1]).not.toHaveProperty("expectedStartAt");
  });
});

describe("remote workers", () => {
  const W = { workers: [] as ReturnType<typeof worker>[] };
  const onWorker = (id: number, endsInMinutes: number | null): RunningJob =>
    running({ jobType: "local", workerId: id, expectedEndAt: endsInMinutes === null ? null : at(endsInMinutes) });

  it("reserves the matching worker expected free first, and names it and when", () => {
    W.workers = [worker(1, { idle: false }), worker(2, { idle: false }), worker(3, { gpuCount: 2 })];
    const reserved = big({ target: "worker", numProcesses: 8 });
    const long = small(600, { target: "worker" });
    const p = plan([reserved, long], { workers: W.workers, running: [onWorker(1, 90), onWorker(2, 30)] });
    expect(p.waiting[0]).toMatchObject({ jobId: reserved.jobId, reason: "workers_busy", expectedStartAt: at(30) });
    expect(p.waiting[0]!.message).toContain("reserved (waited past the starvation threshold): worker 2 from 2026-11-23T12:30Z");
    // Worker 3 is one the reserved job could never use: any job may take it, however long.
    expect(p.admitted).toEqual([{ id: long.id, jobId: long.jobId, gpus: null, workerId: 3, expectedEndAt: at(600) }]);
  });

  it("promises no start while every matching worker runs a job with no expected end, or past it", () => {
    W.workers = [worker(1, { idle: false }), worker(2, { idle: false })];
    const reserved = big({ target: "worker" });
    const p = plan([reserved], { workers: W.workers, running: [onWorker(1, null), onWorker(2, -1)] });
    expect(p.waiting[0]).toMatchObject({ jobId: reserved.jobId, expectedStartAt: null });
  });

  it("gives the worker expected free first to the earlier reservation; a job that could use only that one waits behind it", () => {
    // a may use worker 1 or 2 (both busy, 2 ends first); b only worker 2.
    W.workers = [worker(1, { idle: false }), worker(2, { idle: false, labels: { gpu: "h100" } })];
    const a = big({ target: "worker", workerLabels: null, queuedAt: NOW - 90 * MIN });
    const b = big({ target: "worker", workerLabels: { gpu: "h100" } });
    const p = plan([a, b], { workers: W.workers, running: [onWorker(1, 60), onWorker(2, 20)] });
    expect(p.waiting[0]).toMatchObject({ jobId: a.jobId, expectedStartAt: at(20) });
    // Worker 2 is a's; b could use nothing else, so it gets no reservation of its own yet.
    expect(p.waiting[0]!.message).toContain("worker 2 from 2026-11-23T12:20Z");
    expect(p.waiting[1]).not.toHaveProperty("expectedStartAt");
  });
});
