import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { ServiceClient } from "../../shared/client/client";
import { workerEndpoints } from "../../shared/client/endpoints-workers";
import { placeholderValues } from "../../shared/placeholders";
import { startCallback, type Callback } from "./callback";
import type { RunnerConfig } from "./config";
import { prepareDatasets } from "./datasets";
import type { Assignment, FinishBody, HeartbeatAnswer } from "./edge-client";
import { CALLBACK_PORT, startJobNetwork, type JobNetwork } from "./egress";
import { EventShipper, lineToEvent, outboxPath } from "./events";
import { LaunchError, planLaunch, startJob, type BoxPolicy, type Launch, type RunningJob } from "./job";
import { endReport, fitReport } from "./report";
import { prepareResume } from "./resume";
import { runScript, scriptsFor } from "./scripts";
import { TrainerEvents, type TrainerEvent } from "./trainer-events";

/*
 * One job's life on this box, from its launch to its end report: its datasets and files, its
 * trainer, the trainer's events (shipped, and acted on: checkpoints listed, scripts run), the
 * commands handed to it, a stop's escalation (checkpoint, SIGINT, SIGTERM, SIGKILL), and how it
 * ended. The runner (agent.ts) decides when a job starts and ends here; the supervisor carries it
 * out and tells the runner back through its SupervisorHost.
 */

/** What a supervisor needs of the runner it works for. */
export interface SupervisorHost {
  edge: ServiceClient;
  options: Pick<RunnerConfig, "url" | "workDir" | "scripts" | "stopGraceSeconds"> & { log: (line: string) => void };
  box: BoxPolicy;
  /** The box's GPUs, as detected when the runner started. */
  gpuIndices: number[];
  /** Whether the runner is stopping: a trainer its stop ends is not reported (it goes back to the queue at the next start). */
  stopping(): boolean;
  /** A stopping runner has waited long enough for the edge to take the last events: the rest stays in the outbox. */
  gaveUp(): boolean;
  /** The trainer runs: the supervisor is one of the box's jobs. */
  running(supervisor: JobSupervisor): void;
  /** The trainer of this attempt has ended (or could not start): the job is never launched again in it. */
  ended(supervisor: JobSupervisor): void;
  /** The supervisor is done: it is no longer one of the box's jobs, and `report`, if any, is the job's end to tell the edge. */
  settled(supervisor: JobSupervisor, report: FinishBody | null): void;
}

/** A command the edge hands to a job's trainer. */
export type TrainerCommand = HeartbeatAnswer["commands"][number]["command"];

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
 * One job attempt's trainer on this box, from its launch to its report.
 *
 * @example
 * const supervisor = new JobSupervisor(assignment, host);
 * await supervisor.launch(); // host.running(supervisor) once its trainer runs
 * supervisor.command("stop"); // checkpoint, then SIGINT, SIGTERM, SIGKILL
 * await supervisor.settled; // host.settled(supervisor, report) has been called
 */
export class JobSupervisor {
  readonly jobId: string;
  readonly attempt: number;
  /** The GPUs its trainer holds ([] for a CPU job; set when it starts). */
  gpus: number[] = [];
  /** Taken away from this box (cancelled, or given to another): killed, and not reported. */
  unassigned = false;
  /** Resolved once the trainer has ended, its last events are delivered and the runner told (host.settled). */
  settled: Promise<void> = Promise.resolve();
  /** Stopped by the runner itself because the edge could not be reached (fencing). */
  private fenced = false;
  private stopAsked = false;
  /** A stop waiting for the checkpoint it asked for: then, or at the deadline, the trainer is interrupted. */
  private stopWait: { checkpoints: number; timer: NodeJS.Timeout; interrupt: () => void } | null = null;
  /** What its trainer has said so far (started, step, checkpoints, how it ended). */
  private events = new TrainerEvents();
  private readonly shipper: EventShipper;
  /** The checkpoints last listed (checkpoints.listed), as names and times; an empty directory at launch is no change, so nothing is sent for it. */
  private checkpoints = "[]";
  private readonly scripts: Promise<void>[] = [];
  private callback: Callback | null = null;
  private net: JobNetwork | null = null;
  /** Set once the trainer runs: before, its events are shipped but not acted on. */
  private trainer: { running: RunningJob; launch: Launch } | null = null;

  constructor(
    private readonly job: Assignment,
    private readonly host: SupervisorHost,
  ) {
    this.jobId = job.job_id;
    this.attempt = job.attempt;
    this.shipper = new EventShipper(
      host.edge,
      job.job_id,
      job.attempt,
      500,
      host.options.log,
      outboxPath(host.options.workDir, job.job_id, job.attempt),
    );
  }

  private log(line: string): void {
    this.host.options.log(line);
  }

  /**
   * Brings the job's datasets into the cache, gives the attempt its own view of each, writes its
   * files (`<job dir>/service/`: nothing a trainer loads by itself from its working directory),
   * then starts its trainer. A job that cannot start is reported failed.
   */
  async launch(): Promise<void> {
    const job = this.job;
    const { box, options } = this.host;
    let running: RunningJob;
    let launch: Launch;
    try {
      const jobDir = join(options.workDir, "jobs", job.job_id);
      // What a previous attempt's trainer left where the runner (maybe root) writes, or where
      // SimpleTuner looks by itself (config/config.json, config/config.env), goes: a link to
      // elsewhere would be written through, a config would win over the job's options.
      for (const name of ["config", "service"]) rmSync(join(jobDir, name), { recursive: true, force: true });
      mkdirSync(join(jobDir, "service"), { recursive: true });
      if (box.sandbox === "off")
        this.shipper.push({
          type: "sandbox.off",
          level: "warning",
          title: 'This box runs trainers and scripts without a sandbox (sandbox "off" in its runner config)',
        });
      // The trainer's storage credentials are asked for while its datasets come.
      const storageAsked = this.storageEnv();
      const datasets: string[] = [];
      const dataloader = await prepareDatasets(this.host.edge, options.workDir, job, jobDir, this.shipper, datasets);
      const config = { ...job.config };
      const resumed = prepareResume(options.workDir, job, resolve(jobDir, String(config["--output_dir"] ?? "output")), config);
      if (resumed)
        this.shipper.push(
          resumed.from
            ? {
                type: "resume.prepared",
                level: "info",
                title: `Resuming from ${resumed.from.checkpoint} of job ${resumed.from.job_id}`,
                data: { ...resumed.from, missing: resumed.missing, resume_argument: "--resume_from_checkpoint=latest" },
              }
            : {
                type: "resume.prepared",
                level: "warning",
                title: "No checkpoint of the retried job is on this box: starting from step 0",
                data: {
                  job_id: null,
                  checkpoint: null,
                  step: null,
                  missing: resumed.missing,
                  resume_argument: "--resume_from_checkpoint=latest",
                },
              },
        );
      if (dataloader) {
        const file = join(jobDir, "service", "multidatabackend.json");
        writeFileSync(file, JSON.stringify(dataloader, null, 2));
        config["--data_backend_config"] = file;
      }
      const storage = await storageAsked;
      // Sandboxed in a network of its own, the trainer reaches out only through the job's gateway.
      if (box.bwrap && box.network === "isolated")
        this.net = await startJobNetwork({
          allowHosts: box.allowHosts,
          edgeUrls: [options.url, ...(storage.TRAINER_STORAGE_ENDPOINT_URL ? [storage.TRAINER_STORAGE_ENDPOINT_URL] : [])],
          refused: (target, why) =>
            this.shipper.push({
              type: "network.refused",
              level: "warning",
              title: `The trainer could not reach ${target}: ${why}`,
              data: { target, reason: why },
            }),
        });
      this.callback = await startCallback(
        (event) => this.onEvent(event),
        this.net && { socket: this.net.callbackSocket, port: CALLBACK_PORT },
      );
      launch = planLaunch(options.workDir, { ...job, config }, this.host.gpuIndices, this.callback.url, box, datasets, this.net);
      this.events = new TrainerEvents({ simpleTuner: launch.kind === "simpletuner" });
      Object.assign(launch.env, storage);
      // The merged configuration as the trainer gets it, for reference.
      writeFileSync(join(jobDir, "service", "options.json"), JSON.stringify(config, null, 2));
      running = startJob(launch, job.job_id, (line) => {
        const event = lineToEvent(line);
        if (event) this.onEvent(event);
      });
    } catch (error) {
      const why = error instanceof LaunchError ? error.message : `could not start the trainer: ${(error as Error).message}`;
      this.log(`job ${job.job_id}: ${why}`);
      await this.callback?.close();
      await this.net?.close();
      await this.shipper.drain(Infinity, () => this.host.gaveUp());
      this.host.ended(this);
      this.host.settled(this, fitReport({ status: "failed", error: why }));
      return;
    }
    this.log(`job ${job.job_id} started on GPUs [${launch.env.CUDA_VISIBLE_DEVICES!.split(",").filter(Boolean).join(", ")}]`);
    this.gpus = launch.env.CUDA_VISIBLE_DEVICES!.split(",").filter(Boolean).map(Number);
    this.trainer = { running, launch };
    this.host.running(this);
    this.settled = running.exited.then(({ exitCode, signal, lastLines }) => this.finish(exitCode, signal, lastLines));
  }

  /**
   * The trainer has ended, by itself (before the runner began stopping) or by the runner's stop:
   * only the first is a report to keep. Scripts still running get a minute (less when the runner
   * is stopping); then every event reaches the edge before the job is reported ended, however long
   * the edge is away; a runner stopping keeps what is left in the outbox for its next start.
   */
  private async finish(exitCode: number | null, signal: number | null, lastLines: string[]): Promise<void> {
    const endedByStop = this.host.stopping();
    this.log(`job ${this.jobId} ended: ${signal ? `signal ${signal}` : `exit code ${exitCode}`}`);
    if (this.stopWait) clearTimeout(this.stopWait.timer);
    this.host.ended(this);
    await Promise.race([
      Promise.allSettled(this.scripts),
      new Promise((r) => setTimeout(r, this.host.stopping() ? 5_000 : 60_000).unref()),
    ]);
    this.listCheckpoints();
    await this.callback?.close();
    await this.net?.close();
    await this.shipper.drain(Infinity, () => this.host.gaveUp());
    // A job taken away from this box has already ended on the edge; there is nothing to say. One
    // the runner's own stop ended goes back to the queue at its next start (see Runner.start).
    if (this.unassigned || endedByStop) {
      this.host.settled(this, null);
      return;
    }
    // Fenced: it goes back to the queue (the edge may have done so already: then 409, dropped).
    const body = this.fenced
      ? {
          status: "interrupted" as const,
          error: "its runner could not reach the edge and stopped it (fencing), so that it never runs in two places",
        }
      : endReport({ stopAsked: this.stopAsked, events: this.events }, exitCode, signal, lastLines);
    this.host.settled(this, fitReport(body));
  }

  /**
   * The storage endpoint's credentials for a job's trainer, as TRAINER_STORAGE_* variables (not
   * AWS_*: a trainer may use its own AWS credentials for other buckets). A job starts without
   * them, with a log line, when the edge cannot give them: uploading is the trainer's choice.
   */
  private async storageEnv(): Promise<Record<string, string>> {
    try {
      const creds = await this.host.edge.call(workerEndpoints.workerStorageCredentials, { params: { job_id: this.jobId } });
      if (creds.secret_access_key === null) return {};
      return {
        TRAINER_STORAGE_ENDPOINT_URL: creds.endpoint_url,
        TRAINER_STORAGE_BUCKET: creds.bucket,
        TRAINER_STORAGE_REGION: creds.region,
        TRAINER_STORAGE_ACCESS_KEY_ID: creds.access_key_id,
        TRAINER_STORAGE_SECRET_ACCESS_KEY: creds.secret_access_key,
      };
    } catch (error) {
      this.log(`job ${this.jobId}: no storage credentials for the trainer (${(error as Error).message})`);
      return {};
    }
  }

  /** Every event, from stdout or from the webhook callback: translated, shipped, and acted on once the trainer runs. */
  private onEvent(raw: TrainerEvent): void {
    for (const event of this.events.translate(raw)) {
      this.shipper.push(event);
      if (this.trainer) this.react(this.trainer.launch, event);
    }
  }

  private react(launch: Launch, event: TrainerEvent): void {
    if (event.type === "checkpoint.saved") {
      this.listCheckpoints();
      if (this.stopWait && this.events.checkpoints >= this.stopWait.checkpoints) this.stopWait.interrupt();
    }
    const config = this.job.config;
    for (const script of scriptsFor(config, event, launch.kind, launch.env.TRAINER_OUTPUT_DIR!, this.latestCheckpoint()))
      this.scripts.push(
        runScript(
          script.kind,
          script.command,
          placeholderValues(script.kind, config, script.event),
          { cwd: launch.jobDir, env: launch.env, allowed: this.host.options.scripts, sandbox: launch.sandbox },
          (e) => this.shipper.push(e),
        ),
      );
  }

  /**
   * The job's output directory as it is (checkpoint-<step> folders), sent as a checkpoints.listed
   * event whenever it changed: what POST /api/training/checkpoints shows, for any trainer.
   */
  listCheckpoints(): void {
    if (!this.trainer) return;
    const dir = this.trainer.launch.env.TRAINER_OUTPUT_DIR!;
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
    if (signature === this.checkpoints) return;
    this.checkpoints = signature;
    this.shipper.push({
      type: "checkpoints.listed",
      title: `${checkpoints.length} checkpoint(s) in the output directory`,
      data: { output_dir: dir, checkpoints },
    });
  }

  /** The newest checkpoint folder the runner has seen in the job's output directory. */
  private latestCheckpoint(): string {
    const listed = this.checkpoints ? (JSON.parse(this.checkpoints) as [string, string][]) : [];
    const last = listed[listed.length - 1];
    return last && this.trainer ? join(this.trainer.launch.env.TRAINER_OUTPUT_DIR!, last[0]) : "";
  }

  /**
   * Hands a command to the trainer (trainer protocol): a validation or checkpoint as one more in
   * its signal file; a stop as a requested stop (requestStop).
   */
  command(command: TrainerCommand): void {
    if (!this.trainer) return;
    this.log(`job ${this.jobId}: ${command} requested`);
    if (command === "stop") {
      this.requestStop();
      return;
    }
    try {
      this.trainer.running.signal(command);
    } catch (error) {
      // The file is in the trainer's directory: one it made unwritable is its own loss.
      this.log(`job ${this.jobId}: could not write the trainer's signal file (${(error as Error).message})`);
      this.shipper.push({
        type: "command.undelivered",
        level: "warning",
        title: `The ${command} request could not be handed to the trainer: its signal file cannot be written`,
        data: { command },
      });
    }
  }

  /**
   * A requested stop that keeps the work: a checkpoint is asked for through the signal file and
   * awaited (at most the grace period), then the trainer is interrupted (SIGINT), then SIGTERM,
   * then its tree killed; each step is a job event. A trainer that has not begun training yet has
   * nothing to save and is interrupted at once.
   */
  private requestStop(): void {
    if (this.stopAsked) return;
    this.stopAsked = true;
    const grace = this.host.options.stopGraceSeconds * 1000;
    this.stopTrainer({ checkpointWaitMs: grace, graceMs: grace });
  }

  /**
   * Fencing: the runner has not reached the edge for `silentMs`, and past `deadline` (a time) the
   * edge may give the job to another box. The trainer is stopped as a requested stop is - a
   * checkpoint first where there is time, then the signals - and dead by the deadline whatever
   * stop was already under way. Its job is reported interrupted when the edge is back.
   */
  fence(silentMs: number, heartbeatTimeoutMs: number, deadline: number): void {
    if (!this.trainer || this.unassigned || this.fenced) return;
    const running = this.trainer.running;
    this.fenced = true;
    const left = deadline - Date.now() - 500;
    this.log(
      `job ${this.jobId}: the edge has not been reached for ${Math.round(silentMs / 1000)} s (its heartbeat timeout is ${heartbeatTimeoutMs / 1000} s); stopping the trainer so the job never runs in two places`,
    );
    this.shipper.push({
      type: "training.fenced",
      level: "warning",
      title: `The runner lost the edge for ${Math.round(silentMs / 1000)} s and stopped this trainer (it would be given to another box at ${heartbeatTimeoutMs / 1000} s)`,
      data: { silent_seconds: Math.round(silentMs / 1000), heartbeat_timeout_seconds: heartbeatTimeoutMs / 1000 },
    });
    this.stopTrainer({
      checkpointWaitMs: Math.max(0, Math.min(this.host.options.stopGraceSeconds * 1000, left / 2)),
      graceMs: Math.max(200, left / 2),
    });
    // Whatever stop was already under way (a user's, with its longer grace): dead by the deadline.
    setTimeout(() => running.kill(), Math.max(0, left)).unref();
  }

  /** The stop's sequence (requestStop), bounded: the checkpoint awaited at most `checkpointWaitMs`, the signals within `graceMs`. */
  private stopTrainer(bounds: { checkpointWaitMs: number; graceMs: number }): void {
    if (!this.trainer) return;
    const running = this.trainer.running;
    const grace = bounds.graceMs;
    const interrupt = () => {
      if (this.stopWait) clearTimeout(this.stopWait.timer);
      this.stopWait = null;
      running.stop(grace, {
        ask: true,
        onSignal: (signal) => {
          if (signal !== "SIGINT")
            this.log(
              `job ${this.jobId}: the trainer has not stopped yet; ${signal === "SIGTERM" ? "sending SIGTERM" : "killing its processes (SIGKILL)"}`,
            );
          this.shipper.push(STOP_EVENTS[signal]);
        },
      });
    };
    if (!this.events.started || this.events.end !== null) {
      // Nothing to save yet, and an interrupt while Python is still importing would end it with a
      // traceback: it is terminated (SIGTERM to its whole tree, SIGKILL after the grace period).
      this.shipper.push({
        type: "training.stop_requested",
        title: "Stop requested: the trainer has not begun training, so it is stopped without a checkpoint (SIGTERM)",
        data: { checkpoint: false, signal: "SIGTERM" },
      });
      running.stop(grace, { onSignal: (signal) => signal === "SIGKILL" && this.shipper.push(STOP_EVENTS.SIGKILL) });
      return;
    }
    if (this.stopWait) return; // a checkpoint is awaited already
    try {
      running.signal("checkpoint");
    } catch (error) {
      this.shipper.push({
        type: "training.stop_requested",
        title: `Stop requested: no checkpoint could be asked for (its signal file cannot be written: ${(error as Error).message}); stopping it`,
        level: "warning",
        data: { checkpoint: false },
      });
      interrupt();
      return;
    }
    const waitSeconds = Math.round(bounds.checkpointWaitMs / 100) / 10;
    this.shipper.push({
      type: "training.stop_requested",
      title: "Stop requested: the trainer saves a checkpoint after its current step, then stops",
      data: { checkpoint: true, wait_seconds: waitSeconds },
    });
    const timer = setTimeout(() => {
      this.shipper.push({
        type: "training.stop_checkpoint_missed",
        level: "warning",
        title: `No checkpoint within ${waitSeconds} s of the stop request; stopping the trainer without it`,
      });
      interrupt();
    }, bounds.checkpointWaitMs);
    timer.unref();
    this.stopWait = { checkpoints: this.events.checkpoints + 1, timer, interrupt };
  }

  /** The job is no longer assigned to this box (cancelled, or given to another): its trainer must not go on a moment longer. */
  unassign(): void {
    if (!this.trainer) return;
    this.unassigned = true;
    this.log(`job ${this.jobId} is no longer assigned to this box; killing its trainer`);
    this.trainer.running.kill();
  }

  /** Ends the trainer because the runner stops: SIGTERM, then SIGKILL after `graceMs`. */
  terminate(graceMs: number): void {
    this.trainer?.running.stop(graceMs);
  }
}
