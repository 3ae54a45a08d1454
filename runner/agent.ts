import { hostname } from "node:os";
import {
  edgeClient,
  refusedForGood,
  type Assignment,
  type FinishBody,
  type HeartbeatAnswer,
  type HeartbeatBody,
  type RegisterBody,
} from "./edge-client";
import type { ServiceClient } from "../shared/client/client";
import { ServiceError } from "../shared/client/client";
import { endpoints } from "../shared/client/endpoints";
import { detectGpus } from "./gpus";
import { hostStats } from "./host";
import { placeholderValues, type ScriptKind } from "../shared/placeholders";
import { WakeChannel } from "./channel";
import { runScript } from "./scripts";
import { startCallback, type Callback } from "./callback";
import { materialise } from "./datasets";
import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EventShipper, lineToEvent } from "./events";
import { LaunchError, planLaunch, startJob, type BoxPolicy, type Launch, type RunningJob } from "./job";
import { RunnerConfigError, type RunnerConfig } from "./config";
import { findProgram } from "./sandbox";

/*
 * The runner agent on a GPU box: registers the box's inventory with the edge, heartbeats, and
 * runs exactly the jobs the Scheduler has assigned to it. The edge is the source of truth: a
 * job assigned and not running here is started; a job running here and no longer assigned
 * (cancelled, or given away while this box was offline) is stopped; a job that ends is reported.
 */

/** The runner's configuration (runner/config.ts), how to log, and the nvidia-smi to ask. */
export type RunnerOptions = RunnerConfig & { nvidiaSmi?: string; log: (line: string) => void };

/**
 * What the box runs, with the sandbox resolved: bubblewrap found (or not) where the config says.
 * Throws RunnerConfigError when the box cannot meet its config: a required sandbox without
 * bubblewrap, run_as without root or without bubblewrap.
 */
export function boxPolicy(config: RunnerConfig, log: (line: string) => void): BoxPolicy {
  const found = config.sandbox === "off" ? null : findProgram(config.bwrap, config.path);
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
  else log(`trainers and scripts run sandboxed by ${found}${config.runAs ? ` as uid ${config.runAs.uid}` : ""}`);
  return {
    trainers: config.trainers,
    allowRawCommands: config.allowRawCommands,
    bwrap: found,
    sandbox: config.sandbox,
    runAs: config.runAs,
    hide: config.hide,
    simpletunerScript: config.simpletunerScript,
    path: config.path,
    passEnv: config.passEnv,
  };
}

interface Report {
  jobId: string;
  body: FinishBody;
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
  private readonly jobs = new Map<
    string,
    {
      running: RunningJob;
      launch: Launch;
      unassigned: boolean;
      stopAsked: boolean;
      shipper: EventShipper;
      checkpoints: string;
      settled: Promise<void>;
    }
  >();
  /** Commands handed to trainers, acknowledged with the next ask for work. */
  private acks: number[] = [];
  private readonly handled = new Set<number>();
  /** Jobs whose datasets are being fetched: assigned, not yet running. */
  private readonly launching = new Set<string>();
  private readonly reports: Report[] = [];
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;
  private ticking: Promise<void> = Promise.resolve();
  private inTick = false;
  private wakeAgain = false;
  private channel: WakeChannel | null = null;
  private gpuIndices: number[] = [];
  private readonly box: BoxPolicy;

  /** Throws RunnerConfigError when the box cannot meet its config (see boxPolicy). */
  constructor(private readonly options: RunnerOptions) {
    this.edge = edgeClient(options.url, options.token);
    this.box = boxPolicy(options, options.log);
  }

  /** Registers, settles what a previous run left behind, and starts the loop. */
  async start(): Promise<HeartbeatAnswer> {
    const gpus = await detectGpus(this.options.nvidiaSmi);
    this.gpuIndices = gpus.map((g) => g.index);
    const register: RegisterBody = {
      role: this.options.role,
      labels: this.options.labels,
      gpus,
      hostname: hostname(),
      host_stats: await hostStats(),
    };
    const answer = await this.edge.call(endpoints.workerRegister, { body: register });
    this.options.log(
      `registered as worker ${answer.worker_id} (${this.options.role}) with ${gpus.length} GPU(s): ${gpus.map((g) => `${g.index} ${g.name}`).join(", ") || "none"}`,
    );
    // Jobs assigned before this runner started were running under a runner that is gone; their
    // trainers died with it. They go back to the queue (or fail at max_attempts) rather than
    // being left "running" forever; a trainer that resumes from its checkpoints picks up there.
    for (const job of answer.assignments) {
      this.reports.push({
        jobId: job.job_id,
        body: { status: "interrupted", error: `the runner restarted while the job was running (attempt ${job.attempt})` },
      });
    }
    await this.flushReports();
    this.schedule(0);
    // The edge wakes this runner through the channel when work is waiting; the regular asks
    // (pollMs) are the fallback and the heartbeat.
    this.channel = new WakeChannel(this.edge, () => this.wake(), this.options.log);
    this.channel.open();
    return answer;
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
        } else this.schedule(this.options.pollMs);
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
      await this.flushReports();
      const acks = this.acks;
      const heartbeat: HeartbeatBody = { host_stats: await hostStats(), acked_commands: acks };
      const answer = await this.edge.call(endpoints.workerHeartbeat, { body: heartbeat });
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
    const assigned = new Set(assignments.map((a) => a.job_id));
    for (const job of assignments)
      if (!this.jobs.has(job.job_id) && !this.launching.has(job.job_id) && !this.reports.some((r) => r.jobId === job.job_id))
        this.launch(job);
    for (const [jobId, job] of this.jobs) {
      if (assigned.has(jobId) || job.unassigned) continue;
      job.unassigned = true;
      this.options.log(`job ${jobId} is no longer assigned to this box; stopping its trainer`);
      job.running.stop(this.options.stopGraceSeconds * 1000);
    }
  }

  private rescan(jobId: string): void {
    const job = this.jobs.get(jobId);
    if (job) this.reportCheckpoints(job);
  }

  /**
   * The job's output directory as it is (checkpoint-<step> folders), sent as a checkpoints.listed
   * event whenever it changed: what POST /api/training/checkpoints shows, for any trainer.
   */
  private reportCheckpoints(job: { launch: Launch; shipper: EventShipper; checkpoints: string }): void {
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

  /** A requested stop: asked with SIGINT, then SIGTERM, then the tree killed; each step is a job event. */
  private requestStop(jobId: string, job: { running: RunningJob; stopAsked: boolean; shipper: EventShipper }): void {
    job.stopAsked = true;
    job.running.stop(this.options.stopGraceSeconds * 1000, {
      ask: true,
      onSignal: (signal) => {
        if (signal !== "SIGINT")
          this.options.log(
            `job ${jobId}: the trainer has not stopped yet; ${signal === "SIGTERM" ? "sending SIGTERM" : "killing its processes (SIGKILL)"}`,
          );
        job.shipper.push(STOP_EVENTS[signal]);
      },
    });
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

  /** Brings the job's datasets into the cache, writes its files, then starts its trainer. */
  private async prepareAndStart(job: Assignment): Promise<void> {
    let running: RunningJob;
    let launch!: Launch;
    let callback: Callback | null = null;
    const scripts: Promise<void>[] = [];
    const shipper = new EventShipper(this.edge, job.job_id, job.attempt, 500, this.options.log);
    try {
      const jobDir = join(this.options.workDir, "jobs", job.job_id);
      // A previous attempt's trainer could have left config/ as a link to elsewhere: the runner
      // (maybe root) writes there, so it starts from a fresh folder of its own.
      rmSync(join(jobDir, "config"), { recursive: true, force: true });
      if (this.box.sandbox === "off")
        shipper.push({
          type: "sandbox.off",
          level: "warning",
          title: 'This box runs trainers and scripts without a sandbox (sandbox "off" in its runner config)',
        });
      const datasets: string[] = [];
      const dataloader = await this.prepareDatasets(job, shipper, datasets);
      const config = { ...job.config };
      if (dataloader) {
        mkdirSync(join(jobDir, "config"), { recursive: true });
        const file = join(jobDir, "config", "multidatabackend.json");
        writeFileSync(file, JSON.stringify(dataloader, null, 2));
        config["--data_backend_config"] = file;
      }
      // Every event, from stdout or from the webhook callback: shipped, and acted on by the runner.
      const onEvent = (event: { type: string } & Record<string, unknown>) => {
        shipper.push(event);
        if (event.type.startsWith("checkpoint")) this.rescan(job.job_id);
        const script = scriptFor(job.config, event);
        if (script)
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
      callback = await startCallback(onEvent);
      launch = planLaunch(this.options.workDir, { ...job, config }, this.gpuIndices, callback.url, this.box, datasets);
      Object.assign(launch.env, await this.storageEnv(job.job_id));
      // The merged configuration as the trainer gets it, for reference and for trainers that read a file.
      mkdirSync(join(jobDir, "config"), { recursive: true });
      writeFileSync(join(jobDir, "config", "config.json"), JSON.stringify(config, null, 2));
      running = startJob(launch, job.job_id, (line) => {
        const event = lineToEvent(line);
        if (event) onEvent(event);
      });
    } catch (error) {
      const why = error instanceof LaunchError ? error.message : `could not start the trainer: ${(error as Error).message}`;
      this.options.log(`job ${job.job_id}: ${why}`);
      await callback?.close();
      await shipper.drain();
      this.reports.push({ jobId: job.job_id, body: { status: "failed", error: why } });
      void this.flushReports();
      return;
    }
    this.options.log(`job ${job.job_id} started on GPUs [${launch.env.CUDA_VISIBLE_DEVICES!.split(",").filter(Boolean).join(", ")}]`);
    const entry = {
      running,
      launch,
      unassigned: false,
      stopAsked: false,
      shipper,
      checkpoints: "",
      settled: Promise.resolve() as Promise<void>,
    };
    this.jobs.set(job.job_id, entry);
    entry.settled = running.exited.then(async ({ exitCode, signal, lastLines }) => {
      this.options.log(`job ${job.job_id} ended: ${signal ? `signal ${signal}` : `exit code ${exitCode}`}`);
      // Scripts still running get a minute (less when the runner is stopping); then every event
      // reaches the edge before the job is reported ended.
      await Promise.race([Promise.allSettled(scripts), new Promise((r) => setTimeout(r, this.stopping ? 5_000 : 60_000).unref())]);
      this.reportCheckpoints(entry);
      await callback?.close();
      await shipper.drain(this.stopping ? 5_000 : 30_000);
      this.jobs.delete(job.job_id);
      // A job taken away from this box has already ended on the edge; there is nothing to say.
      if (entry.unassigned || this.stopping) return;
      const completed = entry.stopAsked ? stoppedOutcome(exitCode, signal) === "completed" : exitCode === 0;
      const failure = signal
        ? `the trainer was killed by signal ${signal}${entry.stopAsked ? " while stopping" : ""}`
        : entry.stopAsked
          ? `the trainer failed while stopping (exit code ${exitCode})`
          : undefined;
      this.reports.push({
        jobId: job.job_id,
        body: completed
          ? { status: "completed", exit_code: exitCode }
          : { status: "failed", exit_code: exitCode, error: failure, last_lines: lastLines.slice(-20) },
      });
      void this.flushReports();
    });
  }

  /**
   * The job's dataloader with each `datasets/...` folder brought into the cache and pointed at
   * it; null when the environment has no datasets. A dataset not uploaded yet is reported
   * (dataset.missing) and left as it is: a trainer that needs it will say so.
   */
  private async prepareDatasets(job: Assignment, shipper: EventShipper, localDirs: string[]): Promise<Record<string, unknown>[] | null> {
    if (!job.dataloader?.length) return null;
    const out: Record<string, unknown>[] = [];
    for (const entry of job.dataloader) {
      const dir = entry.instance_data_dir;
      if (typeof dir !== "string" || !dir.startsWith("datasets/")) {
        out.push(entry);
        continue;
      }
      const got = await materialise(this.edge, join(this.options.workDir, "cache"), job.job_id, dir);
      if (!got) {
        shipper.push({ type: "dataset.missing", title: `Dataset ${dir} has no files`, data: { path: dir } });
        out.push(entry);
        continue;
      }
      shipper.push({
        type: "dataset.ready",
        title: `Dataset ${dir}: ${got.files} file(s), ${got.downloaded} downloaded, ${got.reused} from the cache`,
        data: { ...got },
      });
      out.push({ ...entry, instance_data_dir: got.localDir });
      localDirs.push(got.localDir);
    }
    return out;
  }

  /** Sends the reports not yet accepted; a refused one (409/404: already settled) is dropped. */
  private async flushReports(): Promise<void> {
    for (const report of [...this.reports]) {
      try {
        await this.edge.call(endpoints.workerJobFinish, { params: { job_id: report.jobId }, body: report.body });
      } catch (error) {
        if (!(error instanceof ServiceError) || !refusedForGood(error.status)) continue; // keep it for the next tick
        this.options.log(`job ${report.jobId}: the edge did not take the report (${error.detail})`);
      }
      this.reports.splice(this.reports.indexOf(report), 1);
    }
  }

  /** Stops asking for work and ends every trainer (SIGTERM, then SIGKILL after the grace period). */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    this.channel?.close();
    await this.ticking;
    const running = [...this.jobs.values()];
    for (const job of running) job.running.stop(this.options.stopGraceSeconds * 1000);
    // Trainers ended and their last events delivered, while the edge is still there to take them.
    await Promise.all(running.map((j) => j.running.exited.then(() => j.settled)));
  }
}

/** The job events of a requested stop, one per signal sent. */
const STOP_EVENTS = {
  SIGINT: {
    type: "training.stop_requested",
    title: "Stop requested: the trainer was asked to stop after its current step (SIGINT)",
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

/** The script an event calls for, if the environment names one (spec 2.9). */
function scriptFor(
  config: Record<string, unknown>,
  event: { type: string } & Record<string, unknown>,
): {
  kind: ScriptKind;
  command: string;
  event: { localCheckpointPath?: string; remoteCheckpointPath?: string; globalStep?: number };
} | null {
  const data = (event.data ?? {}) as { path?: unknown; step?: unknown };
  const step = typeof data.step === "number" ? data.step : undefined;
  const text = (name: string) => (typeof config[name] === "string" && (config[name] as string).trim() ? (config[name] as string) : null);
  const postCheckpoint = text("--post_checkpoint_script");
  if (event.type === "checkpoint.saved" && postCheckpoint)
    return {
      kind: "post_checkpoint",
      command: postCheckpoint,
      event: { localCheckpointPath: typeof data.path === "string" ? data.path : "", globalStep: step },
    };
  const postUpload = text("--post_upload_script");
  if (event.type === "upload.completed" && postUpload) {
    const upload = (event.data ?? {}) as { local_path?: unknown; remote_path?: unknown; step?: unknown };
    return {
      kind: "post_upload",
      command: postUpload,
      event: {
        localCheckpointPath: typeof upload.local_path === "string" ? upload.local_path : "",
        remoteCheckpointPath: typeof upload.remote_path === "string" ? upload.remote_path : "",
        globalStep: step,
      },
    };
  }
  const external = text("--validation_external_script");
  if (event.type === "validation.started" && config["--validation_method"] === "external-script" && external)
    return { kind: "validation", command: external, event: { globalStep: step } };
  return null;
}
