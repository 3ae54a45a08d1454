// A suite's missing tool (test/helpers/prerequisites.ts): skipped in a developer's run, a failure
// under CI=true (what .ci/run sets), so CI cannot be green with a suite that never ran.
import { afterEach, describe, expect, it } from "vitest";
import { prerequisite } from "../helpers/prerequisites";

describe("prerequisite", () => {
  const ci = process.env.CI;
  afterEach(() => {
    if (ci === undefined) delete process.env.CI;
    else process.env.CI = ci;
  });

  it("says a present tool is there, CI or not", () => {
    process.env.CI = "true";
    expect(prerequisite("bubblewrap (bwrap)", true)).toBe(true);
    delete process.env.CI;
    expect(prerequisite("bubblewrap (bwrap)", true)).toBe(true);
  });

  it("lets a developer's run skip a missing tool, and fails it under CI=true, naming the tool", () => {
    delete process.env.CI;
    expect(prerequisite("chromium (/usr/bin/chromium)", false)).toBe(false);
    process.env.CI = "true";
    expect(() => prerequisite("chromium (/usr/bin/chromium)", false)).toThrow(
      "chromium (/usr/bin/chromium) is not installed: under CI=true the suites that need it fail instead of skipping",
    );
  });
});
