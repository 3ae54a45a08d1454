import { appendFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as pty from "node-pty";
import type { Assignment } from "./edge-client";

/*
 * One assigned job on this box: its directory (`<work_dir>/jobs/<job_id>/`), the trainer's
 * command line built from the environment's options, and the trainer itself under a PTY with
 * CUDA_VISIBLE_DEVICES set to the job's devices. Everything the trainer prints goes to
 * `output.log`; the last lines travel with a failure report.
 */

/** Options the runner itself reads; they are not passed to the trainer. */
const RUNNER_OPTIONS = new Set(["--trainer", "--trainer_command", "--num_processes", "--accelerate_visible_devices"]);
// Built (npm run runner: .build/runner/demo-trainer.mjs beside this bundle) or from source (tests).
const BUILT_DEMO_TRAINER = fileURLToPath(new URL("./demo-trainer.mjs", import.meta.url));
const DEMO_TRAINER = fileURLToPath(new URL("./demo-trainer/main.ts", import.meta.url));
const KEEP_LINES = 50;

export interface Launch {
  argv: string[];
  env: Record<string, string>;
  jobDir: string;
}

/** Thrown for a job that cannot be started as configured; the message says what to change. */
export class LaunchError extends Error {}

/** `--name value` pairs from an option map: true as "true", objects as JSON, empty and false flags left out. */
function optionArgs(config: Record<string, unknown>): string[] {
  const args: string[] = [];
  for (const [name, value] of Object.entries(config)) {
    if (!name.startsWith("--") || RUNNER_OPTIONS.has(name) || value === null || value === undefined || value === "" || value === false) continue;
    args.push(name, typeof value === "object" ? JSON.stringify(value) : String(value));
  }
  return args;
}

/**
 * The default trainer: SimpleTuner's training script under `accelerate launch`, one process per
 * GPU (`--num_processes 0`: one process on the CPU). The script is SIMPLETUNER_TRAIN_SCRIPT on
 * the runner's box (default simpletuner/train.py, relative to the job directory unless absolute).
 */
export function simpleTunerCommand(numProcesses: number): string[] {
  const script = process.env.SIMPLETUNER_TRAIN_SCRIPT || "simpletuner/train.py";
  const devices = numProcesses > 0 ? ["--num_processes", String(numProcesses)] : ["--num_processes", "1", "--cpu"];
  return ["accelerate", "launch", ...devices, "--num_machines", "1", "--dynamo_backend", "no", script];
}

/** Whether a program can be run: a path that exists, or a name found on PATH. */
function onPath(program: string): boolean {
  if (program.includes("/")) return existsSync(program);
  return (process.env.PATH ?? "").split(":").some((dir) => dir && existsSync(join(dir, program)));
}

/** `--trainer_command`: a JSON array of strings (the program, then its arguments), as an option value holds it. */
function trainerCommand(value: unknown): string[] | null {
  if (value === undefined || value === null || value === "") return null;
  let parsed: unknown = value;
  if (typeof value === "string") {
    try {
      parsed = JSON.parse(value);
    } catch {
      parsed = undefined;
    }
  }
  if (Array.isArray(parsed) && parsed.length > 0 && parsed.every((p) => typeof p === "string")) return parsed as string[];
  throw new LaunchError(`--trainer_command must be a JSON array of strings (the program and its arguments), not ${JSON.stringify(value)}`);
}

/**
 * What to run for an assignment, and where. `boxGpus`: this box's device indices; a job given
 * the whole worker (a remote worker's assignment has no allocated_gpus) gets the first
 * num_processes of them.
 */
export function planLaunch(workDir: string, job: Assignment, boxGpus: number[] = [], callbackUrl: string | null = null): Launch {
  const jobDir = join(workDir, "jobs", job.job_id);
  const config = { ...job.config };
  // The trainer's webhooks go to the runner (events in); the job's receivers are the edge's to call.
  if (callbackUrl) config["--webhook_config"] = JSON.stringify([{ webhook_type: "raw", callback_url: callbackUrl, log_level: "info", ssl_no_verify: false }]);
  else delete config["--webhook_config"];
  // The output directory stays inside the job's directory whatever the environment says.
  const output = String(config["--output_dir"] ?? "output");
  const outputDir = resolve(jobDir, output);
  const inside = relative(jobDir, outputDir);
  if (isAbsolute(output) || inside.startsWith("..") || isAbsolute(inside)) throw new LaunchError(`--output_dir must be a path inside the job's directory, not ${JSON.stringify(output)}`);
  config["--output_dir"] = outputDir;
  const trainer = config["--trainer"];
  const command = trainerCommand(config["--trainer_command"]);
  let base: string[];
  // tsx by its resolved location: the trainer runs in the job's directory, where a bare
  // "tsx" would not be found.
  if (trainer === "demo") base = existsSync(BUILT_DEMO_TRAINER) ? [process.execPath, BUILT_DEMO_TRAINER] : [process.execPath, "--import", import.meta.resolve("tsx"), DEMO_TRAINER];
  else if (command) base = command;
  else base = simpleTunerCommand(job.num_processes);
  if (!onPath(base[0]!)) {
    throw new LaunchError(
      `${base[0]} is not installed on this box (not found on PATH)${command ? "" : ': the default trainer is SimpleTuner through accelerate; install it here (and set SIMPLETUNER_TRAIN_SCRIPT), or set "--trainer": "demo" or "--trainer_command" in the environment'}`,
    );
  }
  return {
    argv: [...base, ...optionArgs(config)],
    jobDir,
    env: {
      CUDA_VISIBLE_DEVICES: (job.allocated_gpus ?? boxGpus.slice(0, job.num_processes)).join(","),
      TRAINER_JOB_ID: job.job_id,
      TRAINER_CONTROL_FILE: join(jobDir, "control.jsonl"),
      TRAINER_OUTPUT_DIR: outputDir,
      ...(callbackUrl ? { TRAINER_CALLBACK_URL: callbackUrl } : {}),
    },
  };
}

export interface RunningJob {
  jobId: string;
  /** Asks the trainer to stop (SIGTERM), then ends it (SIGKILL) if it is still there after `graceMs`. */
  stop(graceMs: number): void;
  /** Resolves when the trainer has exited: its exit code (null when killed by a signal) and last lines. */
  exited: Promise<{ exitCode: number | null; signal: number | null; lastLines: string[] }>;
}

/** `onLine`: every complete line the trainer prints, without its line ending. */
export function startJob(launch: Launch, jobId: string, onLine: (line: string) => void = () => {}): RunningJob {
  mkdirSync(launch.env.TRAINER_OUTPUT_DIR!, { recursive: true });
  const log = join(launch.jobDir, "output.log");
  writeFileSync(log, "");
  const [file, ...args] = launch.argv;
  const child = pty.spawn(file!, args, { name: "xterm-256color", cols: 400, rows: 50, cwd: launch.jobDir, env: { ...process.env, ...launch.env } as Record<string, string> });
  const lastLines: string[] = [];
  let partial = "";
  child.onData((data) => {
    appendFileSync(log, data);
    const lines = (partial + data).split(/\r?\n/);
    partial = lines.pop() ?? "";
    for (const raw of lines) {
      const line = raw.replace(/\r/g, "");
      lastLines.push(line);
      if (lastLines.length > KEEP_LINES) lastLines.shift();
      onLine(line);
    }
  });
  const exited = new Promise<{ exitCode: number | null; signal: number | null; lastLines: string[] }>((done) =>
    child.onExit(({ exitCode, signal }) => {
      if (partial) {
        lastLines.push(partial.replace(/\r/g, ""));
        onLine(partial.replace(/\r/g, ""));
      }
      done({ exitCode: signal ? null : exitCode, signal: signal || null, lastLines: lastLines.slice(-KEEP_LINES) });
    }),
  );
  let killTimer: NodeJS.Timeout | undefined;
  void exited.then(() => clearTimeout(killTimer));
  return {
    jobId,
    exited,
    stop(graceMs) {
      child.kill("SIGTERM");
      killTimer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      killTimer.unref();
    },
  };
}

/** Appends a command for the trainer (trainer protocol: one JSON line in the control file). */
export function sendCommand(launch: Launch, command: "validation" | "checkpoint" | "stop"): void {
  appendFileSync(launch.env.TRAINER_CONTROL_FILE!, JSON.stringify({ command }) + "\n");
}
