// The pure helpers of `jobs list` and `jobs status`: -o field paths, table cells and ages.
import { describe, expect, it } from "vitest";
import { fieldValue, parseFields, selectFields } from "../../runner/cli/fields";
import { age, bytes, cell, expectedEndText, expectedRunText, gpusCell, usd } from "../../runner/cli/format-job";
import { UsageError } from "../../runner/cli/output";

describe("-o field paths", () => {
  it("takes queue entry fields and metadata dot paths of any depth, in order", () => {
    expect(parseFields("job_id, status,metadata.run_name,metadata.a.b.c,metadata")).toEqual([
      "job_id",
      "status",
      "metadata.run_name",
      "metadata.a.b.c",
      "metadata",
    ]);
  });

  it("refuses unknown fields, empty ones and paths into anything but metadata", () => {
    for (const spec of ["colour", "job_id,", "metadata.", "metadata..a", "owner.name", "__proto__", "constructor"])
      expect(() => parseFields(spec), spec).toThrow(UsageError);
  });

  it("reads nested metadata, and null for whatever is absent", () => {
    const entry = { job_id: "j", metadata: { run_name: "r", a: { b: 0 }, n: null } };
    expect(fieldValue(entry, "metadata.a.b")).toBe(0);
    expect(fieldValue(entry, "metadata.a.x")).toBeNull();
    expect(fieldValue(entry, "metadata.run_name.length")).toBeNull();
    expect(fieldValue(entry, "metadata.n")).toBeNull();
    expect(fieldValue({ job_id: "j", metadata: null }, "metadata.run_name")).toBeNull();
    expect(fieldValue(entry, "metadata.toString")).toBeNull();
    expect(selectFields(entry, ["job_id", "config_name", "metadata.run_name"])).toEqual({
      job_id: "j",
      config_name: null,
      "metadata.run_name": "r",
    });
  });
});

describe("cells", () => {
  it("writes nothing as -, lists with commas, objects as JSON", () => {
    expect([cell(null), cell(undefined), cell(0), cell(false), cell([0, 1]), cell({ a: 1 })]).toEqual([
      "-",
      "-",
      "0",
      "false",
      "0,1",
      '{"a":1}',
    ]);
  });

  it("says which GPUs a job holds, else how many it wants", () => {
    expect(gpusCell({ allocated_gpus: [0, 1], num_processes: 2, job_type: "local" })).toBe("[0,1]");
    expect(gpusCell({ allocated_gpus: null, num_processes: 2, job_type: "local" })).toBe("2");
    expect(gpusCell({ allocated_gpus: null, num_processes: 0, job_type: "local" })).toBe("cpu");
    expect(gpusCell({ num_processes: 0, job_type: "cloud" })).toBe("cloud");
    expect(gpusCell({})).toBe("-");
  });

  it("writes ages in one unit, never negative", () => {
    const now = new Date("2026-01-10T12:00:00Z");
    expect(age("2026-01-10T11:59:18Z", now)).toBe("42s");
    expect(age("2026-01-10T11:55:00Z", now)).toBe("5m");
    expect(age("2026-01-10T09:30:00Z", now)).toBe("2h");
    expect(age("2026-01-07T11:00:00Z", now)).toBe("3d");
    expect(age("2026-01-10T12:00:05Z", now)).toBe("0s");
    expect(age("not a time", now)).toBe("-");
  });

  it("says when a running job is expected to end, and how long a waiting one is expected to run, with how each was estimated", () => {
    const at = "2026-11-23T10:00:00.000Z";
    expect(expectedEndText({ expected_end_at: at, expected_end_method: "progress" })).toBe(`${at} (from progress)`);
    expect(expectedEndText({ expected_end_at: at, expected_end_method: "cost_cap" })).toBe(`${at} (from cost cap)`);
    expect(expectedEndText({ expected_end_at: null, expected_end_method: null })).toBeNull();
    expect(expectedEndText({})).toBeNull();
    expect(expectedRunText({ expected_minutes: 90, expected_minutes_method: "max_runtime" })).toBe("about 90 min (from max runtime)");
    expect(expectedRunText({ expected_minutes: 42.37, expected_minutes_method: "recent_runs" })).toBe("about 42 min (from recent runs)");
    expect(expectedRunText({ expected_minutes: 0.25, expected_minutes_method: "recent_runs" })).toBe("about 0.25 min (from recent runs)");
    expect(expectedRunText({ expected_minutes: null, expected_minutes_method: null })).toBeNull();
  });

  it("writes bytes and dollars for people", () => {
    expect([bytes(512), bytes(1536), bytes(100 * 1024 * 1024)]).toEqual(["512 B", "1.5 KiB", "100.0 MiB"]);
    expect([usd(5.04), usd(0.0014), usd(0)]).toEqual(["$5.04", "$0.0014", "$0.00"]);
  });
});
