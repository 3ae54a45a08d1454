import type { Level } from "../../shared/levels";
import type { ErrorBody } from "../../shared/schemas/common";
import type { DURATION_METHODS, LocalSubmit, WaitReason } from "../../shared/schemas/queue";
import type { PendingJob } from "./plan";
import type { NamedNamespace } from "../durable-object-names";

/*
 * What the Scheduler Durable Object offers over RPC, apart from its class, so that code type-checked
 * for Node (tests, the local host) can name it without the Workers runtime's types.
 */

/** A submission for the Scheduler: what it needs to place the job, and what to store with it. */
export interface NewJob extends Pick<PendingJob, "jobType" | "numProcesses" | "target" | "workerLabels" | "deviceIds" | "anyGpu"> {
  jobId: string;
  userId: number;
  teamId: string | null;
  priority: number;
  configName: string;
  estimatedCost: number;
  metadata: Record<string, unknown> | null;
  /** The approval rule that caught it, or null when it may run without approval. */
  approvalRule: string | null;
  /** The environment's option map and dataloader at submit: what the job runs, whatever happens to the environment later. */
  configSnapshot: Record<string, unknown>;
  dataloaderSnapshot: unknown[];
  /** The cloud provider of a cloud job (spec 2.1 `provider`); null for local and worker jobs. */
  provider?: string | null;
  /** A cloud job's run-time allowance in seconds (cloud_jobs.expected_seconds), which its expected end assumes; absent for others. */
  cloudSeconds?: number;
}

/** Who submits: what the Scheduler needs of the caller. */
export interface Submitter {
  id: number;
  team_id: string | null;
  priority: number;
  /** Decides which options the submitter may run (shared/admin-options.ts). */
  level: Level | null;
}

export type SubmitOutcome =
  | { status: "running"; id: number; jobId: string; gpus: number[] | null; workerId: number | null }
  | { status: "queued"; id: number; jobId: string; position: number; reason: WaitReason; message: string }
  | { status: "blocked"; id: number; jobId: string; approvalId: number; message: string }
  | { status: "rejected"; reason: WaitReason; message: string }
  /** The submission itself is wrong (no such environment, bad device options); nothing stored. */
  | { status: "invalid"; httpStatus: 404 | 422; code: string; message: string; errors?: ErrorBody["errors"] };

/**
 * What a submission would do now (POST /api/queue/submit with dry_run), decided as `submit` decides
 * but with nothing stored: so no ids, and for a blocked one the approval rule that would catch it.
 */
export type PreviewOutcome =
  | { status: "running"; gpus: number[] | null; workerId: number | null }
  | { status: "queued"; position: number; reason: WaitReason; message: string }
  | { status: "blocked"; rule: string }
  | Extract<SubmitOutcome, { status: "rejected" | "invalid" }>;

export interface WaitInfo {
  id: number;
  position: number;
  effectivePriority: number;
  reason: WaitReason;
  message: string;
  /** Epoch ms a job holding a reservation is expected to start (null: no start promised); absent without one. */
  expectedStartAt?: number | null;
  /** How long it is expected to run once started, as the plan estimated it; absent when unknown. */
  expected?: { ms: number; method: (typeof DURATION_METHODS)[number] };
}

export interface PassResult {
  started: string[];
  waiting: number;
  offline: string[];
}

/** The Scheduler's RPC methods (edge/scheduler/scheduler.ts). */
export interface SchedulerApi {
  /** `changed`: ids of jobs whose state a route just changed, so the pass sees them at once. */
  pass(trigger: string, changed?: string[], rereadAll?: boolean): Promise<PassResult>;
  submit(user: Submitter, body: LocalSubmit): Promise<SubmitOutcome>;
  /** What `submit` would answer now for this submission; stores nothing and changes no other job's admission. */
  preview(user: Submitter, body: LocalSubmit): Promise<PreviewOutcome>;
  /** A job prepared elsewhere (a cloud submission): stored pending, running or blocked by the same pass as local ones. */
  submitJob(job: NewJob): Promise<SubmitOutcome>;
  waitInfo(): Promise<WaitInfo[]>;
  /** Drops the limits, rules, workers and environments kept for submissions (after changing them without a pass). */
  forget(): Promise<void>;
}

/** The SCHEDULER binding, as far as this code uses it. */
export type SchedulerNamespace = NamedNamespace<SchedulerApi>;
