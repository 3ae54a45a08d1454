import { describe, expect, it } from "vitest";
import { billedSecondsNow, costOf, expectedSeconds, periodStart, spendingCheck } from "../../edge/cloud/cost";
import { MAX_RUNTIME_MINUTES } from "../../edge/jobs/runtime";
import { ApiError } from "../../edge/errors";

// Cloud cost arithmetic: run-time estimates, per-second billing, spending periods and the limit.

function refusal(call: () => unknown): ApiError {
  try {
    call();
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    return error as ApiError;
  }
  throw new Error("expected a refusal");
}

describe("expectedSeconds", () => {
  it("takes the environment's --max_runtime_minutes, else the default, or the submission's minutes when more", () => {
    expect(expectedSeconds(120, { "--max_runtime_minutes": 90 }, 60)).toBe(7200);
    expect(expectedSeconds(90, { "--max_runtime_minutes": 90 }, 60)).toBe(5400);
    expect(expectedSeconds(61, {}, 60)).toBe(3660);
    expect(expectedSeconds(undefined, { "--max_runtime_minutes": 90 }, 60)).toBe(5400);
    expect(expectedSeconds(undefined, { "--max_runtime_minutes": "120" }, 60)).toBe(7200);
    expect(expectedSeconds(undefined, { "--max_runtime_minutes": "" }, 60)).toBe(3600);
    expect(expectedSeconds(undefined, { "--max_runtime_minutes": null }, 45)).toBe(2700);
    expect(expectedSeconds(undefined, {}, 60)).toBe(3600);
    expect(expectedSeconds(undefined, { "--max_runtime_minutes": MAX_RUNTIME_MINUTES }, 60)).toBe(604_800);
  });

  it("refuses a --max_runtime_minutes that is not a whole number of minutes from 1 to 10080, naming it", () => {
    for (const bad of [0, -5, 1.5, 10_081, "abc", "1e3", "90 minutes", true, [60]]) {
      const error = refusal(() => expectedSeconds(undefined, { "--max_runtime_minutes": bad }, 60));
      expect([error.status, error.code]).toEqual([422, "invalid_option"]);
      expect(error.detail).toBe(`--max_runtime_minutes must be a whole number of minutes from 1 to 10080, not ${JSON.stringify(bad)}`);
      expect(error.fields).toEqual([{ path: "--max_runtime_minutes", message: error.detail.slice("--max_runtime_minutes ".length) }]);
    }
  });

  it("refuses a submission below the environment's run time (or the default) unless the submitter may lower it (an admin)", () => {
    const error = refusal(() => expectedSeconds(1, { "--max_runtime_minutes": 90 }, 60));
    expect([error.status, error.code]).toEqual([422, "runtime_below_environment"]);
    expect(error.detail).toMatch(/^max_runtime_minutes 1 is below 90 minutes, the environment's --max_runtime_minutes: /);
    expect(error.fields).toEqual([{ path: "max_runtime_minutes", message: error.detail.slice("max_runtime_minutes ".length) }]);
    const noOption = refusal(() => expectedSeconds(59, {}, 60));
    expect(noOption.detail).toContain("59 is below 60 minutes, the default run time of the cloud settings");
    expect(expectedSeconds(1, { "--max_runtime_minutes": 90 }, 60, true)).toBe(60);
    expect(expectedSeconds(30, {}, 60, true)).toBe(1800);
  });

  it("refuses a bad environment value even when the submission has a good one (it is what reaches the trainer)", () => {
    const error = refusal(() => expectedSeconds(120, { "--max_runtime_minutes": "soon" }, 60));
    expect(error.detail).toBe('--max_runtime_minutes must be a whole number of minutes from 1 to 10080, not "soon"');
  });

  it("refuses a bad submission value even when the environment has a good one", () => {
    const error = refusal(() => expectedSeconds(0, { "--max_runtime_minutes": 60 }, 60));
    expect(error.detail).toBe("max_runtime_minutes must be a whole number of minutes from 1 to 10080, not 0");
  });
});

describe("costOf", () => {
  it("multiplies seconds by the rate and rounds to 4 decimals, half up", () => {
    expect(costOf(0.0014, 3600)).toBe(5.04);
    expect(costOf(0.000975, 1)).toBe(0.001);
    expect(costOf(0.000225, 2)).toBe(0.0005);
    expect(costOf(0.000225, 1)).toBe(0.0002);
    expect(costOf(0.001525, 123.4)).toBe(0.1882);
    expect(costOf(0.0001, 0)).toBe(0);
    expect(costOf(0, 1000)).toBe(0);
    // 0.1 + 0.2 style binary noise does not tip a rounding: 0.00015 * 1 is exactly half.
    expect(costOf(0.00015, 1)).toBe(0.0002);
  });

  it("throws on a negative or non-finite input (a bug, not a client mistake)", () => {
    expect(() => costOf(-0.001, 10)).toThrow(RangeError);
    expect(() => costOf(0.001, -1)).toThrow(RangeError);
    expect(() => costOf(Number.NaN, 1)).toThrow(RangeError);
    expect(() => costOf(0.001, Number.POSITIVE_INFINITY)).toThrow(RangeError);
  });
});

describe("billedSecondsNow", () => {
  const start = "2026-11-23T09:00:00.000Z";
  const at = (iso: string) => Date.parse(iso);

  it("is 0 before the job starts", () => {
    expect(billedSecondsNow({ startedAt: null, completedAt: null, billedSeconds: null }, at("2026-11-23T10:00:00Z"))).toBe(0);
  });

  it("ticks each whole second while running", () => {
    const job = { startedAt: start, completedAt: null, billedSeconds: null };
    expect(billedSecondsNow(job, at("2026-11-23T09:00:00.999Z"))).toBe(0);
    expect(billedSecondsNow(job, at("2026-11-23T09:00:01.000Z"))).toBe(1);
    expect(billedSecondsNow(job, at("2026-11-23T09:01:30.900Z"))).toBe(90);
    // A clock behind the start never bills negative time.
    expect(billedSecondsNow(job, at("2026-11-23T08:59:00Z"))).toBe(0);
  });

  it("uses the provider's billed seconds while running when they are ahead of the clock", () => {
    expect(billedSecondsNow({ startedAt: start, completedAt: null, billedSeconds: 130.5 }, at("2026-11-23T09:02:00Z"))).toBe(130.5);
    expect(billedSecondsNow({ startedAt: start, completedAt: null, billedSeconds: 30 }, at("2026-11-23T09:02:00Z"))).toBe(120);
  });

  it("is the provider's billed seconds once ended, else start to end (a cancel bills the time used)", () => {
    expect(
      billedSecondsNow({ startedAt: start, completedAt: "2026-11-23T09:10:00Z", billedSeconds: 598.2 }, at("2026-11-24T00:00:00Z")),
    ).toBe(598.2);
    expect(
      billedSecondsNow({ startedAt: start, completedAt: "2026-11-23T09:10:00.700Z", billedSeconds: null }, at("2026-11-24T00:00:00Z")),
    ).toBe(600);
    expect(billedSecondsNow({ startedAt: null, completedAt: "2026-11-23T09:10:00Z", billedSeconds: 12 }, at("2026-11-24T00:00:00Z"))).toBe(
      12,
    );
    expect(
      billedSecondsNow({ startedAt: null, completedAt: "2026-11-23T09:10:00Z", billedSeconds: null }, at("2026-11-24T00:00:00Z")),
    ).toBe(0);
  });
});

describe("periodStart", () => {
  const start = (period: "day" | "week" | "month", iso: string) => periodStart(period, new Date(iso)).toISOString();

  it("starts a day at UTC midnight", () => {
    expect(start("day", "2026-11-23T23:59:59.999Z")).toBe("2026-11-23T00:00:00.000Z");
    expect(start("day", "2026-11-24T00:00:00.000Z")).toBe("2026-11-24T00:00:00.000Z");
  });

  it("starts an ISO week on Monday, across a month and a year end", () => {
    expect(start("week", "2026-11-23T09:00:00Z")).toBe("2026-11-23T00:00:00.000Z"); // a Monday
    expect(start("week", "2026-11-29T23:59:59Z")).toBe("2026-11-23T00:00:00.000Z"); // the Sunday after
    expect(start("week", "2026-12-02T10:00:00Z")).toBe("2026-11-30T00:00:00.000Z"); // Wednesday, week from November
    expect(start("week", "2027-01-01T12:00:00Z")).toBe("2026-12-28T00:00:00.000Z"); // Friday of ISO week 2026-W53
    expect(start("week", "2027-01-03T23:00:00Z")).toBe("2026-12-28T00:00:00.000Z"); // its Sunday
    expect(start("week", "2027-01-04T00:00:00Z")).toBe("2027-01-04T00:00:00.000Z"); // week 2027-W01
  });

  it("starts a month on the 1st, including at month and leap-year ends", () => {
    expect(start("month", "2026-01-31T23:59:59.999Z")).toBe("2026-01-01T00:00:00.000Z");
    expect(start("month", "2026-02-01T00:00:00Z")).toBe("2026-02-01T00:00:00.000Z");
    expect(start("month", "2028-02-29T12:00:00Z")).toBe("2028-02-01T00:00:00.000Z");
    expect(start("month", "2026-12-31T23:59:59Z")).toBe("2026-12-01T00:00:00.000Z");
  });
});

describe("spendingCheck", () => {
  it("allows anything without a limit", () => {
    expect(spendingCheck(null, 1e6, 1e6)).toEqual({ allowed: true, remainingUsd: null, message: null });
  });

  it("allows an estimate that fits, exactly reaching the limit included", () => {
    expect(spendingCheck(10, 2.5, 1)).toEqual({ allowed: true, remainingUsd: 7.5, message: null });
    expect(spendingCheck(10, 8.5, 1.5)).toEqual({ allowed: true, remainingUsd: 1.5, message: null });
    // 0.1 + 0.2 is 0.30000000000000004 in floating point; in ten-thousandths it is 0.3.
    expect(spendingCheck(0.3, 0.1, 0.2)).toEqual({ allowed: true, remainingUsd: 0.2, message: null });
  });

  it("refuses an estimate that would pass the limit, saying by how much", () => {
    expect(spendingCheck(10, 8.5, 2)).toEqual({
      allowed: false,
      remainingUsd: 1.5,
      message:
        "The spending limit of $10.00 for this period would be exceeded: $8.50 is already committed (spent plus running and waiting jobs' estimates), " +
        "$1.50 remains, and this job is estimated at $2.00. Shorten its run time, wait for the next period, or ask an admin to raise the limit",
    });
    expect(spendingCheck(10, 10, 0.0001)).toMatchObject({ allowed: false, remainingUsd: 0 });
    expect(spendingCheck(5, 0, 5.0014).message).toContain("this job is estimated at $5.0014");
  });

  it("never reports a negative remainder when the period is already over its limit", () => {
    expect(spendingCheck(5, 7.25, 1)).toMatchObject({ allowed: false, remainingUsd: 0 });
    expect(spendingCheck(0, 0, 0)).toEqual({ allowed: true, remainingUsd: 0, message: null });
    expect(spendingCheck(0, 0, 0.0001)).toMatchObject({ allowed: false, remainingUsd: 0 });
  });
});
