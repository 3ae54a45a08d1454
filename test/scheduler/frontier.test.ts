// A submission group over the last full plan's frontier (edge/scheduler/frontier.ts) plans only
// its new jobs, what runs and the waiting jobs that may act on them. These check, on random queues
// with limits, workers, reservations and starving jobs, that it decides every new job exactly as a
// plan over the whole queue would, and gives it the same place.
import { describe, expect, it } from "vitest";
import { countBefore, Frontier, keyOf, FRONTIER_MS, type OrderKey } from "../../edge/scheduler/frontier";
import { planPass, type PendingJob, type PlanInput, type RunningJob, type WorkerView } from "../../edge/scheduler/plan";
import { limits, MIN, NOW } from "../helpers/plan";

/** A small deterministic generator (mulberry32), so a failing seed can be replayed. */
function random(seed: number) {
  let a = seed;
  const next = () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (n: number) => Math.floor(next() * n), pick: <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]! };
}

function world(seed: number) {
  const r = random(seed);
  let id = 1;
  const devices = [0, 1, 2, 3, 4, 5, 6, 7];
  const workers: WorkerView[] = Array.from({ length: r.int(3) }, (_, i) => ({
    id: 100 + i,
    labels: { gpu: r.pick(["a100", "h100"]) },
    gpuCount: r.pick([1, 8]),
    idle: true,
    idleSince: NOW - i * MIN,
  }));
  const ends = [null, NOW - MIN, NOW + 10 * MIN, NOW + 60 * MIN, NOW + 240 * MIN];
  const running: RunningJob[] = [];
  const used = new Set<number>();
  for (let i = 0; i < r.int(6); i++) {
    const free = devices.filter((d) => !used.has(d));
    const n = Math.min(free.length, 1 + r.int(3));
    if (!n) break;
    const gpus = free.slice(0, n);
    gpus.forEach((g) => used.add(g));
    running.push({
      id: id++,
      jobId: `r${id}`,
      userId: r.int(4),
      teamId: null,
      jobType: "local",
      allocatedGpus: gpus,
      workerId: null,
      expectedEndAt: r.pick(ends),
    });
  }
  for (const w of workers)
    if (r.next() < 0.5) {
      w.idle = false;
      running.push({
        id: id++,
        jobId: `w${id}`,
        userId: r.int(4),
        teamId: null,
        jobType: "local",
        allocatedGpus: [],
        workerId: w.id,
        expectedEndAt: r.pick(ends),
      });
    }
  const pendingJob = (queuedAt: number): PendingJob => {
    const jobType = r.next() < 0.2 ? "cloud" : "local";
    const n = r.pick([0, 1, 1, 2, 4, 8]);
    return {
      id: id++,
      jobId: `p${id}`,
      userId: r.int(4),
      teamId: r.pick([null, "t1", "t2"]),
      priority: r.pick([0, 10, 10, 20, 30]),
      priorityOverride: r.next() < 0.1 ? r.pick([5, 40]) : null,
      queuedAt,
      jobType,
      numProcesses: n,
      target: jobType === "cloud" ? "auto" : r.pick(["local", "local", "auto", "worker"]),
      workerLabels: r.next() < 0.3 ? { gpu: r.pick(["a100", "h100"]) } : null,
      deviceIds: r.next() < 0.2 ? [r.int(8)] : null,
      anyGpu: r.next() < 0.2,
      estimatedCost: jobType === "cloud" ? r.int(20) : 0,
      expectedMs: r.pick([null, 5 * MIN, 30 * MIN, 120 * MIN]),
    };
  };
  const stored = Array.from({ length: 10 + r.int(50) }, () => pendingJob(NOW - r.int(300) * MIN - r.int(60_000)));
  const lim = limits({
    max_concurrent: 1 + r.int(4),
    user_max_concurrent: 1 + r.int(3),
    team_max_concurrent: 1 + r.int(4),
    enable_fair_share: r.next() < 0.5,
    local_job_max_concurrent: 2 + r.int(10),
    local_gpu_max_concurrent: r.pick([null, 6]),
    starvation_threshold_minutes: r.pick([0, 30, 60, 0.1]),
  });
  return { r, devices, workers, running, stored, lim, pendingJob, nextId: () => id++ };
}

const decision = (p: ReturnType<typeof planPass>, id: number) => {
  const a = p.admitted.find((x) => x.id === id);
  if (a) return { admitted: true, gpus: a.gpus, workerId: a.workerId };
  const w = p.waiting.find((x) => x.id === id)!;
  return { admitted: false, reason: w.reason, message: w.message };
};

describe("a submission group over the frontier", () => {
  it("decides and places new jobs as a plan over the whole queue does, on 300 random queues", () => {
    let reduced = 0;
    let fallbacks = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const w = world(seed);
      const threshold = w.lim.starvation_threshold_minutes;
      const input = (now: number, pending: PendingJob[], running: RunningJob[], workers: WorkerView[]): PlanInput => ({
        now,
        limits: w.lim,
        pending,
        running,
        localDevices: w.devices,
        workers,
      });
      // The full plan, its admissions then running.
      let running = [...w.running];
      let workers = w.workers.map((x) => ({ ...x }));
      const start = (a: { id: number; gpus: number[] | null; workerId: number | null; expectedEndAt?: number | null }, job: PendingJob) => {
        running = [
          ...running,
          {
            id: a.id,
            jobId: job.jobId,
            userId: job.userId,
            teamId: job.teamId,
            jobType: job.jobType,
            allocatedGpus: a.gpus ?? [],
            workerId: a.workerId,
            expectedEndAt: a.expectedEndAt ?? null,
          },
        ];
        if (a.workerId !== null) workers = workers.map((x) => (x.id === a.workerId ? { ...x, idle: false } : x));
      };
      const fullInput = input(NOW, w.stored, running, workers);
      const full = planPass(fullInput);
      const byId = new Map(w.stored.map((j) => [j.id, j]));
      for (const a of full.admitted) start(a, byId.get(a.id)!);
      let waiting = w.stored.filter((j) => !full.admitted.some((a) => a.id === j.id));
      const frontier = Frontier.of(
        fullInput,
        full.waiting,
        running.map((x) => x.id),
        "",
        0,
        (id) => id,
      );
      // Groups of new jobs within the frontier's time.
      let now = NOW;
      for (let g = 0; g < 6; g++) {
        now += 1 + w.r.int((FRONTIER_MS - 1) / 6);
        const fresh = Array.from({ length: 1 + w.r.int(4) }, () => w.pendingJob(now));
        const whole = planPass(input(now, [...waiting, ...fresh], running, workers));
        // The frontier's claim: no stored job but a mover starts without capacity freed.
        const isFresh = (id: number) => fresh.some((f) => f.id === id);
        expect({ seed, started: whole.admitted.filter((a) => !isFresh(a.id) && !frontier.movers.has(a.id)) }).toEqual({
          seed,
          started: [],
        });
        const movers = waiting.filter((j) => frontier.movers.has(j.id));
        const part = planPass(input(now, [...movers, ...fresh], running, workers));
        // A mover started: the Scheduler plans the whole queue instead, and makes a new frontier.
        if (part.admitted.some((a) => !isFresh(a.id)) || whole.admitted.some((a) => !isFresh(a.id))) {
          expect(part.admitted.map((a) => a.id)).toEqual(whole.admitted.map((a) => a.id));
          fallbacks++;
          break;
        }
        reduced++;
        let ahead = 0;
        const added: OrderKey[] = [];
        for (const f of fresh) {
          expect({ seed, group: g, job: f.id, ...decision(part, f.id) }).toEqual({ seed, group: g, job: f.id, ...decision(whole, f.id) });
          const a = part.admitted.find((x) => x.id === f.id);
          if (a) start(a, f);
        }
        // The new jobs that wait, in the plan's order, as the Scheduler places them.
        for (const planned of part.waiting) {
          const f = fresh.find((x) => x.id === planned.id);
          if (!f) continue;
          const key = keyOf(f, now, threshold);
          const wholePlace = whole.waiting.find((x) => x.id === f.id)!.position;
          // Places count from the full plan's order; a boost step since (a mover) may move one by the jobs it passed.
          const place = frontier.positionOf(key, ahead++);
          expect(Math.abs(place - wholePlace)).toBeLessThanOrEqual(crossedSince(waiting, NOW, now, threshold));
          if (crossedSince(waiting, NOW, now, threshold) === 0) expect(place).toBe(wholePlace);
          added.push(key);
          waiting = [...waiting, f];
        }
        frontier.add([], added);
      }
    }
    // Most groups are decided over the frontier.
    expect(reduced).toBeGreaterThan(1500);
    expect(reduced + fallbacks).toBeGreaterThan(1500);
  });

  it("counts the keys before a key in scheduling order", () => {
    const keys = [
      { priority: 30, queuedAt: 5, id: 1 },
      { priority: 10, queuedAt: 1, id: 2 },
      { priority: 10, queuedAt: 1, id: 3 },
      { priority: 0, queuedAt: 0, id: 4 },
    ];
    expect(countBefore(keys, { priority: 40, queuedAt: 9, id: 9 })).toBe(0);
    expect(countBefore(keys, { priority: 10, queuedAt: 1, id: 3 })).toBe(2);
    expect(countBefore(keys, { priority: 10, queuedAt: 2, id: 0 })).toBe(3);
    expect(countBefore(keys, { priority: -1, queuedAt: 0, id: 0 })).toBe(4);
  });
});

/** How many waiting jobs took a boost step between `from` and `to` (their order may differ from the full plan's). */
function crossedSince(jobs: PendingJob[], from: number, to: number, thresholdMinutes: number): number {
  if (thresholdMinutes <= 0) return 0;
  const t = thresholdMinutes * MIN;
  return jobs.filter((j) => Math.floor((from - j.queuedAt) / t) !== Math.floor((to - j.queuedAt) / t)).length;
}
