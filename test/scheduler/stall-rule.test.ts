// The stall rule (edge/jobs/stall.ts) as a pure function: the threshold, phases, the watch the
// event intake keeps, and the detector's own start, so that time the service was down (a Worker
// restart) is never taken for a stall.
import { describe, expect, it } from "vitest";
import { advanceWatch, median, parseWatch, stallOf, stallThresholdMs, type StallWatch } from "../../edge/jobs/stall";

const MIN = 60_000;
const rules = { min_seconds: 600, factor: 5 };
const watch = (over: Partial<StallWatch> = {}): StallWatch => ({ step: 10, at: 0, times: [1000], phase: null, phaseAt: 0, ...over });

describe("the stall rule", () => {
  it("waits max(min_seconds, factor x the median step time)", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(stallThresholdMs([2_000, 3_000], rules)).toBe(10 * MIN);
    expect(stallThresholdMs([240_000, 180_000, 200_000], rules)).toBe(5 * 200_000);
    expect(stallOf(watch(), rules, 10 * MIN - 1)).toEqual({ stalled: false, reason: "progressing" });
    expect(stallOf(watch(), rules, 10 * MIN)).toEqual({ stalled: true, quietSince: 0, thresholdMs: 10 * MIN });
  });

  it("never marks a job in a validation or checkpoint, and counts from the phase's end", () => {
    expect(stallOf(watch({ phase: "validation", phaseAt: 1 }), rules, 60 * MIN)).toEqual({ stalled: false, reason: "in_phase" });
    expect(stallOf(watch({ phase: "checkpoint", phaseAt: 1 }), rules, 60 * MIN)).toEqual({ stalled: false, reason: "in_phase" });
    expect(stallOf(watch({ phaseAt: 30 * MIN }), rules, 39 * MIN).stalled).toBe(false);
    expect(stallOf(watch({ phaseAt: 30 * MIN }), rules, 40 * MIN)).toMatchObject({ stalled: true, quietSince: 30 * MIN });
  });

  it("counts quiet time from the detector's start: a restart after a long outage marks nothing at once", () => {
    // Last step at 0; the service was down until 60 min, when its Scheduler started again.
    expect(stallOf(watch(), rules, 60 * MIN + 5_000, 60 * MIN).stalled).toBe(false);
    expect(stallOf(watch(), rules, 70 * MIN, 60 * MIN)).toMatchObject({ stalled: true, quietSince: 60 * MIN });
  });

  it("keeps the watch from events: new steps and their times, phases opened and closed, nothing before the first step", () => {
    expect(advanceWatch(null, [{ type: "validation.started" }], 0, 5)).toBeNull();
    let w = advanceWatch(null, [{ type: "training.progress", step: 1 }], 0, 60_000);
    // The first step's time includes loading the model: not a step time.
    expect(w).toEqual({ step: 1, at: 60_000, times: [], phase: null, phaseAt: 0 });
    w = advanceWatch(w, [{ type: "training.progress", step: 3 }], 0, 64_000);
    expect(w!.times).toEqual([2_000]);
    // A step already seen, or a lower one, changes nothing.
    expect(advanceWatch(w, [{ type: "training.progress", step: 3 }], 0, 70_000)).toBe(w);
    w = advanceWatch(w, [{ type: "validation.started" }], 0, 65_000);
    expect(w).toMatchObject({ phase: "validation", phaseAt: 65_000 });
    w = advanceWatch(w, [{ type: "validation.completed" }, { type: "checkpoint.started" }], 0, 80_000);
    expect(w).toMatchObject({ phase: "checkpoint", phaseAt: 80_000 });
    w = advanceWatch(w, [{ type: "checkpoint.saved" }], 0, 90_000);
    expect(w).toMatchObject({ phase: null, phaseAt: 90_000 });
    // A new step also ends a phase whose end never came.
    w = advanceWatch({ ...w!, phase: "validation" }, [{ type: "training.progress", step: 4 }], 0, 95_000);
    expect(w).toMatchObject({ step: 4, phase: null, phaseAt: 95_000 });
    expect(parseWatch(JSON.stringify(w))).toEqual(w);
    expect(parseWatch("{}")).toBeNull();
    expect(parseWatch("not json")).toBeNull();
  });
});
