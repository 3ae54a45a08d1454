import { hostname } from "node:os";
import type { ServiceClient } from "../../shared/client/client";
import { ServiceError } from "../../shared/client/client";
import { workerEndpoints } from "../../shared/client/endpoints-workers";
import { boxPolicy, trainerAvailability } from "./box-policy";
import { WakeChannel } from "./channel";
import type { RunnerConfig } from "./config";
import { edgeClient, type Assignment, type HeartbeatAnswer, type HeartbeatBody, type RegisterBody } from "./edge-client";
import { replayOutbox } from "./events";
import { detectGpus } from "./gpus";
import { readGpuHealth, XidWatch } from "./gpu-health";
import { hostStats } from "./host";
import type { BoxPolicy } from "./job";
import { JobSupervisor, type SupervisorHost } from "./job-supervisor";
import { PendingReports } from "./pending-reports";
import { probeSimpleTuner } from "./simpletuner";

/** How many handed-over command ids a runner remembers (commands of a box's running jobs are far fewer). */
const HANDLED_KEPT = 10_000;

/*
 * The runner agent on a GPU box: registers the box's inventory with the edge, heartbeats, and
 * runs exactly the jobs the Scheduler has assigned to it. The edge is the source of truth: a
 * job assigned and not running here is started; a job running here and no longer assigned
 * (cancelled, or given away while this box was offline) is stopped; a job that ends is reported.
 * This is the box's loop; each job's own life, from launch to report, is its JobSupervisor's
 * (job-supervisor.ts).
 */

/** The runner's configuration (runner/agent/config.ts), how to log, and the nvidia-smi to ask. */
export type RunnerOptions = RunnerConfig & { nvidiaSmi?: string; dmesg?: string; log: (line: string) => void };

export class Runner {
  private readonly edge: ServiceClient;
  /** The jobs whose trainer runs on this box (until its last events and report are handed over). */
  private readonly jobs = new Map<string, JobSupervisor>();
  /** Jobs whose trainer ended on this box, with the attempt: never launched again in that attempt. */
  private readonly ended = new Map<string, number>();
  /** Commands handed to trainers, acknowledged with the next ask for work. */
  private acks: number[] = [];
  /**
   * Commands already handed over, remembered past their acknowledgement: the channel's copy of a
   * command can arrive after a heartbeat's answer brought it and the next one acknowledged it (a
   * loaded edge), and must not reach the trainer a second time. The newest HANDLED_KEPT ids.
   */
  private readonly handled = new Set<number>();
  /** Jobs whose datasets are being fetched: assigned, not yet running. */
  private readonly launching = new Set<string>();
  private readonly reports: PendingReports;
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
  /** GPUs the edge has quarantined: a job given the whole box (a remote worker's) does not use them. */
  private quarantined: number[] = [];
  /** Each GPU's PCI address as nvidia-smi last gave it, to match a lost GPU's error and the kernel's Xid lines. */
  private readonly busIds = new Map<number, string>();
  private readonly xids: XidWatch;
  private xidReadableSaid: boolean | undefined;
  /** When the GPUs' health was last sampled for a heartbeat (it costs an nvidia-smi run). */
  private healthSampledAt = -Infinity;
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
    this.reports = new PendingReports(this.edge, options.workDir, options.log);
    this.xids = new XidWatch(options.dmesg);
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
    const answer = await this.edge.call(workerEndpoints.workerRegister, { body: register });
    this.heard(sent, answer);
    this.options.log(
      `registered as worker ${answer.worker_id} (${this.options.role}) with ${gpus.length} GPU(s): ${gpus.map((g) => `${g.index} ${g.name}`).join(", ") || "none"}`,
    );
    // Reports a previous run could not deliver (the edge was away when its trainers ended) go first.
    this.reports.load();
    // Jobs assigned before this runner started were running under a runner that is gone; their
    // trainers died with it. They go back to the queue (or fail at max_attempts) rather than
    // being left "running" forever; a trainer that resumes from its checkpoints picks up there.
    for (const job of answer.assignments) {
      this.ended.set(job.job_id, job.attempt);
      if (this.reports.has(job.job_id)) continue; // it ended before the restart: its report says how
      this.reports.add(job.job_id, {
        status: "interrupted",
        error: `the runner restarted while the job was running (attempt ${job.attempt})`,
      });
    }
    // The events its trainers printed while the edge was away, then how they ended.
    this.outboxLeft = await replayOutbox(this.edge, this.options.workDir, this.options.log);
    await this.reports.flush();
    this.schedule(0);
    // The edge wakes this runner through the channel when work is waiting; the regular asks
    // (pollMs) are the fallback and the heartbeat.
    this.channel = new WakeChannel(
      this.edge,
      () => this.wake(),
      this.options.log,
      (commands) => this.obeyNow(commands),
    );
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
    for (const job of this.jobs.values()) job.fence(silent, this.heartbeatTimeoutMs, this.lastContact + this.heartbeatTimeoutMs);
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

  /**
   * One ask for work, which is also the heartbeat: 1. deliver what an earlier run left in the
   * outbox and the end reports owed; 2. heartbeat with the jobs running here and the commands
   * handed over; 3. start the jobs assigned and not running, stop those no longer assigned;
   * 4. hand the new commands to their trainers; 5. list each job's checkpoints.
   */
  private async tick(): Promise<void> {
    try {
      if (this.outboxLeft) {
        const running = new Set([...this.jobs].map(([id, job]) => `${id}#${job.attempt}`));
        this.outboxLeft = await replayOutbox(this.edge, this.options.workDir, this.options.log, running);
      }
      await this.reports.flush();
      const acks = this.acks;
      const running = [...this.jobs].map(([job_id, job]) => ({ job_id, attempt: job.attempt }));
      const [host_stats, gpu_health] = await Promise.all([hostStats(), this.gpuHealth()]);
      const heartbeat: HeartbeatBody = { host_stats, acked_commands: acks, running, ...gpu_health };
      const sent = Date.now();
      // Answered well within a fence period, or counted as not answered.
      const timeoutMs = Math.round(Math.max(1000, Math.min(10_000, this.fenceAfterMs() / 3)));
      const answer = await this.edge.call(workerEndpoints.workerHeartbeat, { body: heartbeat }, { timeoutMs });
      this.heard(sent, answer);
      this.acks = this.acks.filter((id) => !acks.includes(id));
      // Set order is insertion order: forget the oldest handed-over ids past the bound.
      for (const id of this.handled) {
        if (this.handled.size <= HANDLED_KEPT) break;
        this.handled.delete(id);
      }
      this.quarantined = answer.quarantined_gpus;
      this.reconcile(answer.assignments);
      this.obey(answer.commands);
      for (const job of this.jobs.values()) job.listCheckpoints();
    } catch (error) {
      if (error instanceof ServiceError && error.status === 401) {
        this.options.log(`the edge refused this runner's token (${error.detail}); stopping`);
        void this.stop();
        return;
      }
      this.options.log(`could not reach the edge: ${(error as Error).message}; retrying`);
    }
  }

  /**
   * The GPUs' health for this heartbeat (nothing on a box without GPUs), and whether the kernel log
   * is readable (said once in the log when not). Sampled once per heartbeat period: an ask for work
   * the edge woke early (a job to start, a command for a trainer) goes without it, rather than
   * waiting for an nvidia-smi run it does not need (issue 31, "Handover").
   */
  private async gpuHealth(): Promise<Pick<HeartbeatBody, "gpu_health" | "xid_readable">> {
    if (!this.gpuIndices.length) return {};
    if (Date.now() - this.healthSampledAt < this.heartbeatPeriodMs()) return {};
    this.healthSampledAt = Date.now();
    const samples = await readGpuHealth(this.options.nvidiaSmi ?? "nvidia-smi", this.gpuIndices, this.busIds, this.xids);
    const readable = this.xids.readable ?? false;
    if (readable !== this.xidReadableSaid && !readable)
      this.options.log(
        `the kernel log is not readable (${this.xids.detail}): Xid errors are not watched, health comes from nvidia-smi alone`,
      );
    this.xidReadableSaid = readable;
    return { gpu_health: samples, xid_readable: readable };
  }

  private reconcile(assignments: Assignment[]): void {
    const assigned = new Map(assignments.map((a) => [a.job_id, a.attempt]));
    for (const job of assignments) {
      // A job whose trainer ended here is reported, not run again: a new attempt is the edge's to make.
      if (this.ended.get(job.job_id) === job.attempt) continue;
      if (this.jobs.has(job.job_id) || this.launching.has(job.job_id) || this.reports.has(job.job_id)) continue;
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
      job.unassign();
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

  /** Hands each new command to its job's trainer (JobSupervisor.command), acknowledged with the next heartbeat. */
  private obey(commands: HeartbeatAnswer["commands"]): void {
    for (const c of commands) {
      // Its trainer is not started yet (datasets coming): not acknowledged, so the edge sends it
      // again with a later answer, when there is a trainer to hand it to.
      if (this.launching.has(c.job_id) && !this.jobs.has(c.job_id)) continue;
      if (!this.handled.has(c.id)) {
        this.handled.add(c.id);
        const job = this.jobs.get(c.job_id);
        if (job && !job.unassigned) job.command(c.command);
      }
      this.acks.push(c.id);
    }
  }

  /**
   * Commands the channel brought ahead of their wake-up (issue 31: command -> trainer): handed over
   * now for a trainer that runs here; any other waits for the heartbeat's answer, which carries it
   * too. Either way it is handed over once (`handled`) and acknowledged with the next heartbeat.
   */
  private obeyNow(commands: HeartbeatAnswer["commands"]): void {
    this.obey(commands.filter((c) => this.jobs.has(c.job_id)));
  }

  /** Starts a job's supervisor: it prepares the job, then runs its trainer to its report. */
  private launch(job: Assignment): void {
    this.launching.add(job.job_id);
    void new JobSupervisor(job, this.supervisorHost()).launch().finally(() => this.launching.delete(job.job_id));
  }

  /** What a job's supervisor is given of this runner, and how it tells the runner back. */
  private supervisorHost(): SupervisorHost {
    return {
      edge: this.edge,
      options: this.options,
      box: this.box,
      gpuIndices: this.gpuIndices.filter((g) => !this.quarantined.includes(g)),
      stopping: () => this.stopping,
      gaveUp: () => this.gaveUp(),
      running: (supervisor) => void this.jobs.set(supervisor.jobId, supervisor),
      ended: (supervisor) => void this.ended.set(supervisor.jobId, supervisor.attempt),
      settled: (supervisor, report) => {
        if (this.jobs.get(supervisor.jobId) === supervisor) this.jobs.delete(supervisor.jobId);
        if (!report) return;
        this.reports.add(supervisor.jobId, report);
        void this.reports.flush();
      },
    };
  }

  /** How many trainers run on this box now. */
  runningJobs(): number {
    return this.jobs.size;
  }

  /** A stopping runner waits this long for the edge to take its trainers' last events, then leaves them in the outbox. */
  private gaveUp(): boolean {
    return this.stopping && Date.now() - this.stoppingAt > 5_000;
  }

  /** Stops asking for work and ends every trainer (SIGTERM, then SIGKILL after the grace period). */
  async stop(): Promise<void> {
    this.stopping = true;
    this.stoppingAt = Date.now();
    clearTimeout(this.timer);
    clearInterval(this.fenceTimer);
    this.channel?.close();
    await this.ticking;
    const running = [...this.jobs.values()];
    for (const job of running) job.terminate(this.options.stopGraceSeconds * 1000);
    // Trainers ended and their last events delivered, while the edge is still there to take them.
    await Promise.all(running.map((job) => job.settled));
  }
}
