import type { Level } from "../../shared/levels";
import type { ErrorBody } from "../../shared/schemas/common";
import type { DURATION_METHODS, WaitReason } from "../../shared/schemas/queue";

/*
 * A job's vocabulary: who submits it, the new job a submission becomes (edge/jobs/prepare.ts), the
 * place a pass gives it (an admission, or a place in the queue with the reason it waits) and what
 * a submission is answered. The Scheduler decides with these; the lifecycle
 * (edge/jobs/lifecycle/) stores them.
 */

/** Who submits: what a submission needs of the caller. */
export interface Submitter {
  id: number;
  team_id: string | null;
  priority: number;
  /** Decides which options the submitter may run (shared/admin-options.ts). */
  level: Level | null;
  /** Set when a budget of theirs is used up and the admin lets such jobs wait for approval (edge/spend/budgets.ts): the rule it waits on. */
  budget_approval?: string | null;
}

/** What a job needs to be placed: GPUs on the local box, a remote worker, or the cloud pool. */
export interface Placement {
  jobType: "local" | "cloud";
  numProcesses: number;
  target: "auto" | "worker" | "local";
  workerLabels: Record<string, string> | null;
  deviceIds: number[] | null;
  anyGpu: boolean;
}

/** A cloud job's record (the cloud_jobs row), stored in the same write batch as the job. */
export interface CloudRecord {
  provider: string;
  hardware: string;
  ratePerSecond: number;
  /** The run-time allowance its estimate assumes, in seconds. */
  expectedSeconds: number;
  destination: unknown;
  summary: unknown;
  archiveBytes: number;
}

/** A submission made ready: what the Scheduler needs to place the job, and what to store with it. */
export interface NewJob extends Placement {
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
  /** The cloud provider of a cloud job; null for local and worker jobs. */
  provider?: string | null;
  /** A cloud job's run-time allowance in seconds (cloud_jobs.expected_seconds), which its expected end assumes; absent for others. */
  cloudSeconds?: number;
  /** A cloud job's record, inserted with the job (edge/jobs/lifecycle/submit.ts); absent for others. */
  cloud?: CloudRecord;
  /** A retry (POST /api/queue/{job_id}/retry): the job it continues, its lineage and the checkpoints it may resume from. */
  retry?: { of: string; lineageId: string; resumeFrom: ResumePoint[] };
}

/** A checkpoint a retry may resume from: in `jobId`'s directory at `path` (relative to it), saved at `step`. */
export interface ResumePoint {
  job_id: string;
  path: string;
  step: number | null;
}

/** Where a pass starts a job: its local GPUs or its worker. */
export interface Admission {
  id: number;
  jobId: string;
  /** Local box devices given to the job ([] for a CPU job); null when not on the local box. */
  gpus: number[] | null;
  workerId: number | null;
  /** When it is expected to end, from its expected run time (what backfilling it relied on); null or absent: unknown. */
  expectedEndAt?: number | null;
}

/** Why a job waits and where, as the latest pass placed it. */
export interface WaitInfo {
  id: number;
  position: number;
  effectivePriority: number;
  reason: WaitReason;
  message: string;
  /** Epoch ms a job holding a reservation is expected to start (null: no start promised); absent without one. */
  expectedStartAt?: number | null;
  /** How long it is expected to run once started, as the plan estimated it; absent when unknown. */
  expected?: { ms: number; method: (typeof DURATION_METHODS)[number]; basis: string };
  /** When it is expected to start (epoch ms; null: unknown) and how that was estimated (edge/scheduler/forecast.ts). */
  start?: { at: number | null; basis: string };
}

/** What a submission is answered. */
export type SubmitOutcome =
  | { status: "running"; id: number; jobId: string; gpus: number[] | null; workerId: number | null }
  | { status: "queued"; id: number; jobId: string; position: number; reason: WaitReason; message: string }
  | { status: "blocked"; id: number; jobId: string; approvalId: number; message: string }
  | { status: "rejected"; reason: WaitReason; message: string }
  /** The submission itself is wrong (no such environment, bad device options); nothing stored. */
  | { status: "invalid"; httpStatus: 404 | 422; code: string; message: string; errors?: ErrorBody["errors"] };

/**
 * What a submission would do now (POST /api/queue/submit with dry_run), decided as a submission is
 * but with nothing stored: so no ids, and for a blocked one the approval rule that would catch it.
 */
export type PreviewOutcome =
  | { status: "running"; gpus: number[] | null; workerId: number | null }
  | {
      status: "queued";
      position: number;
      reason: WaitReason;
      message: string;
      start: { at: number | null; basis: string };
      expected: { ms: number; basis: string } | null;
    }
  | { status: "blocked"; rule: string }
  | Extract<SubmitOutcome, { status: "rejected" | "invalid" }>;
