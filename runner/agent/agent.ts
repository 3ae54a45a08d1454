import { hostname } from "node:os";
import type { z } from "zod";
import {
  edgeClient,
  refusedForGood,
  type Assignment,
  type FinishBody,
  type HeartbeatAnswer,
  type HeartbeatBody,
  type RegisterBody,
} from "./edge-client";
import type { ServiceClient } from "../../shared/client/client";
import { ServiceError } from "../../shared/client/client";
import { endpoints } from "../../shared/client/endpoints";
import { detectGpus } from "./gpus";
import { hostStats } from "./host";
import { placeholderValues, type ScriptKind } from "../../shared/placeholders";
import { WakeChannel } from "./channel";
import { runScript } from "./scripts";
import { startCallback, type Callback } from "./callback";
import { datasetView, materialise } from "./datasets";
import { mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, join, relative } from "node:path";
import { EventShipper, lineToEvent, outboxPath, replayOutbox } from "./events";
import { LaunchError, planLaunch, startJob, type BoxPolicy, type Launch, type RunningJob, type TrainerKind } from "./job";
import { RunnerConfigError, userIds, type RunnerConfig } from "./config";
import { CALLBACK_PORT, startJobNetwork, type JobNetwork } from "./egress";
import { findProgram, hiddenBy, RUNNER_INSTALL } from "./sandbox";
import { probeSimpleTuner } from "./simpletuner";
import { TrainerEvents, type TrainerEvent } from "./trainer-events";
import { fitReport, refusalReport, reportLines, shortenedReport } from "./report";
import type { TrainerAvailability } from "../../shared/schemas/workers";

/*
 * The runner agent on a GPU box: registers the box's inventory with the edge, heartbeats, and
 * runs exactly the jobs the Scheduler has assigned to it. The edge is the source of truth: a
 * job assigned and not running here is started; a job running here and no longer assigned
 * (cancelled, or given away while this box was offline) is stopped; a job that ends is reported.
 */

/** The runner's configuration (runner/agent/config.ts), how to log, and the nvidia-smi to ask. */
export type RunnerOptions = RunnerConfig & { nvidiaSmi?: string; log: (line: string) => void };

/**
 * What the box runs, with the sandbox resolved: bubblewrap found (or not) where the config says.
 * Throws RunnerConfigError when the box cannot meet its config: a required sandbox without
 * bubblewrap, run_as without root or without bubblewrap.
 */
export function boxPolicy(config: RunnerConfig, log: (line: string) => void): BoxPolicy {
  const found = config.sandbox === "off" ? null : findProgram(config.bwrap, config.path);
  // A runner as root runs trainers as nobody unless its config names a user: root in a sandbox
  // is still root (the job directory's owner, ptrace of its own tree, writable /proc/sys?).
  let runAs = config.runAs;
  if (!runAs && found && process.getuid?.() === 0) {
    try {
      runAs = userIds("nobody");
    } catch {
      runAs = { uid: 65534, gid: 65534 };
    }
  }
  const visible = found ? declaredInstallations(config) : [];
  // Changing user takes root; bubblewrap then keeps only what setpriv needs for the switch.
  if (config.runAs && process.getuid?.() !== 0)
    throw new RunnerConfigError(`runner config ${config.configFile ?? "(none)"}: run_as needs the runner to run as root`);
  if (config.runAs && !found)
    throw new RunnerConfigError(`runner config ${config.configFile ?? "(none)"}: run_as needs the sandbox (bubblewrap) on this box`);
  if (config.sandbox === "off")
    log("WARNING: sandbox is off in the runner config: trainers and scripts run with this runner's rights and see its files");
  else if (!found && config.sandbox === "required")
    throw new RunnerConfigError(
      `runner config ${config.configFile ?? "(none)"}: sandbox is "required" but bubblewrap (${config.bwrap}) is not installed on this box`,
    );
  else if (!found)
    log(
      `WARNING: bubblewrap (${config.bwrap}) is not installed on this box: only the built-in trainers (simpletuner, demo) and the declared scripts will run, without a sandbox; install bubblewrap (apt-get install bubblewrap)`,
    );
  else
    log(
      `trainers and scripts run sandboxed by ${found}${runAs ? ` as uid ${runAs.uid}${config.runAs ? "" : " (nobody: run_as is unset and the runner is root)"}` : ""}, ${
        config.network === "isolated"
          ? `each in a network of its own${config.allowHosts.length ? ` (reaching ${config.allowHosts.join(", ")})` : ""}`
          : "on the box's network (network: host)"
      }`,
    );
  return {
    trainers: config.trainers,
    allowRawCommands: config.allowRawCommands,
    bwrap: found,
    sandbox: config.sandbox,
    runAs,
    hide: config.hide,
    visible: [...RUNNER_INSTALL, ...visible],
    network: config.network,
    allowHosts: config.allowHosts,
    // Checked when the runner starts (Runner.start): the probe imports SimpleTuner, which takes a while.
    simpletuner: { available: false, detail: "not checked yet" },
    path: config.path,
    passEnv: config.passEnv,
  };
}

/**
 * The installations the box declares, which its sandbox keeps visible (read-only) wherever they
 * live - a Python under the home the sandbox hides (pyenv), say: each declared trainer's program
 * and SimpleTuner's interpreter, by the prefix of where its link leads (`<prefix>/bin/python`),
 * and SimpleTuner's virtual environment. Refuses, at start, one that cannot be shown without
 * showing what must stay hidden (a program in the work directory, a secrets folder, or right in
 * the hidden home), naming the path.
 */
function declaredInstallations(config: RunnerConfig): string[] {
  const hide = [config.workDir, ...config.hide];
  const visible: string[] = [];
  const within = (parent: string, child: string) => {
    const rel = relative(parent, child);
    return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
  };
  const keep = (what: string, path: string | null, prefixOf = true) => {
    if (!path || !isAbsolute(path)) return;
    let real = path;
    try {
      real = realpathSync(path);
    } catch {}
    for (const candidate of new Set([path, real])) {
      if (!hiddenBy(candidate, hide, [...RUNNER_INSTALL, ...visible])) continue;
      const prefix = prefixOf ? dirname(dirname(candidate)) : candidate;
      // Shown, it must not show anything hidden: no hidden path at or inside it, and not inside the work directory.
      if (prefix === "/" || hide.some((h) => within(prefix, h)) || within(config.workDir, prefix) || within("/tmp", prefix))
        throw new RunnerConfigError(
          `runner config ${config.configFile ?? "(none)"}: ${what} ${path} lies under ${hiddenBy(candidate, hide)}, which the sandbox hides from trainers (the work directory, /tmp, the home directory and the secrets it hides); install it elsewhere`,
        );
      visible.push(prefix);
    }
  };
  for (const [name, argv] of Object.entries(config.trainers)) keep(`trainers.${name}`, findProgram(argv[0]!, config.path));
  for (const script of config.scripts) keep("the script", script.includes("*") ? script.slice(0, script.indexOf("*")) : script);
  if (config.simpletuner) {
    keep("simpletuner", config.simpletuner, false);
    keep("simpletuner's Python", join(config.simpletuner, "bin", "python"));
  }
  return [...new Set(visible)];
}

/**
 * What this box can run, for the edge to give it only such jobs: SimpleTuner as found at start,
 * the demo trainer, and the config's own trainers (sandboxed, or with the sandbox off).
 */
export function trainerAvailability(box: BoxPolicy): z.input<typeof TrainerAvailability>[] {
  const sandboxed = box.bwrap !== null || box.sandbox === "off";
  const st = box.simpletuner;
  return [
    st.available
      ? { name: "simpletuner", available: true, version: st.install.version }
      : { name: "simpletuner", available: false, detail: st.detail.slice(0, 500) },
    { name: "demo", available: true },
    ...Object.keys(box.trainers).map((name) =>
      sandboxed ? { name, available: true } : { name, available: false, detail: "bubblewrap is not installed on this box (its sandbox)" },
    ),
  ];
}

interface Report {
  jobId: string;
  body: FinishBody;
  /** How far it was shortened after refusals: 0 as made, 1 without its lines, 2 the refusal as its reason. */
  shortened: 0 | 1 | 2;
}

/** One job's trainer on this box, from its start to its report. */
interface ActiveJob {
  attempt: number;
  /** The GPUs its trainer holds ([] for a CPU job). */
  gpus: number[];
  /** Stopped by the runner itself because the edge could not be reached (fencing). */
  fenced: boolean;
  running: RunningJob;
  launch: Launch;
  /** What its trainer has said so far (started, step, checkpoints, how it ended). */
  events: TrainerEvents;
  unassigned: boolean;
  stopAsked: boolean;
  /** A stop waiting for the checkpoint it asked for: then, or at the deadline, the trainer is interrupted. */
  stopWait: { checkpoints: number; timer: NodeJS.Timeout; interrupt: () => void } | null;
  shipper: EventShipper;
  checkpoints: string;
  settled: Promise<void>;
}

/**
 * Exit codes and signals of a trainer that ended because it was told to: 130, 137 and 143 are how
 * a process (Python on KeyboardInterrupt, a wrapper such as bwrap or a shell) reports SIGINT,
 * SIGKILL and SIGTERM.
 */
const STOP_EXIT_CODES = new Set([0, 130, 137, 143]);
const STOP_SIGNALS = new Set([2, 9, 15]);

/**
 * How a job ends after a requested stop (POST /api/training/stop): completed - the run ended as
 * its user asked - when the trainer exited cleanly or of the signals the runner sent it; failed
 * when it exited with an error of its own (it crashed while stopping: a final save failed).
 */
export function stoppedOutcome(exitCode: number | null, signal: number | null): "completed" | "failed" {
  return (signal !== null && STOP_SIGNALS.has(signal)) || (exitCode !== null && STOP_EXIT_CODES.has(exitCode)) ? "completed" : "failed";
}

export class Runner {
  private readonly edge: ServiceClient;
  private readonly jobs = new Map<string, ActiveJob>();
  /** Jobs whose trainer ended on this box, with the attempt: never launched again in that attempt. */
  private readonly ended = new Map<string, number>();
  /** Commands handed to trainers, acknowledged with the next ask for work. */
  private acks: number[] = [];
  private readonly handled = new Set<number>();
  /** Jobs whose datasets are being fetched: assigned, not yet running. */
  private readonly launching = new Set<string>();
  private readonly reports: Report[] = [];
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;
  private stoppingAt = 0;
  /** Outbox files of an earlier run not yet delivered (the edge was away): sent again on each ask for work. */
  private outboxLeft = 0;
  private ticking: Promise<void> = Promise.resolve();
  private inTick = false;
  private wakeAgain = false;
  private channel: WakeChannel | null = null;
  private gpuIndices: number[] = [];
  private readonly box: BoxPolicy;
  /** When the last heartbeat (or registration) that the edge answered was sent: the edge has heard from this box since. */
  private lastContact = Date.now();
  /** The edge's heartbeat timeout and interval, as its last answer said. */
  private heartbeatTimeoutMs = 90_000;
  private heartbeatIntervalMs = 15_000;
  private fenceTimer: NodeJS.Timeout | undefined;

  /** Throws RunnerConfigError when the box cannot meet its config (see boxPolicy). */
  constructor(private readonly options: RunnerOptions) {
    this.edge = edgeClient(options.url, options.token);
    this.box = boxPolicy(options, options.log);
  }

  /** Registers, settles what a previous run left behind, and starts the loop. */
  async start(): Promise<HeartbeatAnswer> {
    const gpus = await detectGpus(this.options.nvidiaSmi);
    this.gpuIndices = gpus.map((g) => g.index);
    if (this.options.simpletuner) this.options.log(`checking SimpleTuner at ${this.options.simpletuner}`);
    this.box.simpletuner = await probeSimpleTuner(this.options.simpletuner);
    if (this.box.simpletuner.available)
      this.options.log(
        `SimpleTuner ${this.box.simpletuner.install.version ?? "(version unknown)"}: ${this.box.simpletuner.install.trainScript}`,
      );
    else if (this.options.simpletuner) this.options.log(`WARNING: SimpleTuner is not available: ${this.box.simpletuner.detail}`);
    const register: RegisterBody = {
      role: this.options.role,
      labels: this.options.labels,
      gpus,
      hostname: hostname(),
      host_stats: await hostStats(),
      trainers: trainerAvailability(this.box),
    };
    const sent = Date.now();
    const answer = await this.edge.call(endpoints.workerRegister, { body: register });
    this.heard(sent, answer);
    this.options.log(
      `registered as worker ${answer.worker_id} (${this.options.role}) with ${gpus.length} GPU(s): ${gpus.map((g) => `${g.index} ${g.name}`).join(", ") || "none"}`,
    );
    // Reports a previous run could not deliver (the edge was away when its trainers ended) go first.
    this.reports.push(...readReports(this.reportsFile()));
    // Jobs assigned before this runner started were running under a runner that is gone; their
    // trainers died with it. They go back to the queue (or fail at max_attempts) rather than
    // being left "running" forever; a trainer that resumes from its checkpoints picks up there.
    for (const job of answer.assignments) {
      this.ended.set(job.job_id, job.attempt);
      if (this.reports.some((r) => r.jobId === job.job_id)) continue; // it ended before the restart: its report says how
      this.report({
        jobId: job.job_id,
        body: { status: "interrupted", error: `the runner restarted while the job was running (attempt ${job.attempt})` },
        shortened: 0,
      });
    }
    // The events its trainers printed while the edge was away, then how they ended.
    this.outboxLeft = await replayOutbox(this.edge, this.options.workDir, this.options.log);
    await this.flushReports();
    this.schedule(0);
    // The edge wakes this runner through the channel when work is waiting; the regular asks
    // (pollMs) are the fallback and the heartbeat.
    this.channel = new WakeChannel(this.edge, () => this.wake(), this.options.log);
    this.channel.open();
    // The fence is watched on a timer of its own: a heartbeat to an edge cut off may hang for seconds.
    this.fenceTimer = setInterval(() => this.checkFence(), 500);
    this.fenceTimer.unref();
    return answer;
  }

  /** The edge answered a heartbeat sent at `sent`: contact, and its current timeout and interval. */
  private heard(sent: number, answer: HeartbeatAnswer): void {
    this.lastContact = Math.max(this.lastContact, sent);
    this.heartbeatTimeoutMs = answer.heartbeat_timeout_seconds * 1000;
    this.heartbeatIntervalMs = answer.heartbeat_interval_seconds * 1000;
  }

  /**
   * How long this box may go without reaching the edge before it stops its trainers itself: the
   * edge's heartbeat timeout less a margin (a quarter of it, at least 4 s, at most half), counted
   * from when the last answered heartbeat was sent - before the edge received it, so the box always
   * stops first. By the timeout every trainer is dead, and only then may the edge give the job to
   * another box: a job never trains in two places at once.
   */
  private fenceAfterMs(): number {
    const timeout = this.heartbeatTimeoutMs;
    return Math.round(timeout - Math.min(timeout / 2, Math.max(4_000, timeout / 4)));
  }

  /**
   * Heartbeats come at least three times per fence period (and per the edge's interval), whatever
   * `pollMs` says: a box that merely polls rarely must not fence itself.
   */
  private heartbeatPeriodMs(): number {
    return Math.round(Math.max(200, Math.min(this.options.pollMs, this.heartbeatIntervalMs, this.fenceAfterMs() / 3)));
  }

  /**
   * Fencing: past fenceAfterMs without contact, each trainer is stopped as a requested stop is -
   * a checkpoint first where there is time, then the signals - all within the margin, so it is dead
   * by the time the edge may run its job elsewhere. Its job is reported interrupted when the edge
   * is back (retried there, or already retried).
   */
  private checkFence(): void {
    if (this.stopping) return;
    const silent = Date.now() - this.lastContact;
    if (silent < this.fenceAfterMs()) return;
    for (const [jobId, job] of this.jobs) {
      if (job.unassigned || job.fenced) continue;
      job.fenced = true;
      const left = this.lastContact + this.heartbeatTimeoutMs - Date.now() - 500;
      this.options.log(
        `job ${jobId}: the edge has not been reached for ${Math.round(silent / 1000)} s (its heartbeat timeout is ${this.heartbeatTimeoutMs / 1000} s); stopping the trainer so the job never runs in two places`,
      );
      job.shipper.push({
        type: "training.fenced",
        level: "warning",
        title: `The runner lost the edge for ${Math.round(silent / 1000)} s and stopped this trainer (it would be given to another box at ${this.heartbeatTimeoutMs / 1000} s)`,
        data: { silent_seconds: Math.round(silent / 1000), heartbeat_timeout_seconds: this.heartbeatTimeoutMs / 1000 },
      });
      this.stopTrainer(jobId, job, {
        checkpointWaitMs: Math.max(0, Math.min(this.options.stopGraceSeconds * 1000, left / 2)),
        graceMs: Math.max(200, left / 2),
      });
      // Whatever stop was already under way (a user's, with its longer grace): dead by the deadline.
      setTimeout(() => job.running.kill(), Math.max(0, left)).unref();
    }
  }

  private schedule(ms: number): void {
    if (this.stopping) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.inTick = true;
      this.ticking = this.tick().finally(() => {
        this.inTick = false;
        if (this.wakeAgain) {
          this.wakeAgain = false;
          this.schedule(0);
        } else this.schedule(this.heartbeatPeriodMs());
      });
    }, ms);
  }

  /** Asks for work now: at once, or right after the ask in progress. */
  private wake(): void {
    if (this.inTick) this.wakeAgain = true;
    else this.schedule(0);
  }

  private async tick(): Promise<void> {
    try {
      if (this.outboxLeft) {
        const running = new Set([...this.jobs].map(([id, job]) => `${id}#${job.attempt}`));
        this.outboxLeft = await replayOutbox(this.edge, this.options.workDir, this.options.log, running);
      }
      await this.flushReports();
      const acks = this.acks;
      const running = [...this.jobs].map(([job_id, job]) => ({ job_id, attempt: job.attempt }));
      const heartbeat: HeartbeatBody = { host_stats: await hostStats(), acked_commands: acks, running };
      const sent = Date.now();
      // Answered well within a fence period, or counted as not answered.
      const timeoutMs = Math.round(Math.max(1000, Math.min(10_000, this.fenceAfterMs() / 3)));
      const answer = await this.edge.call(endpoints.workerHeartbeat, { body: heartbeat }, { timeoutMs });
      this.heard(sent, answer);
      this.acks = this.acks.filter((id) => !acks.includes(id));
      for (const id of acks) this.handled.delete(id); // acknowledged: the edge will not send it again
      this.reconcile(answer.assignments);
      this.obey(answer.commands);
      for (const job of this.jobs.values()) this.reportCheckpoints(job);
    } catch (error) {
      if (error instanceof ServiceError && error.status === 401) {
        this.options.log(`the edge refused this runner's token (${error.detail}); stopping`);
        void this.stop();
        return;
      }
      this.options.log(`could not reach the edge: ${(error as Error).message}; retrying`);
    }
  }

  private reconcile(assignments: Assignment[]): void {
    const assigned = new Map(assignments.map((a) => [a.job_id, a.attempt]));
    for (const job of assignments) {
      // A job whose trainer ended here is reported, not run again: a new attempt is the edge's to make.
      if (this.ended.get(job.job_id) === job.attempt) continue;
      if (this.jobs.has(job.job_id) || this.launching.has(job.job_id) || this.reports.some((r) => r.jobId === job.job_id)) continue;
      // Nothing starts on a GPU (on a remote worker: at all) until every trainer that had it has exited.
      const busy = this.holdersOf(job);
      if (busy.length) {
        this.options.log(`job ${job.job_id} waits for ${busy.join(", ")} to exit before it starts`);
        continue;
      }
      this.launch(job);
    }
    for (const jobId of this.ended.keys()) if (!assigned.has(jobId)) this.ended.delete(jobId);
    for (const [jobId, job] of this.jobs) {
      // A trainer of an older attempt is never taken for the newer one: it goes, and the new one starts after it.
      if (assigned.get(jobId) === job.attempt || job.unassigned) continue;
      // Cancelled, or given to another box: its trainer must not go on a moment longer.
      job.unassigned = true;
      this.options.log(`job ${jobId} is no longer assigned to this box; killing its trainer`);
      job.running.kill();
    }
  }

  /** The trainers still alive on the GPUs `job` would take (on a remote worker, the whole box), its own older attempt included. */
  private holdersOf(job: Assignment): string[] {
    const wants = job.allocated_gpus ?? this.gpuIndices;
    const holders: string[] = [];
    for (const [jobId, active] of this.jobs) {
      const overlaps = job.allocated_gpus === null || active.gpus.some((g) => wants.includes(g));
      if (jobId === job.job_id || overlaps) holders.push(`${jobId} (attempt ${active.attempt})`);
    }
    return holders;
  }

  private rescan(jobId: string): void {
    const job = this.jobs.get(jobId);
    if (job) this.reportCheckpoints(job);
  }

  /**
   * The job's output directory as it is (checkpoint-<step> folders), sent as a checkpoints.listed
   * event whenever it changed: what POST /api/training/checkpoints shows, for any trainer.
   */
  private reportCheckpoints(job: Pick<ActiveJob, "launch" | "shipper" | "checkpoints">): void {
    const dir = job.launch.env.TRAINER_OUTPUT_DIR!;
    let names: string[];
    try {
      names = readdirSync(dir).filter((n) => /^checkpoint-\d+$/.test(n));
    } catch {
      names = [];
    }
    const checkpoints = names
      .map((name) => ({
        name,
        path: join(dir, name),
        step: Number(name.slice("checkpoint-".length)),
        modified: statSync(join(dir, name)).mtime.toISOString(),
      }))
      .sort((a, b) => a.step - b.step);
    const signature = JSON.stringify(checkpoints.map((c) => [c.name, c.modified]));
    if (signature === job.checkpoints) return;
    job.checkpoints = signature;
    job.shipper.push({
      type: "checkpoints.listed",
      title: `${checkpoints.length} checkpoint(s) in the output directory`,
      data: { output_dir: dir, checkpoints },
    });
  }

  /**
   * Hands each new command to its job's trainer (trainer protocol): a validation or checkpoint as
   * one more in its signal file; a stop as SIGINT, then SIGTERM, then the process tree killed.
   */
  private obey(commands: HeartbeatAnswer["commands"]): void {
    for (const c of commands) {
      // Its trainer is not started yet (datasets coming): not acknowledged, so the edge sends it
      // again with a later answer, when there is a trainer to hand it to.
      if (this.launching.has(c.job_id) && !this.jobs.has(c.job_id)) continue;
      if (!this.handled.has(c.id)) {
        this.handled.add(c.id);
        const job = this.jobs.get(c.job_id);
        if (job && !job.unassigned) {
          this.options.log(`job ${c.job_id}: ${c.command} requested`);
          if (c.command === "stop") this.requestStop(c.job_id, job);
          else {
            try {
              job.running.signal(c.command);
            } catch (error) {
              // The file is in the trainer's directory: one it made unwritable is its own loss.
              this.options.log(`job ${c.job_id}: could not write the trainer's signal file (${(error as Error).message})`);
              job.shipper.push({
                type: "command.undelivered",
                level: "warning",
                title: `The ${c.command} request could not be handed to the trainer: its signal file cannot be written`,
                data: { command: c.command },
              });
            }
          }
        }
      }
      this.acks.push(c.id);
    }
  }

  /**
   * A requested stop that keeps the work: a checkpoint is asked for through the signal file and
   * awaited (at most the grace period), then the trainer is interrupted (SIGINT), then SIGTERM,
   * then its tree killed; each step is a job event. A trainer that has not begun training yet has
   * nothing to save and is interrupted at once.
   */
  private requestStop(jobId: string, job: ActiveJob): void {
    if (job.stopAsked) return;
    job.stopAsked = true;
    const grace = this.options.stopGraceSeconds * 1000;
    this.stopTrainer(jobId, job, { checkpointWaitMs: grace, graceMs: grace });
  }

  /** The stop's sequence (requestStop), bounded: the checkpoint awaited at most `checkpointWaitMs`, the signals within `graceMs`. */
  private stopTrainer(jobId: string, job: ActiveJob, bounds: { checkpointWaitMs: number; graceMs: number }): void {
    const grace = bounds.graceMs;
    const interrupt = () => {
      if (job.stopWait) clearTimeout(job.stopWait.timer);
      job.stopWait = null;
      job.running.stop(grace, {
        ask: true,
        onSignal: (signal) => {
          if (signal !== "SIGINT")
            this.options.log(
              `job ${jobId}: the trainer has not stopped yet; ${signal === "SIGTERM" ? "sending SIGTERM" : "killing its processes (SIGKILL)"}`,
            );
          job.shipper.push(STOP_EVENTS[signal]);
        },
      });
    };
    if (!job.events.started || job.events.end !== null) {
      // Nothing to save yet, and an interrupt while Python is still importing would end it with a
      // traceback: it is terminated (SIGTERM to its whole tree, SIGKILL after the grace period).
      job.shipper.push({
        type: "training.stop_requested",
        title: "Stop requested: the trainer has not begun training, so it is stopped without a checkpoint (SIGTERM)",
        data: { checkpoint: false, signal: "SIGTERM" },
      });
      job.running.stop(grace, { onSignal: (signal) => signal === "SIGKILL" && job.shipper.push(STOP_EVENTS.SIGKILL) });
      return;
    }
    if (job.stopWait) return; // a checkpoint is awaited already
    try {
      job.running.signal("checkpoint");
    } catch (error) {
      job.shipper.push({
        type: "training.stop_requested",
        title: `Stop requested: no checkpoint could be asked for (its signal file cannot be written: ${(error as Error).message}); stopping it`,
        level: "warning",
        data: { checkpoint: false },
      });
      interrupt();
      return;
    }
    const waitSeconds = Math.round(bounds.checkpointWaitMs / 100) / 10;
    job.shipper.push({
      type: "training.stop_requested",
      title: "Stop requested: the trainer saves a checkpoint after its current step, then stops",
      data: { checkpoint: true, wait_seconds: waitSeconds },
    });
    const timer = setTimeout(() => {
      job.shipper.push({
        type: "training.stop_checkpoint_missed",
        level: "warning",
        title: `No checkpoint within ${waitSeconds} s of the stop request; stopping the trainer without it`,
      });
      interrupt();
    }, bounds.checkpointWaitMs);
    timer.unref();
    job.stopWait = { checkpoints: job.events.checkpoints + 1, timer, interrupt };
  }

  private launch(job: Assignment): void {
    this.launching.add(job.job_id);
    void this.prepareAndStart(job).finally(() => this.launching.delete(job.job_id));
  }

  /**
   * The storage endpoint's credentials for a job's trainer, as TRAINER_STORAGE_* variables (not
   * AWS_*: a trainer may use its own AWS credentials for other buckets). A job starts without
   * them, with a log line, when the edge cannot give them: uploading is the trainer's choice.
   */
  private async storageEnv(jobId: string): Promise<Record<string, string>> {
    try {
      const creds = await this.edge.call(endpoints.workerStorageCredentials, { params: { job_id: jobId } });
      if (creds.secret_access_key === null) return {};
      return {
        TRAINER_STORAGE_ENDPOINT_URL: creds.endpoint_url,
        TRAINER_STORAGE_BUCKET: creds.bucket,
        TRAINER_STORAGE_REGION: creds.region,
        TRAINER_STORAGE_ACCESS_KEY_ID: creds.access_key_id,
        TRAINER_STORAGE_SECRET_ACCESS_KEY: creds.secret_access_key,
      };
    } catch (error) {
      this.options.log(`job ${jobId}: no storage credentials for the trainer (${(error as Error).message})`);
      return {};
    }
  }

  /**
   * Brings the job's datasets into the cache, gives the attempt its own view of each, writes its
   * files (`<job dir>/service/`: nothing a trainer loads by itself from its working directory),
   * then starts its trainer.
   */
  private async prepareAndStart(job: Assignment): Promise<void> {
    let running: RunningJob;
    let launch!: Launch;
    let callback: Callback | null = null;
    let net: JobNetwork | null = null;
    const scripts: Promise<void>[] = [];
    const shipper = new EventShipper(
      this.edge,
      job.job_id,
      job.attempt,
      500,
      this.options.log,
      outboxPath(this.options.workDir, job.job_id, job.attempt),
    );
    let entry: ActiveJob | null = null;
    let events = new TrainerEvents();
    try {
      const jobDir = join(this.options.workDir, "jobs", job.job_id);
      // What a previous attempt's trainer left where the runner (maybe root) writes, or where
      // SimpleTuner looks by itself (config/config.json, config/config.env), goes: a link to
      // elsewhere would be written through, a config would win over the job's options.
      for (const name of ["config", "service"]) rmSync(join(jobDir, name), { recursive: true, force: true });
      mkdirSync(join(jobDir, "service"), { recursive: true });
      if (this.box.sandbox === "off")
        shipper.push({
          type: "sandbox.off",
          level: "warning",
          title: 'This box runs trainers and scripts without a sandbox (sandbox "off" in its runner config)',
        });
      const datasets: string[] = [];
      const dataloader = await this.prepareDatasets(job, jobDir, shipper, datasets);
      const config = { ...job.config };
      if (dataloader) {
        const file = join(jobDir, "service", "multidatabackend.json");
        writeFileSync(file, JSON.stringify(dataloader, null, 2));
        config["--data_backend_config"] = file;
      }
      const storage = await this.storageEnv(job.job_id);
      // Sandboxed in a network of its own, the trainer reaches out only through the job's gateway.
      if (this.box.bwrap && this.box.network === "isolated")
        net = await startJobNetwork({
          allowHosts: this.box.allowHosts,
          edgeUrls: [this.options.url, ...(storage.TRAINER_STORAGE_ENDPOINT_URL ? [storage.TRAINER_STORAGE_ENDPOINT_URL] : [])],
          refused: (target, why) =>
            shipper.push({
              type: "network.refused",
              level: "warning",
              title: `The trainer could not reach ${target}: ${why}`,
              data: { target, reason: why },
            }),
        });
      callback = await startCallback((event) => onEvent(event), net && { socket: net.callbackSocket, port: CALLBACK_PORT });
      launch = planLaunch(this.options.workDir, { ...job, config }, this.gpuIndices, callback.url, this.box, datasets, net);
      events = new TrainerEvents({ simpleTuner: launch.kind === "simpletuner" });
      Object.assign(launch.env, storage);
      // The merged configuration as the trainer gets it, for reference.
      writeFileSync(join(jobDir, "service", "options.json"), JSON.stringify(config, null, 2));
      running = startJob(launch, job.job_id, (line) => {
        const event = lineToEvent(line);
        if (event) onEvent(event);
      });
    } catch (error) {
      const why = error instanceof LaunchError ? error.message : `could not start the trainer: ${(error as Error).message}`;
      this.options.log(`job ${job.job_id}: ${why}`);
      await callback?.close();
      await net?.close();
      await shipper.drain(Infinity, () => this.gaveUp());
      this.ended.set(job.job_id, job.attempt);
      this.report({ jobId: job.job_id, body: fitReport({ status: "failed", error: why }), shortened: 0 });
      void this.flushReports();
      return;
    }
    // Every event, from stdout or from the webhook callback: translated, shipped, and acted on.
    function onEvent(raw: TrainerEvent): void {
      for (const event of events.translate(raw)) {
        shipper.push(event);
        if (entry) react(entry, event);
      }
    }
    const react = (active: ActiveJob, event: TrainerEvent) => {
      if (event.type === "checkpoint.saved") {
        this.rescan(job.job_id);
        if (active.stopWait && active.events.checkpoints >= active.stopWait.checkpoints) active.stopWait.interrupt();
      }
      for (const script of scriptsFor(job.config, event, launch.kind, launch.env.TRAINER_OUTPUT_DIR!, latestCheckpoint(active)))
        scripts.push(
          runScript(
            script.kind,
            script.command,
            placeholderValues(script.kind, job.config, script.event),
            { cwd: launch.jobDir, env: launch.env, allowed: this.options.scripts, sandbox: launch.sandbox },
            (e) => shipper.push(e),
          ),
        );
    };
    this.options.log(`job ${job.job_id} started on GPUs [${launch.env.CUDA_VISIBLE_DEVICES!.split(",").filter(Boolean).join(", ")}]`);
    const active: ActiveJob = {
      attempt: job.attempt,
      gpus: launch.env.CUDA_VISIBLE_DEVICES!.split(",").filter(Boolean).map(Number),
      fenced: false,
      running,
      launch,
      events,
      unassigned: false,
      stopAsked: false,
      stopWait: null,
      shipper,
      checkpoints: "",
      settled: Promise.resolve(),
    };
    entry = active;
    this.jobs.set(job.job_id, active);
    active.settled = running.exited.then(async ({ exitCode, signal, lastLines }) => {
      // Ended by itself (before this runner began stopping) or by the runner's stop: only the first is a report to keep.
      const endedByStop = this.stopping;
      this.options.log(`job ${job.job_id} ended: ${signal ? `signal ${signal}` : `exit code ${exitCode}`}`);
      if (active.stopWait) clearTimeout(active.stopWait.timer);
      this.ended.set(job.job_id, job.attempt);
      // Scripts still running get a minute (less when the runner is stopping); then every event
      // reaches the edge before the job is reported ended.
      await Promise.race([Promise.allSettled(scripts), new Promise((r) => setTimeout(r, this.stopping ? 5_000 : 60_000).unref())]);
      this.reportCheckpoints(active);
      await callback?.close();
      await net?.close();
      // Every event reaches the edge before the job is reported ended, however long the edge is
      // away; a runner stopping keeps what is left in the outbox for its next start.
      await shipper.drain(Infinity, () => this.gaveUp());
      this.jobs.delete(job.job_id);
      // A job taken away from this box has already ended on the edge; there is nothing to say. One
      // the runner's own stop ended goes back to the queue at its next start (see start()).
      if (active.unassigned || endedByStop) return;
      // Fenced: it goes back to the queue (the edge may have done so already: then 409, dropped).
      const body = active.fenced
        ? {
            status: "interrupted" as const,
            error: "its runner could not reach the edge and stopped it (fencing), so that it never runs in two places",
          }
        : endReport(active, exitCode, signal, lastLines);
      this.report({ jobId: job.job_id, body: fitReport(body), shortened: 0 });
      void this.flushReports();
    });
  }

  /**
   * The job's dataloader with each `datasets/...` folder brought into the cache and a view of it
   * made for this attempt (datasetView), the entry pointed at the view; null when the environment
   * has no datasets. A dataset not uploaded yet is reported (dataset.missing) and left as it is: a
   * trainer that needs it will say so. `cacheDirs` gets the cache folders the views link into
   * (read-only in the sandbox).
   */
  private async prepareDatasets(
    job: Assignment,
    jobDir: string,
    shipper: EventShipper,
    cacheDirs: string[],
  ): Promise<Record<string, unknown>[] | null> {
    if (!job.dataloader?.length) return null;
    const out: Record<string, unknown>[] = [];
    const views = new Map<string, string>();
    rmSync(join(jobDir, "datasets"), { recursive: true, force: true });
    for (const entry of job.dataloader) {
      const dir = entry.instance_data_dir;
      if (typeof dir !== "string" || !dir.startsWith("datasets/")) {
        out.push(entry);
        continue;
      }
      let view = views.get(dir);
      if (!view) {
        const got = await materialise(this.edge, join(this.options.workDir, "cache"), job.job_id, dir);
        if (!got) {
          shipper.push({ type: "dataset.missing", title: `Dataset ${dir} has no files`, data: { path: dir } });
          out.push(entry);
          continue;
        }
        view = datasetView(join(jobDir, "datasets", `${views.size}-${got.path.split("/").pop()}`), got);
        views.set(dir, view);
        cacheDirs.push(got.localDir);
        const { names: _names, ...summary } = got;
        shipper.push({
          type: "dataset.ready",
          title: `Dataset ${dir}: ${got.files} file(s), ${got.downloaded} downloaded, ${got.reused} from the cache`,
          data: { ...summary, view },
        });
      }
      out.push({ ...entry, instance_data_dir: view });
    }
    return out;
  }

  /**
   * Sends the reports not yet accepted. One the edge answers 404 or 409 (already settled) is
   * dropped; one it refuses otherwise is never dropped silently: it goes again without its lines,
   * then as a failure naming the refusal, so the job always ends. A failure to reach the edge (or
   * 5xx, 408, 429) keeps it for the next tick.
   */
  private async flushReports(): Promise<void> {
    reports: for (const report of [...this.reports]) {
      for (;;) {
        try {
          await this.edge.call(endpoints.workerJobFinish, { params: { job_id: report.jobId }, body: report.body });
        } catch (error) {
          if (!(error instanceof ServiceError) || !refusedForGood(error.status)) continue reports; // kept for the next tick
          if (error.status !== 404 && error.status !== 409 && report.shortened < 2) {
            const refusal = `${error.status} ${error.detail}`;
            this.options.log(`job ${report.jobId}: the edge refused its end report (${refusal}); sending a shorter one`);
            report.body = report.shortened === 0 ? shortenedReport(report.body, refusal) : refusalReport(refusal);
            report.shortened++;
            continue;
          }
          this.options.log(`job ${report.jobId}: the edge did not take the report (${error.detail})`);
        }
        break;
      }
      this.reports.splice(this.reports.indexOf(report), 1);
      this.saveReports();
    }
  }

  /** Where the reports not yet delivered are kept over a restart. */
  private reportsFile(): string {
    return join(this.options.workDir, "reports.json");
  }

  /** A job's end to tell the edge: kept on disk until delivered, so a runner restarted meanwhile still says how it ended. */
  private report(report: Report): void {
    this.reports.push(report);
    this.saveReports();
  }

  private saveReports(): void {
    const file = this.reportsFile();
    mkdirSync(this.options.workDir, { recursive: true });
    writeFileSync(`${file}.tmp`, JSON.stringify(this.reports.map(({ jobId, body }) => ({ jobId, body }))));
    renameSync(`${file}.tmp`, file);
  }

  /** How many trainers run on this box now. */
  runningJobs(): number {
    return this.jobs.size;
  }

  /** Stops asking for work and ends every trainer (SIGTERM, then SIGKILL after the grace period). */
  /** A stopping runner waits this long for the edge to take its trainers' last events, then leaves them in the outbox. */
  private gaveUp(): boolean {
    return this.stopping && Date.now() - this.stoppingAt > 5_000;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.stoppingAt = Date.now();
    clearTimeout(this.timer);
    clearInterval(this.fenceTimer);
    this.channel?.close();
    await this.ticking;
    const running = [...this.jobs.values()];
    for (const job of running) job.running.stop(this.options.stopGraceSeconds * 1000);
    // Trainers ended and their last events delivered, while the edge is still there to take them.
    await Promise.all(running.map((j) => j.running.exited.then(() => j.settled)));
  }
}

/** The reports a previous run of the runner kept (reports.json), or none. */
function readReports(file: string): Report[] {
  try {
    const kept = JSON.parse(readFileSync(file, "utf8")) as { jobId: string; body: FinishBody }[];
    return kept.filter((r) => typeof r?.jobId === "string" && r.body).map((r) => ({ jobId: r.jobId, body: r.body, shortened: 0 }));
  } catch {
    return [];
  }
}

/** The job events of a stop, one per signal sent. */
const STOP_EVENTS = {
  SIGINT: {
    type: "training.stopping",
    title: "The trainer is asked to stop (SIGINT)",
    data: { signal: "SIGINT" },
  },
  SIGTERM: {
    type: "training.stop_escalated",
    level: "warning",
    title: "The trainer had not stopped: SIGTERM sent",
    data: { signal: "SIGTERM" },
  },
  SIGKILL: {
    type: "training.stop_escalated",
    level: "warning",
    title: "The trainer had not stopped after the grace period: its processes were killed (SIGKILL)",
    data: { signal: "SIGKILL" },
  },
} as const;

/**
 * The report of a trainer that ended on its own or as asked. A requested stop ends completed
 * when the trainer exited cleanly or of the runner's signals; otherwise a run is completed only
 * when the trainer exited 0 without saying it failed or was interrupted (SimpleTuner exits 0 after
 * an interrupt nobody asked for). A failure names the error the trainer reported, with the end of
 * its traceback, else its last lines.
 */
export function endReport(
  job: Pick<ActiveJob, "stopAsked" | "events">,
  exitCode: number | null,
  signal: number | null,
  lastLines: string[],
): FinishBody {
  const said = job.events.end;
  const completed = job.stopAsked
    ? stoppedOutcome(exitCode, signal) === "completed"
    : exitCode === 0 && said !== "failed" && said !== "interrupted";
  if (completed) return { status: "completed", exit_code: exitCode };
  const error = job.events.error;
  const why = error
    ? `${error.title}${error.message ? `: ${error.message}` : ""}`
    : signal
      ? `the trainer was killed by signal ${signal}${job.stopAsked ? " while stopping" : ""}`
      : job.stopAsked
        ? `the trainer failed while stopping (exit code ${exitCode})`
        : said === "interrupted"
          ? `the trainer was interrupted without a stop request (exit code ${exitCode})`
          : said === "failed"
            ? `the trainer reported that training failed (exit code ${exitCode})`
            : undefined;
  return { status: "failed", exit_code: exitCode, error: why, last_lines: reportLines(error?.traceback ?? null, lastLines).slice(-20) };
}

/** The newest checkpoint folder the runner has seen in the job's output directory. */
function latestCheckpoint(job: Pick<ActiveJob, "checkpoints" | "launch">): string {
  const listed = job.checkpoints ? (JSON.parse(job.checkpoints) as [string, string][]) : [];
  const last = listed[listed.length - 1];
  return last ? join(job.launch.env.TRAINER_OUTPUT_DIR!, last[0]) : "";
}

interface ScriptRun {
  kind: ScriptKind;
  command: string;
  event: { localCheckpointPath?: string; remoteCheckpointPath?: string; globalStep?: number };
}

/**
 * The scripts an event calls for, if the environment names them (spec 2.9), run by the runner for
 * every trainer: --post_checkpoint_script after each checkpoint.saved; --validation_external_script
 * at each validation.started with --validation_method external-script (`{local_checkpoint_path}`:
 * the newest checkpoint); --post_upload_script after each upload.completed. For SimpleTuner the
 * post-upload script runs when SimpleTuner itself would run it: after each publication to its hub
 * (`--push_to_hub`), else after each checkpoint and once the final model is saved.
 */
export function scriptsFor(
  config: Record<string, unknown>,
  event: TrainerEvent,
  kind: TrainerKind,
  outputDir: string,
  newestCheckpoint: string,
): ScriptRun[] {
  const data = (event.data ?? {}) as { path?: unknown; step?: unknown; local_path?: unknown; remote_path?: unknown };
  const step = typeof data.step === "number" ? data.step : undefined;
  const text = (name: string) => (typeof config[name] === "string" && (config[name] as string).trim() ? (config[name] as string) : null);
  const runs: ScriptRun[] = [];
  const postCheckpoint = text("--post_checkpoint_script");
  const postUpload = text("--post_upload_script");
  const external = text("--validation_external_script");
  const checkpointPath = typeof data.path === "string" ? data.path : "";
  if (event.type === "checkpoint.saved" && postCheckpoint)
    runs.push({ kind: "post_checkpoint", command: postCheckpoint, event: { localCheckpointPath: checkpointPath, globalStep: step } });
  if (postUpload) {
    const hub = kind === "simpletuner" && (config["--push_to_hub"] === true || config["--push_to_hub"] === "true");
    const hubModel = text("--hub_model_id");
    if (event.type === "upload.completed")
      runs.push({
        kind: "post_upload",
        command: postUpload,
        event: {
          localCheckpointPath: typeof data.local_path === "string" ? data.local_path : kind === "simpletuner" ? outputDir : "",
          remoteCheckpointPath:
            typeof data.remote_path === "string" ? data.remote_path : hub && hubModel ? `https://huggingface.co/${hubModel}` : "",
          globalStep: step,
        },
      });
    else if (kind === "simpletuner" && !hub && event.type === "checkpoint.saved")
      runs.push({ kind: "post_upload", command: postUpload, event: { localCheckpointPath: checkpointPath, globalStep: step } });
    else if (kind === "simpletuner" && !hub && event.type === "model.saved")
      runs.push({ kind: "post_upload", command: postUpload, event: { localCheckpointPath: outputDir, globalStep: step } });
  }
  const method = String(config["--validation_method"] ?? "").replace(/_/g, "-");
  if (event.type === "validation.started" && method === "external-script" && external)
    runs.push({ kind: "validation", command: external, event: { localCheckpointPath: newestCheckpoint, globalStep: step } });
  return runs;
}
