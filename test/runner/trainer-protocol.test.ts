// The trainer protocol (README "The trainer protocol") is SimpleTuner's. The runner's signal-file
// writer on its own (atomic, growing, kept over a restart) and the demo trainer's reader. Against
// the real stack, with SimpleTuner's stand-in reading the signal file as train.py does:
// test/runner/simpletuner.test.ts.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { stoppedOutcome } from "../../runner/agent/report";
import { SignalWatcher } from "../../runner/demo-trainer/signals";
import { PLAIN_BOX, planLaunch, signalFilePath } from "../../runner/agent/job";
import { readCounters, SignalFile } from "../../runner/agent/signal-file";
import { SIGNAL_FILE_ENV } from "../../shared/trainer-commands";

const dirs: string[] = [];
const temp = (name: string) => {
  const dir = mkdtempSync(join(tmpdir(), `trainer-protocol-${name}-`));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("the runner's signal file", () => {
  it("starts at zero, grows one per command, and is a whole JSON object after every write", () => {
    const path = join(temp("writer"), "signals.json");
    const signals = new SignalFile(path);
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ manual_validation: 0, manual_checkpoint: 0 });
    expect(signals.bump("validation")).toEqual({ manual_validation: 1, manual_checkpoint: 0 });
    expect(signals.bump("validation")).toEqual({ manual_validation: 2, manual_checkpoint: 0 });
    expect(signals.bump("checkpoint")).toEqual({ manual_validation: 2, manual_checkpoint: 1 });
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ manual_validation: 2, manual_checkpoint: 1 });
    // No temporary file is left beside it.
    expect(readdirSync(join(path, ".."))).toEqual(["signals.json"]);
  });

  it("keeps its counters over a runner restart, and never goes below them", () => {
    const path = join(temp("restart"), "signals.json");
    const first = new SignalFile(path);
    first.bump("validation");
    first.bump("checkpoint");
    first.bump("checkpoint");
    const again = new SignalFile(path);
    expect(again.values).toEqual({ manual_validation: 1, manual_checkpoint: 2 });
    expect(again.bump("validation")).toEqual({ manual_validation: 2, manual_checkpoint: 2 });
    // What it cannot read counts as nothing: garbage, negatives, fractions, not a plain file.
    writeFileSync(path, '{"manual_validation": -4, "manual_checkpoint": 1.5}');
    expect(readCounters(path)).toEqual({ manual_validation: 0, manual_checkpoint: 0 });
    writeFileSync(path, "{not json");
    expect(new SignalFile(path).values).toEqual({ manual_validation: 0, manual_checkpoint: 0 });
  });

  it("a reader in another process never sees a partial file, and the counts it sees only grow", async () => {
    const dir = temp("atomic");
    const path = join(dir, "signals.json");
    const done = join(dir, "done");
    const signals = new SignalFile(path);
    // The reader re-reads as fast as it can until told to stop; it reports what it saw.
    const reader = spawn(
      process.execPath,
      [
        "-e",
        `const fs = require("node:fs"); const [path, done] = process.argv.slice(1);
         let reads = 0, broken = 0, backwards = 0, last = 0;
         for (;;) {
           const finished = fs.existsSync(done);
           let text; try { text = fs.readFileSync(path, "utf8"); } catch { broken++; continue; }
           reads++;
           try { const n = JSON.parse(text).manual_validation; if (n < last) backwards++; last = n; } catch { broken++; }
           if (finished) break;
         }
         console.log(JSON.stringify({ reads, broken, backwards, last }));`,
        path,
        done,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let output = "";
    reader.stdout!.on("data", (d: Buffer) => (output += d.toString()));
    for (let i = 0; i < 1000; i++) {
      signals.bump("validation");
      if (i % 100 === 0) await new Promise((r) => setImmediate(r));
    }
    writeFileSync(done, "");
    await new Promise((r) => reader.once("exit", r));
    const seen = JSON.parse(output) as { reads: number; broken: number; backwards: number; last: number };
    expect(seen.reads).toBeGreaterThan(0);
    expect(seen).toMatchObject({ broken: 0, backwards: 0, last: 1000 });
  });

  it("moves the mtime on with every write, so a reader comparing mtimes sees each one", () => {
    const path = join(temp("mtime"), "signals.json");
    const signals = new SignalFile(path);
    let last = statSync(path).mtimeMs;
    for (let i = 0; i < 50; i++) {
      signals.bump("checkpoint");
      const now = statSync(path).mtimeMs;
      expect(now).toBeGreaterThan(last);
      last = now;
    }
  });

  it("writes through nothing the trainer left in its directory: a link at the file's or the temporary name is replaced, its target untouched", () => {
    const dir = temp("links");
    const victim = join(temp("victim"), "victim.txt");
    writeFileSync(victim, "untouched\n");
    const path = join(dir, "signals.json");
    symlinkSync(victim, path);
    // A link at the file's name is not followed when reading back, nor written through.
    const signals = new SignalFile(path);
    expect(signals.values).toEqual({ manual_validation: 0, manual_checkpoint: 0 });
    symlinkSync(victim, `${path}.tmp-${process.pid}`);
    signals.bump("validation");
    expect(readFileSync(victim, "utf8")).toBe("untouched\n");
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ manual_validation: 1, manual_checkpoint: 0 });
  });

  it("every trainer gets SIMPLETUNER_ACCELERATE_SIGNAL_FILE in its job directory, one per attempt; TRAINER_CONTROL_FILE is gone", () => {
    const job = { job_id: "local-1", config_name: "x", dataloader: [], allocated_gpus: [0], num_processes: 1, attempt: 3 };
    const demo = planLaunch("/w", { ...job, config: { "--trainer": "demo" } });
    expect(demo.env[SIGNAL_FILE_ENV]).toBe("/w/jobs/local-1/trainer-signal-attempt-3.json");
    expect(signalFilePath("/w/jobs/local-1", 3)).toBe(demo.env[SIGNAL_FILE_ENV]);
    expect(demo.env).not.toHaveProperty("TRAINER_CONTROL_FILE");
    const raw = { ...PLAIN_BOX, allowRawCommands: true, sandbox: "off" as const, trainers: { mine: [process.execPath, "train.js"] } };
    expect(
      planLaunch("/w", { ...job, config: { "--trainer_command": JSON.stringify([process.execPath]) } }, [], null, raw).env[SIGNAL_FILE_ENV],
    ).toBe(demo.env[SIGNAL_FILE_ENV]);
    expect(planLaunch("/w", { ...job, config: { "--trainer": "mine" } }, [], null, raw).env[SIGNAL_FILE_ENV]).toBe(
      demo.env[SIGNAL_FILE_ENV],
    );
  });

  it("a stopped job ends completed when the trainer exits cleanly or of the runner's signals, failed when it crashes while stopping", () => {
    expect(stoppedOutcome(0, null)).toBe("completed");
    expect(stoppedOutcome(130, null)).toBe("completed"); // Python's KeyboardInterrupt
    expect(stoppedOutcome(143, null)).toBe("completed");
    expect(stoppedOutcome(137, null)).toBe("completed"); // bwrap, for a trainer killed inside it
    expect(stoppedOutcome(null, 2)).toBe("completed");
    expect(stoppedOutcome(null, 9)).toBe("completed"); // killed after the grace period
    expect(stoppedOutcome(1, null)).toBe("failed");
    expect(stoppedOutcome(null, 11)).toBe("failed");
  });
});

describe("the demo trainer's reader (train.py's check)", () => {
  it("owes one action per increase, re-reads only when the mtime changes, and warns once about a missing or unreadable file", () => {
    const path = join(temp("reader"), "signals.json");
    const watcher = new SignalWatcher(path);
    const missing = watcher.check();
    expect(missing.owed).toEqual({ validation: 0, checkpoint: 0 });
    expect(missing.warning).toMatch(/^WARNING: signal file .* is not there \(ENOENT\)/);
    expect(watcher.check().warning).toBeNull(); // said once
    // Whole seconds, so a time set again is exactly the same time.
    const at = (seconds: number) => utimesSync(path, 1_700_000_000 + seconds, 1_700_000_000 + seconds);
    writeFileSync(path, JSON.stringify({ manual_validation: 2, manual_checkpoint: 1 }));
    at(0);
    expect(watcher.check()).toEqual({ owed: { validation: 2, checkpoint: 1 }, warning: null });
    expect(watcher.check().owed).toEqual({ validation: 0, checkpoint: 0 });
    // Changed content with the same mtime is not looked at, as in train.py.
    writeFileSync(path, JSON.stringify({ manual_validation: 5, manual_checkpoint: 1 }));
    at(0);
    expect(watcher.check().owed).toEqual({ validation: 0, checkpoint: 0 });
    at(1);
    expect(watcher.check().owed).toEqual({ validation: 3, checkpoint: 0 });
    // Unreadable: a warning, training goes on; counters that go down are nothing owed.
    writeFileSync(path, "{half");
    at(2);
    expect(watcher.check()).toMatchObject({
      owed: { validation: 0, checkpoint: 0 },
      warning: expect.stringMatching(/^WARNING: signal file .* is unreadable/),
    });
    writeFileSync(path, JSON.stringify({ manual_validation: 1, manual_checkpoint: 2 }));
    at(3);
    expect(watcher.check()).toEqual({ owed: { validation: 0, checkpoint: 1 }, warning: null });
  });
});
