import { closeSync, constants, existsSync, lchownSync, mkdirSync, openSync, readdirSync, rmSync, writeSync } from "node:fs";
import { isAbsolute, join, relative, resolve } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { Assignment } from "./edge-client";
import { fillPlaceholders } from "../../shared/placeholders";
import { SIGNAL_FILE_ENV, type SignalCounters, type SignalledCommand } from "../../shared/trainer-commands";
import type { JobNetwork } from "./egress";
import { descendants, findProgram, isSandboxProcess, sandboxArgv, type SandboxSpec } from "./sandbox";
import { SignalFile } from "./signal-file";
import { keepOutputUntilRead } from "./pty-drain";
import { OutputLines } from "./output-lines";
import { RUNNER_SCRIPTS, simpleTunerArgv, simpleTunerEnv, type SimpleTunerStatus } from "./simpletuner";

/*
 * One assigned job on this box: its directory (`<work_dir>/jobs/<job_id>/`), the trainer's
 * command line built from the environment's options, and the trainer itself under a PTY with
 * CUDA_VISIBLE_DEVICES set to the job's devices. Everything the trainer prints goes to
 * `output.log`; the last lines travel with a failure report. Commands reach it as SimpleTuner's
 * own do: validations and checkpoints through its signal file (signal-file.ts), a stop as
 * signals to its whole process tree (RunningJob.stop), a cancel as SIGKILL (RunningJob.kill).
 */

/** Options the runner itself reads or acts on (the scripts: scripts.ts); they are not passed to the trainer. */
const RUNNER_OPTIONS = new Set(["--trainer", "--trainer_command", "--num_processes", "--accelerate_visible_devices", ...RUNNER_SCRIPTS]);

/** Which kind of trainer a job runs: the runner treats SimpleTuner's events and arguments its own way. */
export type TrainerKind = "simpletuner" | "demo" | "declared" | "raw";
// Built (npm run runner: .build/runner/demo-trainer.mjs beside this bundle) or from source (tests).
const BUILT_DEMO_TRAINER = fileURLToPath(new URL("./demo-trainer.mjs", import.meta.url));
const DEMO_TRAINER = fileURLToPath(new URL("../demo-trainer/main.ts", import.meta.url));
const KEEP_LINES = 50;
// node-pty (a native addon) is loaded with the first trainer: an idle runner does without it (issue 31).
let nodePty: typeof import("node-pty") | undefined;
const pty = () => (nodePty ??= createRequire(import.meta.url)("node-pty") as typeof import("node-pty"));

export interface Launch {
  kind: TrainerKind;
  /** What is spawned: the program inside bubblewrap when sandboxed. */
  argv: string[];
  /** The trainer's own command line. */
  program: string[];
  sandbox: SandboxSpec | null;
  env: Record<string, string>;
  jobDir: string;
}

/** Thrown for a job that cannot be started as configured; the message says what to change. */
export class LaunchError extends Error {}

/** `--name value` pairs from an option map: true as "true", objects as JSON, empty and false flags left out. */
function optionArgs(config: Record<string, unknown>): string[] {
  const args: string[] = [];
  for (const [name, value] of Object.entries(config)) {
    if (!name.startsWith("--") || RUNNER_OPTIONS.has(name) || value === null || value === undefined || value === "" || value === false)
      continue;
    args.push(name, typeof value === "object" ? JSON.stringify(value) : String(value));
  }
  return args;
}

/**
 * What this box may run and how (from the runner's config, README "The runner config file"):
 * its declared trainers, whether raw commands run, and the sandbox in effect.
 */
export interface BoxPolicy {
  trainers: Record<string, string[]>;
  allowRawCommands: boolean;
  /** bubblewrap's path when programs run sandboxed; null when it is missing or the sandbox is off. */
  bwrap: string | null;
  sandbox: "auto" | "required" | "off";
  runAs: { uid: number; gid: number } | null;
  /** Paths hidden from sandboxed programs besides the work directory (the service's data directory). */
  hide: string[];
  /** What stays visible in the sandbox wherever it lives: the runner's installation and the box's declared ones (agent.ts declaredInstallations). */
  visible: string[];
  /** isolated: every sandbox gets a network of its own, reaching out only through the job's gateway (runner/agent/egress.ts). */
  network: "isolated" | "host";
  /** The hosts the job's proxy lets sandboxed programs reach. */
  allowHosts: string[];
  /** SimpleTuner's installation on this box, as checked at start (runner/agent/simpletuner.ts). */
  simpletuner: SimpleTunerStatus;
  path: string;
  passEnv: Record<string, string>;
}

/** A box with the built-in trainers only and no sandbox: for unit tests of the planning. */
export const PLAIN_BOX: BoxPolicy = {
  trainers: {},
  allowRawCommands: false,
  bwrap: null,
  sandbox: "auto",
  runAs: null,
  hide: [],
  visible: [],
  network: "host",
  allowHosts: [],
  simpletuner: { available: false, detail: 'not installed on this box: its runner config names no "simpletuner" installation' },
  path: process.env.PATH ?? "",
  passEnv: {},
};

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

/** Without bubblewrap (sandbox "auto"), only the built-in trainers and declared scripts run. */
const NEEDS_SANDBOX =
  'bubblewrap (bwrap) is not available on this box, so only the built-in trainers (simpletuner, demo) and the box\'s declared scripts run here; install bubblewrap, or an operator sets sandbox "off" in the runner config';

/** The trainer's argv (outside any sandbox) as the environment and the box's config allow it; SimpleTuner's includes its options. */
function trainerArgv(
  config: Record<string, unknown>,
  box: BoxPolicy,
  fill: Record<string, string>,
  numProcesses: number,
): { argv: string[]; kind: TrainerKind } {
  const name = config["--trainer"];
  const command = trainerCommand(config["--trainer_command"]);
  const sandboxed = box.bwrap !== null || box.sandbox === "off";
  if ((name === undefined || name === null || name === "") && command) {
    if (!box.allowRawCommands)
      throw new LaunchError(
        `--trainer_command is not run on this box: its runner config does not set allow_raw_commands; pick one of its trainers with --trainer (${trainerNames(box)})`,
      );
    if (!sandboxed) throw new LaunchError(`--trainer_command is not run: ${NEEDS_SANDBOX}`);
    return { argv: command, kind: "raw" };
  }
  const trainer = typeof name === "string" && name ? name : "simpletuner";
  // tsx by its resolved location: the trainer runs in the job's directory, where a bare
  // "tsx" would not be found.
  if (trainer === "demo")
    return {
      argv: existsSync(BUILT_DEMO_TRAINER)
        ? [process.execPath, BUILT_DEMO_TRAINER]
        : [process.execPath, "--import", import.meta.resolve("tsx"), DEMO_TRAINER],
      kind: "demo",
    };
  if (trainer === "simpletuner") {
    if (!box.simpletuner.available)
      throw new LaunchError(
        `SimpleTuner is not available on this box (${box.simpletuner.detail}); name its installation in the runner config ("simpletuner"), or set "--trainer": "demo" in the environment`,
      );
    return { argv: simpleTunerArgv(box.simpletuner.install, config, numProcesses), kind: "simpletuner" };
  }
  const template = Object.hasOwn(box.trainers, trainer) ? box.trainers[trainer]! : null;
  if (!template) throw new LaunchError(`unknown trainer ${JSON.stringify(trainer)}: this box has ${trainerNames(box)}`);
  if (!sandboxed) throw new LaunchError(`trainer ${JSON.stringify(trainer)} is not run: ${NEEDS_SANDBOX}`);
  return { argv: fillPlaceholders(template, fill), kind: "declared" };
}

const trainerNames = (box: BoxPolicy) => ["simpletuner", "demo", ...Object.keys(box.trainers)].join(", ");

/**
 * What to run for an assignment, and where. `boxGpus`: this box's device indices; a job given
 * the whole worker (a remote worker's assignment has no allocated_gpus) gets the first
 * num_processes of them. `datasets`: the job's dataset folders in the cache (read-only in the
 * sandbox).
 */
export function planLaunch(
  workDir: string,
  job: Assignment,
  boxGpus: number[] = [],
  callbackUrl: string | null = null,
  box: BoxPolicy = PLAIN_BOX,
  datasets: string[] = [],
  net: JobNetwork | null = null,
): Launch {
  const jobDir = join(workDir, "jobs", job.job_id);
  const config = { ...job.config };
  // The trainer's webhooks go to the runner (events in); the job's receivers are the edge's to call.
  if (callbackUrl)
    config["--webhook_config"] = JSON.stringify([
      { webhook_type: "raw", callback_url: callbackUrl, log_level: "info", ssl_no_verify: false },
    ]);
  else delete config["--webhook_config"];
  // The output directory stays inside the job's directory whatever the environment says.
  const output = String(config["--output_dir"] ?? "output");
  const outputDir = resolve(jobDir, output);
  const inside = relative(jobDir, outputDir);
  if (isAbsolute(output) || inside.startsWith("..") || isAbsolute(inside))
    throw new LaunchError(`--output_dir must be a path inside the job's directory, not ${JSON.stringify(output)}`);
  config["--output_dir"] = outputDir;
  const gpus = job.allocated_gpus ?? boxGpus.slice(0, job.num_processes);
  const { argv: base, kind } = trainerArgv(
    config,
    box,
    { num_processes: String(job.num_processes), job_dir: jobDir, output_dir: outputDir },
    job.num_processes,
  );
  if (!findProgram(base[0]!, box.path)) throw new LaunchError(`${base[0]} is not installed on this box (not found on PATH)`);
  const program = kind === "simpletuner" ? base : [...base, ...optionArgs(config)];
  const sandbox: SandboxSpec | null = box.bwrap
    ? {
        bwrap: box.bwrap,
        jobDir,
        readOnly: datasets,
        hide: [workDir, ...box.hide],
        gpus,
        runAs: box.runAs,
        visible: box.visible.length ? box.visible : undefined,
        net: net && { dir: net.dir, listen: net.listen },
      }
    : null;
  return {
    kind,
    argv: sandbox ? sandboxArgv(program, sandbox) : program,
    program,
    sandbox,
    jobDir,
    env: {
      ...box.passEnv,
      ...(kind === "simpletuner" ? simpleTunerEnv(job.job_id) : {}),
      // The whole environment of the trainer: never the runner's own (its token, the service's secrets).
      PATH: box.path,
      HOME: jobDir,
      TERM: "xterm-256color",
      CUDA_VISIBLE_DEVICES: gpus.join(","),
      TRAINER_JOB_ID: job.job_id,
      [SIGNAL_FILE_ENV]: signalFilePath(jobDir, job.attempt),
      TRAINER_OUTPUT_DIR: outputDir,
      ...(callbackUrl ? { TRAINER_CALLBACK_URL: callbackUrl } : {}),
      // Sandboxed in a network of its own: the job's proxy is its way out (to the hosts the box allows).
      ...(sandbox?.net ? net!.env : {}),
    },
  };
}

/** The signal file of one job attempt: a new attempt's trainer starts counting from zero, so it gets a file of its own. */
export function signalFilePath(jobDir: string, attempt: number): string {
  return join(jobDir, `trainer-signal-attempt-${attempt}.json`);
}

const SIGNAL_FILE_NAME = /^trainer-signal-attempt-\d+\.json(\.tmp-.*)?$/;

/** This attempt's signal file, written before the trainer starts (so a missing one is news to it); earlier attempts' files go. */
function openSignalFile(launch: Launch): SignalFile {
  const path = launch.env[SIGNAL_FILE_ENV]!;
  for (const name of readdirSync(launch.jobDir)) {
    if (SIGNAL_FILE_NAME.test(name) && join(launch.jobDir, name) !== path)
      rmSync(join(launch.jobDir, name), { recursive: true, force: true });
  }
  return new SignalFile(path);
}

/** Options of RunningJob.stop. */
export interface StopOptions {
  /** A requested stop (POST /api/training/stop): ask first with SIGINT, as Ctrl-C would. */
  ask?: boolean;
  /** Told of each signal as it is sent. */
  onSignal?: (signal: "SIGINT" | "SIGTERM" | "SIGKILL") => void;
}

export interface RunningJob {
  jobId: string;
  /**
   * Ends the trainer's whole process tree (accelerate launch and the train.py processes under it:
   * SimpleTuner's launcher forwards no signal). Asked (a requested stop, after its checkpoint):
   * SIGINT at once - Python's KeyboardInterrupt, on which SimpleTuner reports `interrupted` and
   * exits 0 - then SIGTERM after half of `graceMs`. Not asked (the runner stopping): SIGTERM at
   * once. Either way, whatever is left after `graceMs` is killed. A later call only hurries a stop
   * under way (not asked after asked: SIGTERM now).
   */
  stop(graceMs: number, options?: StopOptions): void;
  /** SIGKILL for the whole process tree at once (a cancel). */
  kill(): void;
  /** A validation or checkpoint for the trainer: one more in its signal file (throws when the file cannot be written). */
  signal(command: SignalledCommand): SignalCounters;
  /** Resolves when the trainer has exited: its exit code (null when killed by a signal) and last lines. */
  exited: Promise<{ exitCode: number | null; signal: number | null; lastLines: string[] }>;
}

/** `onLine`: every line the trainer prints, as its terminal shows it (a redrawn progress bar once), without its line ending. */
export function startJob(launch: Launch, jobId: string, onLine: (line: string) => void = () => {}): RunningJob {
  mkdirSync(launch.env.TRAINER_OUTPUT_DIR!, { recursive: true });
  // The trainer can replace any name in its directory, with a link to a file of the runner's
  // (root's) choosing: the log is opened once, never by name again, and never through a link.
  const log = join(launch.jobDir, "output.log");
  rmSync(log, { recursive: true, force: true });
  const logFd = openSync(log, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  const signals = openSignalFile(launch);
  if (launch.sandbox?.runAs) chownTree(launch.jobDir, launch.sandbox.runAs);
  const [file, ...args] = launch.argv;
  const child = pty().spawn(file!, args, { name: "xterm-256color", cols: 400, rows: 50, cwd: launch.jobDir, env: launch.env });
  const sandboxed = launch.sandbox !== null;
  const lastLines: string[] = [];
  const lines = new OutputLines((line) => {
    lastLines.push(line);
    if (lastLines.length > KEEP_LINES) lastLines.shift();
    onLine(line);
  });
  const take = (data: string) => {
    writeSync(logFd, data);
    lines.push(data);
  };
  child.onData(take);
  keepOutputUntilRead(child, take);
  let termTimer: NodeJS.Timeout | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  let stopping = false;
  let ended = false;
  const exited = new Promise<{ exitCode: number | null; signal: number | null; lastLines: string[] }>((done) =>
    child.onExit(({ exitCode, signal }) => {
      ended = true;
      clearTimeout(termTimer);
      clearTimeout(killTimer);
      // A stopped trainer's helpers (dataloader workers, an uploader it started) go with it, so
      // the job's GPUs are free when it is reported ended. The sandbox's PID namespace does this
      // by itself; outside it, they are what is left of the trainer's process group.
      if (stopping && !sandboxed) killGroup(child.pid);
      lines.end();
      closeSync(logFd);
      done({ exitCode: signal ? null : exitCode, signal: signal || null, lastLines: lastLines.slice(-KEEP_LINES) });
    }),
  );
  const sent = new Set<string>();
  const send = (signal: "SIGINT" | "SIGTERM" | "SIGKILL", onSignal: StopOptions["onSignal"]) => {
    if (ended || (signal !== "SIGKILL" && sent.has(signal))) return;
    sent.add(signal);
    onSignal?.(signal);
    if (signal === "SIGKILL") killTree(child.pid, sandboxed);
    else signalTrainer(child.pid, sandboxed, signal, signal === "SIGINT" && launch.kind === "simpletuner");
  };
  return {
    jobId,
    exited,
    signal: (command) => signals.bump(command),
    kill() {
      stopping = true;
      send("SIGKILL", undefined);
    },
    stop(graceMs, { ask = false, onSignal } = {}) {
      if (ended) return;
      if (ask && !stopping) {
        send("SIGINT", onSignal);
        termTimer = setTimeout(() => send("SIGTERM", onSignal), graceMs / 2);
        termTimer.unref();
      } else if (!ask) {
        clearTimeout(termTimer);
        send("SIGTERM", onSignal);
      }
      if (!stopping) {
        killTimer = setTimeout(() => send("SIGKILL", onSignal), graceMs);
        killTimer.unref();
      }
      stopping = true;
    },
  };
}

/**
 * A signal for the trainer's whole process tree. Sandboxed, it goes to every process inside
 * bubblewrap: bwrap itself neither forwards signals nor survives SIGTERM, and its end would kill
 * the trainer before it saves. Outside the sandbox, to the trainer's process group, as Ctrl-C in
 * its terminal would: `accelerate launch` forwards nothing, so a signal to it alone would leave
 * train.py running. `spareLauncher` (SimpleTuner's interrupt): only the processes under the
 * launched program - accelerate dies of a SIGINT at once (KeyboardInterrupt in its wait), and its
 * end would take train.py with it while it reports `interrupted` and exits; spared, it sees
 * train.py exit 0 and exits 0 itself.
 */
function signalTrainer(pid: number, sandboxed: boolean, signal: "SIGINT" | "SIGTERM", spareLauncher = false): void {
  let targets: number[];
  if (spareLauncher) {
    const inside = descendants(pid).filter((p) => !isSandboxProcess(p));
    targets = sandboxed ? inside.slice(1) : inside;
  } else targets = sandboxed ? descendants(pid).filter((p) => !isSandboxProcess(p)) : [-pid];
  for (const target of targets) {
    try {
      process.kill(target, signal);
    } catch {} // already gone
  }
}

/**
 * SIGKILL for the trainer's whole process tree: every descendant as /proc shows it now (taken
 * before anything dies, since the dead's children move to init) and, outside the sandbox, its
 * process group. Sandboxed, killing bubblewrap ends its PID namespace and everything in it. The
 * process the runner started goes first: killed, it cannot report its child's death as an exit
 * code of its own (bwrap would exit 137 for a killed trainer).
 */
function killTree(pid: number, sandboxed: boolean): void {
  const tree = descendants(pid);
  for (const target of [pid, ...tree]) {
    try {
      process.kill(target, "SIGKILL");
    } catch {} // already gone
  }
  if (!sandboxed) killGroup(pid);
}

/** SIGKILL for what is left of the process group the trainer leads (the PTY made it a session leader). */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {} // nothing left
}

/** Gives the job's directory to the run_as user, so its trainer can write there; links are changed themselves, never followed. */
function chownTree(dir: string, to: { uid: number; gid: number }): void {
  lchownSync(dir, to.uid, to.gid);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) chownTree(path, to);
    else lchownSync(path, to.uid, to.gid);
  }
}
