// The trainer protocol (README "The trainer protocol") is SimpleTuner's. The runner's signal-file
// writer on its own (atomic, growing, kept over a restart); the demo trainer's reader; and, against
// the real stack with real runners, a stand-in for SimpleTuner's train.py (test/fakes/
// simpletuner-standin, Python) that reads the signal file exactly as train.py does: two
// validations and one checkpoint asked over HTTP are two validations and one checkpoint done.
// A stop asks (SIGINT), then SIGTERM, then kills the whole process tree.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stoppedOutcome } from "../runner/agent";
import { SignalWatcher } from "../runner/demo-trainer/signals";
import { PLAIN_BOX, planLaunch, signalFilePath } from "../runner/job";
import { findProgram } from "../runner/sandbox";
import { readCounters, SignalFile } from "../runner/signal-file";
import { SIGNAL_FILE_ENV } from "../shared/trainer-commands";
import { startRemoteRunner, stopRunners } from "./helpers/runner-process";
import { setUpAdmin, startTestStack, type TestStack } from "./helpers/stack";
import { until as waitUntil } from "./helpers/wait";

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

const HAS_BWRAP = findProgram("bwrap", process.env.PATH ?? "") !== null;
const PYTHON = findProgram("python3", `/usr/bin:/bin:${process.env.PATH ?? ""}`);
const STANDIN = resolve("test/fakes/simpletuner-standin");

describe.skipIf(!PYTHON)("SimpleTuner's protocol against the real stack", () => {
  let t: TestStack;
  let admin: { key: string; cookie: string };
  const runners: { name: string; child: ChildProcess; output: string }[] = [];
  const workDirs: Record<string, string> = {};
  const auth = () => ({ key: admin.key });
  // Sandboxed where bubblewrap is installed; a box with the sandbox off runs the stand-in too, so
  // a stop is seen reaching the trainer's tree both ways.
  const boxes = HAS_BWRAP ? ["sandboxed", "plain"] : ["plain"];

  const until = <T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 20_000) =>
    waitUntil(what, probe, { timeoutMs, context: () => `runners:\n${runners.map((r) => `${r.name}: ${r.output}`).join("\n")}` });
  async function env(name: string, config: Record<string, unknown>) {
    expect((await t.call("POST", "/api/configs/environments", { json: { name }, auth: auth() })).status).toBe(201);
    expect((await t.call("PUT", `/api/configs/${name}`, { json: { config }, auth: auth() })).status).toBe(200);
  }
  const submit = async (config_name: string, box: string) =>
    (await t.call("POST", "/api/queue/submit", { json: { config_name, target: "worker", worker_labels: { box } }, auth: auth() })).body;
  const entry = async (jobId: string) =>
    ((await t.call("GET", "/api/queue?include_completed=true&limit=1000", { auth: auth() })).body.jobs as any[]).find(
      (j) => j.job_id === jobId,
    );
  const events = async (jobId: string) =>
    (await t.call("GET", `/api/training/events?job_id=${jobId}`, { auth: auth() })).body.events as any[];
  const ended = (jobId: string) =>
    until(`job ${jobId} to end`, async () => {
      const e = await entry(jobId);
      return ["completed", "failed"].includes(e?.status) && e;
    });
  /** Host processes whose command line holds `marker`. */
  const processesWith = (marker: string) =>
    readdirSync("/proc")
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0").includes(marker);
        } catch {
          return false;
        }
      });

  beforeAll(async () => {
    t = await startTestStack();
    admin = await setUpAdmin(t);
    const host = temp("host");
    for (const name of boxes) {
      const work = join(host, name);
      mkdirSync(work);
      workDirs[name] = work;
      const config = {
        trainers: { simpletuner_standin: [PYTHON!, STANDIN] },
        allow_raw_commands: true,
        sandbox: name === "plain" ? "off" : "required",
        work_dir: work,
        hide: [t.dataDir],
      };
      runners.push(await startRemoteRunner(t, auth(), name, config, host));
    }
    await until("the runners to register", async () => runners.every((r) => r.output.includes("registered as worker")));
  });
  afterAll(async () => {
    await stopRunners(runners);
    await t?.stop();
  });

  it("two validations and one checkpoint asked over HTTP are two validations and one checkpoint done by a train.py-style reader; a stop then ends it interrupted, completed", async () => {
    const box = boxes[0]!;
    await env("standin", { "--trainer": "simpletuner_standin", "--num_processes": 0 });
    const job = await submit("standin", box);
    const started = await until("the stand-in to start", async () => (await events(job.job_id)).find((e) => e.type === "training.started"));
    expect(started.data.signal_file).toMatch(/\/trainer-signal-attempt-1\.json$/);
    for (const path of ["validation", "validation", "checkpoint"]) {
      const reply = await t.call("POST", `/api/training/${path}/run`, { json: { job_id: job.job_id }, auth: auth() });
      expect(reply.status).toBe(200);
    }
    const acted = await until("two validations and a checkpoint", async () => {
      const all = await events(job.job_id);
      const done = all.filter((e) => e.type === "validation.completed" || e.type === "checkpoint.saved");
      return done.length >= 3 && all;
    });
    expect(acted.filter((e) => e.type === "validation.completed").map((e) => e.data.count)).toEqual([1, 2]);
    expect(acted.filter((e) => e.type === "checkpoint.saved").map((e) => e.data.count)).toEqual([1]);
    // The file was there from the start: the stand-in never warned about it.
    expect(acted.filter((e) => e.type === "log" && /WARNING: signal file/.test(e.message))).toEqual([]);
    expect((await t.call("POST", "/api/training/stop", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    const finished = await ended(job.job_id);
    const all = await events(job.job_id);
    expect(all.find((e) => e.type === "training.status")).toMatchObject({ data: { status: "interrupted" } });
    expect(all.filter((e) => e.type.startsWith("training.stop")).map((e) => e.data.signal)).toEqual(["SIGINT"]);
    // KeyboardInterrupt's exit code 130 after a requested stop: the run ended as asked.
    expect(finished).toMatchObject({ status: "completed" });
    // Nothing more was owed: no action beyond the three asked for.
    expect(all.filter((e) => e.type === "validation.completed" || e.type === "checkpoint.saved")).toHaveLength(3);
    // The file as the runner left it; a command for the ended job is refused and changes nothing.
    const file = join(workDirs[box]!, "jobs", job.job_id, "trainer-signal-attempt-1.json");
    expect(readCounters(file)).toEqual({ manual_validation: 2, manual_checkpoint: 1 });
    const late = await t.call("POST", "/api/training/validation/run", { json: { job_id: job.job_id }, auth: auth() });
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({ code: "job_not_running" });
    expect(readCounters(file)).toEqual({ manual_validation: 2, manual_checkpoint: 1 });
  });

  it.each(boxes)(
    "a stop asks with SIGINT, then sends SIGTERM, then kills the whole tree of a trainer that ignores both (%s box)",
    async (box) => {
      const marker = `standin-child-${box}-${Date.now()}`;
      await env(`stubborn-${box}`, {
        "--trainer": "simpletuner_standin",
        "--num_processes": 0,
        "--standin_ignore_signals": true,
        "--standin_marker": marker,
      });
      const job = await submit(`stubborn-${box}`, box);
      await until("the stand-in's child", async () => (await events(job.job_id)).some((e) => e.type === "standin.child"));
      expect(processesWith(`${marker}:child`)).toHaveLength(1);
      expect((await t.call("POST", "/api/training/stop", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
      const finished = await ended(job.job_id);
      expect(finished.status, JSON.stringify(finished)).toBe("completed");
      const all = await events(job.job_id);
      // In this order: the runner's asks, and the trainer saying it got (and ignored) each.
      const steps = all
        .filter((e) => e.type.startsWith("training.stop") || e.type === "standin.signal")
        .map((e) => `${e.type}:${e.data.signal}`);
      expect(steps).toEqual([
        "training.stop_requested:SIGINT",
        "standin.signal:SIGINT",
        "training.stop_escalated:SIGTERM",
        "standin.signal:SIGTERM",
        "training.stop_escalated:SIGKILL",
      ]);
      // The trainer's child went with it.
      expect(processesWith(`${marker}:child`)).toEqual([]);
    },
  );

  it("a trainer that replaced its signal file with a directory loses its commands, not the runner: the request answers 200 and the job's events say why", async () => {
    const box = boxes[0]!;
    const trainer = `
      const fs = require("node:fs");
      const file = process.env.SIMPLETUNER_ACCELERATE_SIGNAL_FILE;
      fs.rmSync(file); fs.mkdirSync(file); fs.writeFileSync(file + "/keep", "x");
      console.log(JSON.stringify({ type: "swapped" }));
      setTimeout(() => {}, 60000);`;
    await env("swapper", { "--num_processes": 0, "--trainer_command": JSON.stringify([process.execPath, "-e", trainer, "--"]) });
    const job = await submit("swapper", box);
    await until("the swap", async () => (await events(job.job_id)).some((e) => e.type === "swapped"));
    expect((await t.call("POST", "/api/training/validation/run", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    const undelivered = await until("the runner to say so", async () =>
      (await events(job.job_id)).find((e) => e.type === "command.undelivered"),
    );
    expect(undelivered).toMatchObject({
      level: "warning",
      title: "The validation request could not be handed to the trainer: its signal file cannot be written",
      data: { command: "validation" },
    });
    // The runner goes on: the stop still reaches the trainer (node dies of SIGINT: completed).
    expect((await t.call("POST", "/api/training/stop", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    expect((await ended(job.job_id)).status).toBe("completed");
  });
});
