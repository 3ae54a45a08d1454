import { describe, expect, it } from "vitest";
import { canMovePhase, CLOUD_PHASES, parsePhase, PHASE_TRANSITIONS, phasesBefore, type CloudPhase } from "../../edge/cloud/phase";
import { providerLogEvents } from "../../edge/cloud/provider-logs";
import { MAX_LOG_LINE_CHARS } from "../../shared/schemas/events";

// A cloud job's phases: the transition table, the one place allowed changes are written.

const ALLOWED: [CloudPhase, CloudPhase][] = [
  ["queued", "uploading"],
  ["queued", "submitting"],
  ["queued", "finished"],
  ["uploading", "uploading"],
  ["uploading", "submitting"],
  ["uploading", "finished"],
  ["submitting", "submitted"],
  ["submitting", "queued"],
  ["submitting", "uploading"],
  ["submitting", "finished"],
  ["submitted", "running"],
  ["submitted", "finished"],
  ["running", "running"],
  ["running", "finished"],
];

describe("cloud job phases", () => {
  it("accepts every change the table lists, and only those", () => {
    for (const [from, to] of ALLOWED) expect(canMovePhase(from, to), `${from} -> ${to}`).toBe(true);
    const listed = CLOUD_PHASES.flatMap((from) => PHASE_TRANSITIONS[from].map((to) => [from, to]));
    expect(listed).toEqual(ALLOWED);
  });

  it("refuses leaving finished, going back to an earlier phase once submitted, and skipping the create", () => {
    for (const to of CLOUD_PHASES) expect(canMovePhase("finished", to), `finished -> ${to}`).toBe(false);
    expect(canMovePhase("running", "submitted")).toBe(false);
    expect(canMovePhase("running", "queued")).toBe(false);
    expect(canMovePhase("submitted", "submitting")).toBe(false);
    expect(canMovePhase("submitted", "uploading")).toBe(false);
    expect(canMovePhase("queued", "submitted")).toBe(false);
    expect(canMovePhase("uploading", "running")).toBe(false);
    expect(canMovePhase("queued", "running")).toBe(false);
    expect(canMovePhase("queued", "queued")).toBe(false);
  });

  it("names the phases a conditional write of each phase accepts", () => {
    expect(phasesBefore("running")).toEqual(["submitted", "running"]);
    expect(phasesBefore("finished")).toEqual(["queued", "uploading", "submitting", "submitted", "running"]);
    expect(phasesBefore("submitted")).toEqual(["submitting"]);
    expect(phasesBefore("queued")).toEqual(["submitting"]);
  });

  it("reads a stored phase, refusing a value that is not one", () => {
    expect(parsePhase("running")).toBe("running");
    expect(() => parsePhase("done")).toThrow("not a cloud job phase");
    expect(() => parsePhase(null)).toThrow("not a cloud job phase");
  });
});

describe("provider log lines as events", () => {
  it("takes complete lines only until the run is over, numbered by where they start", () => {
    const running = providerLogEvents("step 1\nstep 2\nste", 0, false);
    expect(running).toEqual({
      events: [
        { seq: 0, event: { type: "log", message: "step 1" } },
        { seq: 7, event: { type: "log", message: "step 2" } },
      ],
      offset: 14,
    });
    expect(providerLogEvents("step 1\nstep 2\nstep 3", running.offset, true)).toEqual({
      events: [{ seq: 14, event: { type: "log", message: "step 3" } }],
      offset: 20,
    });
    expect(providerLogEvents("step 1\n", 7, false)).toEqual({ events: [], offset: 7 });
  });

  it("cuts a line as a runner's is cut", () => {
    const { events } = providerLogEvents(`${"x".repeat(MAX_LOG_LINE_CHARS + 10)}\n`, 0, false);
    expect(events[0]!.event.message).toHaveLength(4000);
  });
});
