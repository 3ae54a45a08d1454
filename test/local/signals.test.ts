import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

/**
 * A process that listens to SIGTERM as Miniflare does (exit 143), is sent SIGTERM, and takes the
 * signal over (`takeSignals`) before its event loop turns: the signal has been caught by then and
 * waits to be dispatched. Prints what handled it.
 */
function signalledDuringTakeover(takeover: string): { status: number | null; stdout: string } {
  const script = `
    import { takeSignals } from "./edge/local/signals.ts";
    process.on("SIGTERM", () => { console.log("theirs"); process.exit(143); });
    process.kill(process.pid, "SIGTERM");
    ${takeover}
    setTimeout(() => { console.log("lost"); process.exit(3); }, 1000);
  `;
  const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8", timeout: 20_000 });
  return { status: run.status, stdout: run.stdout.trim() };
}

describe("takeSignals", () => {
  it("hands a signal caught just before the takeover to the new handler, and only to it", () => {
    const outcome = signalledDuringTakeover(`takeSignals(["SIGTERM"], (s) => { console.log("ours " + s); process.exit(0); });`);
    expect(outcome).toEqual({ status: 0, stdout: "ours SIGTERM" });
  });
});
