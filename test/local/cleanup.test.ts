// The test helpers' cleanup (test/helpers/cleanup.ts): what a test started is stopped once,
// by the test or at the end of its file, and a start still under way is waited for first.
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { endWhenDone, leftRunning, stopLeftRunning, stopWhenDone, tracked } from "../helpers/cleanup";

describe("stopWhenDone", () => {
  it("stops once, whether the test stops first or the end of the file does", async () => {
    const before = leftRunning();
    let stops = 0;
    const stop = stopWhenDone(() => void stops++);
    expect(leftRunning()).toBe(before + 1);
    await Promise.all([stop(), stop()]);
    expect(stops).toBe(1);
    expect(leftRunning()).toBe(before);
    await stopLeftRunning();
    expect(stops).toBe(1);
  });

  it("at the end of the file, waits for starts under way and stops what they started, each failure reported", async () => {
    const stopped: string[] = [];
    let started!: () => void;
    const start = tracked(new Promise<void>((resolve) => (started = resolve))).then(() => stopWhenDone(() => void stopped.push("late")));
    stopWhenDone(() => {
      throw new Error("cannot stop");
    });
    stopWhenDone(() => void stopped.push("early"));
    setTimeout(started, 20);
    await expect(stopLeftRunning()).rejects.toThrow("1 thing(s) left running failed to stop");
    await start;
    expect(stopped.sort()).toEqual(["early", "late"]);
    expect(leftRunning()).toBe(0);
  });

  it("ends a child process left running: SIGTERM, then SIGKILL after the grace", async () => {
    const child = endWhenDone(spawn(process.execPath, ["-e", "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)"]), 200);
    // Time to set its SIGTERM handler.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await stopLeftRunning();
    expect(child.signalCode).toBe("SIGKILL");
  });
});
