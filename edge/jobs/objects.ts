import type { LocalSubmit } from "../../shared/schemas/queue";
import type { TrainerCommand } from "../../shared/trainer-commands";
import { objectNamed } from "../durable-object-names";
import type { Env } from "../env";
import type { NewJob, PreviewOutcome, SubmitOutcome, Submitter, WaitInfo } from "./job";

/*
 * The Durable Objects a job's life reaches beyond its own events hub (hub-types.ts), as the RPC
 * interfaces the job core needs of them, each with its accessor: the Scheduler (a pass, a
 * submission), the queue hub (status changes to the queue's watchers), a worker's channel (wake
 * its runner) and a cloud job's object (start, cancel, track). Each object's class implements its
 * interface in its own room (edge/scheduler/, edge/queue/, edge/workers/, edge/cloud/), above
 * edge/jobs/ in the README's layering, so the lifecycle and its effects import none of their code.
 * Declared apart from the classes so that code type-checked for Node (tests, the local host) can
 * name them without the Workers runtime's types.
 */

// ---- the Scheduler (edge/scheduler/scheduler.ts)
export interface PassResult {
  started: string[];
  waiting: number;
  offline: string[];
}

/** The Scheduler's RPC methods (edge/scheduler/scheduler.ts). */
export interface SchedulerApi {
  /** `changed`: ids of jobs whose state a route just changed, so the pass sees them at once. */
  pass(trigger: string, changed?: string[], rereadAll?: boolean): Promise<PassResult>;
  /** The pass at the service's start, local jobs unpaused first (edge/host-call.ts). */
  startupPass(): Promise<PassResult>;
  submit(user: Submitter, body: LocalSubmit): Promise<SubmitOutcome>;
  /**
   * `submit` before the submitter is held to their budgets: decided when no budget applies to
   * them as the Scheduler reads the budgets, else "budgeted" with nothing stored (then check the
   * budget and call `submit`). `answerTo`: the request's claimed Idempotency-Key, answered (200,
   * submitAnswer's body) in the batch that stores the job, for every outcome but "budgeted" and invalid.
   */
  submitUnlessBudgeted(user: Submitter, body: LocalSubmit, answerTo?: { userId: number; key: string }): Promise<SubmitOutcome | "budgeted">;
  /** What `submit` would answer now for this submission; stores nothing and changes no other job's admission. */
  preview(user: Submitter, body: LocalSubmit): Promise<PreviewOutcome>;
  /** A job prepared elsewhere (a cloud submission): stored pending, running or blocked by the same pass as local ones. */
  submitJob(job: NewJob): Promise<SubmitOutcome>;
  /**
   * Where each waiting job stands and why, as the latest pass placed it; never admits anything.
   * `ids`: only these entries' (those waiting), which is all a page of the queue needs.
   */
  waitInfo(ids?: number[]): Promise<WaitInfo[]>;
}

/**
 * The one Scheduler instance.
 *
 * @example
 * await schedulerOf(c.env).pass("cancel");
 */
export function schedulerOf(env: Pick<Env, "SCHEDULER">): SchedulerApi {
  return objectNamed<SchedulerApi>(env.SCHEDULER, "main");
}

// ---- the queue hub (edge/queue/hub.ts)
/** One job's status change as queue watchers see it: only what GET /api/queue shows everyone. */
export interface QueueChange {
  job_id: string;
  /** null: the job was just submitted. */
  from: string | null;
  to: string;
}

/** The queue hub's RPC methods (edge/queue/hub.ts), for code type-checked without workerd's types. */
export interface QueueHubApi {
  changed(jobs: QueueChange[]): Promise<void>;
  fetch(request: Request): Promise<Response>;
}

/**
 * The one queue hub (named "main").
 *
 * @example
 * await queueHubOf(env).changed([{ job_id: "local-1", from: "pending", to: "running" }]);
 */
export function queueHubOf(env: Pick<Env, "QUEUE_HUB">): QueueHubApi {
  return objectNamed<QueueHubApi>(env.QUEUE_HUB, "main");
}

// ---- a worker's channel (edge/workers/channel.ts)
/** The worker channel's RPC methods (edge/workers/channel.ts). */
export interface WorkerChannelApi {
  /** Wakes the worker's runner; `commands`: new trainer commands it may hand over at once. */
  notify(commands?: { id: number; job_id: string; command: TrainerCommand }[]): Promise<number>;
  disconnect(reason: string): Promise<number>;
  fetch(request: Request): Promise<Response>;
}

export function channelOf(env: Pick<Env, "WORKER_CHANNEL">, workerId: number): WorkerChannelApi {
  return objectNamed<WorkerChannelApi>(env.WORKER_CHANNEL, String(workerId));
}

// ---- a cloud job's object (edge/cloud/cloud-job.ts)
/** A cloud job's Durable Object's RPC methods (edge/cloud/cloud-job.ts), for code type-checked without workerd's types. */
export interface CloudJobApi {
  /** The job was admitted: package, upload and submit it to its provider (idempotent). */
  start(jobId: string): Promise<void>;
  /** The job was cancelled while running: cancel it at the provider, billing the time used (idempotent). */
  cancel(jobId: string): Promise<void>;
  /** A verified provider webhook about this job: apply it now. */
  update(jobId: string, payload: unknown): Promise<void>;
  /** Make sure the job is being tracked (the Scheduler's sweep calls it for jobs not polled lately). */
  poke(jobId: string): Promise<void>;
}

/** The Durable Object of one cloud job (named by job id). */
export function cloudJobOf(env: Pick<Env, "CLOUD_JOBS">, jobId: string): CloudJobApi {
  return objectNamed<CloudJobApi>(env.CLOUD_JOBS, jobId);
}
