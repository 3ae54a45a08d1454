// The estimates the planner backfills with (issue 17 steps 1 and 2), as pure functions: a running
// job's step rate and expected end, a waiting job's expected run time.
import { describe, expect, it } from "vitest";
import {
  advanceRate,
  expectedDuration,
  endAtStart,
  expectedEnd,
  HORIZON_MS,
  parseRate,
  progressPoint,
  recentRuns,
  runKey,
  type ProgressRate,
} from "../../edge/jobs/estimate";

const start = Date.parse("2026-11-23T09:00:00Z");
const MIN = 60_000;
const none = { startedAt: start, rate: null, maxRuntime: undefined, cloud: null };

describe("advanceRate", () => {
  it("takes the first point's rate over the whole time since the start, loading included", () => {
    expect(advanceRate(null, { step: 10, total: 100, at: start + MIN }, start)).toEqual({
      step: 10,
      total: 100,
      at: start + MIN,
      msPerStep: 6000,
      from: { step: 10, at: start + MIN },
    });
  });

  it("then, for two minutes, the average since that first point: exact for a steady job, loading left out", () => {
    // Loading took 50 s, then 1 step a second, reported in batches of 5.
    let rate = advanceRate(null, { step: 1, total: 100, at: start + 51_000 }, start);
    expect(rate!.msPerStep).toBe(51_000);
    for (const step of [6, 11, 16]) rate = advanceRate(rate, { step, total: 100, at: start + 50_000 + step * 1000 }, start);
    expect(rate).toEqual({ step: 16, total: 100, at: start + 66_000, msPerStep: 1000, from: { step: 1, at: start + 51_000 } });
    expect(expectedEnd({ ...none, rate }, start)).toEqual({ at: start + 66_000 + 84 * 1000, method: "progress" });
    // Points that came with the first one say nothing about speed yet.
    const first = advanceRate(null, { step: 1, total: 100, at: start + 51_000 }, start)!;
    expect(advanceRate(first, { step: 3, total: 100, at: start + 51_000 }, start)!.msPerStep).toBe(51_000);
    // Past the window: the moving average takes over from there, and the first point is forgotten.
    const later = advanceRate(rate, { step: 90, total: 100, at: start + 51_000 + 3 * MIN }, start)!;
    expect(later.from).toBeUndefined();
    expect(parseRate(JSON.stringify(rate))).toEqual(rate);
  });

  it("cannot measure a first point without a start, before any step, or not after the start", () => {
    expect(advanceRate(null, { step: 10, total: 100, at: start + MIN }, null)).toBeNull();
    expect(advanceRate(null, { step: 0, total: 100, at: start + MIN }, start)).toBeNull();
    expect(advanceRate(null, { step: 10, total: 100, at: start }, start)).toBeNull();
  });

  it("averages the rate seen since the previous point, weighted by its share of two minutes", () => {
    const first: ProgressRate = { step: 10, total: 100, at: start + MIN, msPerStep: 6000 };
    // 30 s for 10 steps (3000 ms/step), weight 30/120: 6000 + 0.25 * (3000 - 6000).
    expect(advanceRate(first, { step: 20, total: 100, at: start + MIN + 30_000 }, start)).toEqual({
      step: 20,
      total: 100,
      at: start + MIN + 30_000,
      msPerStep: 5250,
    });
    // Two minutes or more since the previous point: the new rate alone.
    expect(advanceRate(first, { step: 50, total: 100, at: start + 4 * MIN }, start)!.msPerStep).toBe(4500);
  });

  it("is barely moved by one odd batch", () => {
    const steady: ProgressRate = { step: 100, total: 1000, at: start + 10 * MIN, msPerStep: 1000 };
    // One step took 5 s (a late batch): 1000 + 5/120 * 4000.
    const odd = advanceRate(steady, { step: 101, total: 1000, at: start + 10 * MIN + 5000 }, start)!;
    expect(odd.msPerStep).toBeCloseTo(1166.67, 1);
  });

  it("follows a job that slows down within minutes", () => {
    let rate: ProgressRate | null = { step: 100, total: 10_000, at: start + 10 * MIN, msPerStep: 1000 };
    // Now each step takes 2 s, reported every 10 s, for 5 minutes.
    for (let s = 1; s <= 30; s++) rate = advanceRate(rate, { step: 100 + 5 * s, total: 10_000, at: start + 10 * MIN + s * 10_000 }, start);
    expect(rate!.msPerStep).toBeGreaterThan(1900);
    expect(rate!.msPerStep).toBeLessThan(2000);
  });

  it("ignores a point whose step did not advance, or whose total is missing or not positive", () => {
    const rate: ProgressRate = { step: 10, total: 100, at: start + MIN, msPerStep: 6000 };
    expect(advanceRate(rate, { step: 10, total: 100, at: start + 2 * MIN }, start)).toBe(rate);
    expect(advanceRate(rate, { step: 20, total: 0, at: start + 2 * MIN }, start)).toBe(rate);
    expect(advanceRate(rate, { step: 20, total: -5, at: start + 2 * MIN }, start)).toBe(rate);
    expect(advanceRate(rate, { step: 20, total: NaN, at: start + 2 * MIN }, start)).toBe(rate);
    expect(advanceRate(rate, { step: -1, total: 100, at: start + 2 * MIN }, start)).toBe(rate);
    expect(advanceRate(null, { step: 20, total: 0, at: start + 2 * MIN }, start)).toBeNull();
  });

  it("restarts from a step that went backwards, keeping the time per step measured so far", () => {
    const rate: ProgressRate = { step: 800, total: 1000, at: start + 20 * MIN, msPerStep: 1500 };
    expect(advanceRate(rate, { step: 500, total: 1000, at: start + 22 * MIN }, start)).toEqual({
      step: 500,
      total: 1000,
      at: start + 22 * MIN,
      msPerStep: 1500,
      from: { step: 500, at: start + 22 * MIN },
    });
  });

  it("keeps the rate when steps arrive with no time between them", () => {
    const rate: ProgressRate = { step: 10, total: 100, at: start + MIN, msPerStep: 6000 };
    expect(advanceRate(rate, { step: 12, total: 100, at: start + MIN }, start)).toEqual({ ...rate, step: 12 });
  });

  it("ignores a point that would put the end more than a year away", () => {
    expect(advanceRate(null, { step: 1, total: 1e15, at: start + MIN }, start)).toBeNull();
    expect(advanceRate(null, { step: 1e300, total: 1e301, at: start + MIN }, start)).toBeNull();
  });
});

describe("endAtStart", () => {
  it("takes a cloud job's allowance or the max runtime first, else the end the plan expected, else none", () => {
    const planned = { expectedEndAt: start + 7 * MIN };
    expect(endAtStart({ maxRuntime: "30", cloudSeconds: null }, start, planned)).toEqual({ at: start + 30 * MIN, method: "max_runtime" });
    expect(endAtStart({ maxRuntime: null, cloudSeconds: 600 }, start, planned)).toEqual({ at: start + 10 * MIN, method: "cost_cap" });
    expect(endAtStart({ maxRuntime: "soon", cloudSeconds: null }, start, planned)).toEqual({ at: start + 7 * MIN, method: "recent_runs" });
    expect(endAtStart({ maxRuntime: null, cloudSeconds: null }, start, { expectedEndAt: null })).toBeNull();
    expect(endAtStart({ maxRuntime: null, cloudSeconds: null }, start)).toBeNull();
  });
});

describe("progressPoint and parseRate", () => {
  it("read numbers only", () => {
    expect(progressPoint({ step: 5, total_steps: 20, loss: 0.4 }, 7)).toEqual({ step: 5, total: 20, at: 7 });
    expect(progressPoint({ step: "x", total_steps: 20 }, 7)).toBeNull();
    expect(progressPoint({ step: 5 }, 7)).toBeNull();
    expect(progressPoint(null, 7)).toBeNull();
    expect(parseRate('{"step":1,"total":2,"at":3,"msPerStep":4}')).toEqual({ step: 1, total: 2, at: 3, msPerStep: 4 });
    expect(parseRate('{"step":"1","total":2,"at":3,"msPerStep":4}')).toBeNull();
    expect(parseRate("not json")).toBeNull();
    expect(parseRate(null)).toBeNull();
  });
});

describe("expectedEnd", () => {
  const now = start + 30 * MIN;

  it("from progress: the last point plus the steps left at the rate", () => {
    const rate = { step: 40, total: 100, at: start + 20 * MIN, msPerStep: 1000 };
    expect(expectedEnd({ ...none, rate, maxRuntime: 600 }, now)).toEqual({ at: start + 21 * MIN, method: "progress" });
  });

  it("from a cloud job's cost cap: the provider's start, else the admission, plus the seconds its estimate assumed", () => {
    const cloud = { expectedSeconds: 3600, providerStartedAt: start + 5 * MIN };
    expect(expectedEnd({ ...none, cloud }, now)).toEqual({ at: start + 65 * MIN, method: "cost_cap" });
    expect(expectedEnd({ ...none, cloud: { ...cloud, providerStartedAt: null } }, now)).toEqual({
      at: start + 60 * MIN,
      method: "cost_cap",
    });
  });

  it("from --max_runtime_minutes, a number or a numeric string", () => {
    expect(expectedEnd({ ...none, maxRuntime: 90 }, now)).toEqual({ at: start + 90 * MIN, method: "max_runtime" });
    expect(expectedEnd({ ...none, maxRuntime: " 45 " }, now)).toEqual({ at: start + 45 * MIN, method: "max_runtime" });
  });

  it("is unknown with nothing to go by, a bad max runtime, or no start", () => {
    expect(expectedEnd(none, now)).toBeNull();
    for (const bad of ["", "soon", 0, -5, 1.5, 20_000, true]) expect(expectedEnd({ ...none, maxRuntime: bad }, now)).toBeNull();
    expect(expectedEnd({ ...none, startedAt: null, maxRuntime: 90 }, now)).toBeNull();
  });

  it("skips a progress estimate beyond the horizon for the next method", () => {
    const rate = { step: 1, total: 100, at: start, msPerStep: HORIZON_MS };
    expect(expectedEnd({ ...none, rate, maxRuntime: 60 }, now)).toEqual({ at: start + 60 * MIN, method: "max_runtime" });
  });
});

describe("expectedDuration", () => {
  const run = (config: string, gpus: number, minutes: number, endedMinutesAgo = 0) => ({
    config_name: config,
    num_processes: gpus,
    started_at: new Date(start - (endedMinutesAgo + minutes) * MIN).toISOString(),
    completed_at: new Date(start - endedMinutesAgo * MIN).toISOString(),
  });
  const waiting = { jobType: "local" as const, configName: "sdxl", numProcesses: 2, maxRuntime: undefined };

  it("takes --max_runtime_minutes first", () => {
    const recent = recentRuns([run("sdxl", 2, 10)]);
    expect(expectedDuration({ ...waiting, maxRuntime: "30" }, recent)).toEqual({
      ms: 30 * MIN,
      method: "max_runtime",
      basis: "its --max_runtime_minutes (30)",
    });
  });

  it("else the median of the last 5 completed runs of the same environment on as many GPUs", () => {
    // Newest first, as the query orders them; the sixth (oldest) is not counted.
    const rows = [10, 50, 20, 40, 30, 1000].map((m, i) => run("sdxl", 2, m, i * 100));
    expect(recentRuns(rows).get(runKey("sdxl", 2))).toEqual([10, 50, 20, 40, 30].map((m) => ({ ms: m * MIN, steps: null })));
    expect(expectedDuration(waiting, recentRuns(rows))).toEqual({
      ms: 30 * MIN,
      method: "recent_runs",
      basis: "the median run time of the last 5 completed runs of sdxl on 2 GPU(s)",
    });
    expect(expectedDuration(waiting, recentRuns(rows.slice(0, 2)))).toEqual({
      ms: 30 * MIN,
      method: "recent_runs",
      basis: "the median run time of the last 2 completed runs of sdxl on 2 GPU(s)",
    });
  });

  it("takes its own --max_train_steps times the runs' median time per step when both have steps", () => {
    // 1,000 steps in 10 min, 2,000 in 22, 500 in 5.5: 0.6, 0.66 and 0.66 s per step; the median is 0.66 s.
    const rows = [
      { ...run("sdxl", 2, 10), steps: 1000 },
      { ...run("sdxl", 2, 22, 30), steps: "2000" },
      { ...run("sdxl", 2, 5.5, 60), steps: 500 },
    ];
    const perStep = {
      ms: 3000 * 0.66 * 1000,
      method: "recent_runs",
      basis: "its 3000 steps × 0.660 s per step, the median time per step of the last 3 completed runs of sdxl on 2 GPU(s)",
    };
    expect(expectedDuration({ ...waiting, steps: 3000 }, recentRuns(rows))).toEqual(perStep);
    expect(expectedDuration({ ...waiting, steps: "3000" }, recentRuns(rows))).toEqual(perStep);
    // Without steps of its own (an epoch-based run) or a usable count, the runs' median time.
    for (const steps of [undefined, 0, -5, 2.5, "many", null])
      expect(expectedDuration({ ...waiting, steps }, recentRuns(rows))).toEqual({
        ms: 10 * MIN,
        method: "recent_runs",
        basis: "the median run time of the last 3 completed runs of sdxl on 2 GPU(s)",
      });
    // Runs without steps: their median time, whatever its own steps.
    expect(expectedDuration({ ...waiting, steps: 3000 }, recentRuns([run("sdxl", 2, 10)]))).toEqual({
      ms: 10 * MIN,
      method: "recent_runs",
      basis: "the run time of the last completed run of sdxl on 2 GPU(s)",
    });
  });

  it("ignores runs of another environment or another GPU count, and rows without times", () => {
    const recent = recentRuns([
      run("sdxl", 1, 10),
      run("flux", 2, 20),
      { config_name: "sdxl", num_processes: 2, started_at: null, completed_at: null },
    ]);
    expect(expectedDuration(waiting, recent)).toBeNull();
    expect(expectedDuration({ ...waiting, numProcesses: 1 }, recent)).toEqual({
      ms: 10 * MIN,
      method: "recent_runs",
      basis: "the run time of the last completed run of sdxl on 1 GPU(s)",
    });
  });

  it("is unknown for a cloud job without a max runtime", () => {
    expect(expectedDuration({ ...waiting, jobType: "cloud" }, recentRuns([run("sdxl", 2, 10)]))).toBeNull();
  });
});
