import { maxRuntimeBasis } from "../jobs/estimate";
import { jobTrainer } from "../../shared/trainers";
import type { ApprovalRules, LocalSubmit } from "../../shared/schemas/queue";
import { ApiError } from "../errors";
import type { NewJob, SubmitOutcome, Submitter } from "../jobs/job";
import type { NewSubmission } from "../jobs/lifecycle/submit";
import { prepareLocalJob, type EnvironmentConfig } from "../jobs/prepare";
import { maxRuntimeMinutes } from "../jobs/runtime";
import type { Plan, PendingJob, Waiting } from "./plan";
import type { BatchPart } from "../jobs/lifecycle/batch";
import { submitAnswer } from "../queue/answer";
import { answerKeyStatement } from "../queue/idempotency-keys";

/*
 * New submissions in a pass: made jobs (edge/jobs/prepare.ts), placed among the stored pending
 * entries under placeholder ids, and sorted by what the plan made of them. Pure: the Scheduler
 * reads, writes and remembers.
 */

/**
 * A local submission to decide, or a job prepared elsewhere (a cloud submission, which always waits
 * when it cannot start). `budgetsUnchecked`: the caller has not held the submitter to their budgets,
 * so the group hands it back undecided when one applies (Scheduler.submitUnlessBudgeted).
 * `answerTo`: the Idempotency-Key the request claimed, whose answer is stored with the job.
 */
export type Submission =
  { user: Submitter; body: LocalSubmit; budgetsUnchecked?: boolean; answerTo?: { userId: number; key: string } } | { prepared: NewJob };

/** Placeholder ids of new submissions sort after every stored job of the same priority and time, in arrival order. */
export const CANDIDATE_ID_BASE = Number.MAX_SAFE_INTEGER - 1_000_000;

/** Whether an id is a new submission's placeholder. */
export const isNew = (w: Pick<Waiting, "id">) => w.id >= CANDIDATE_ID_BASE;

/** A submission refused by prepareLocalJob (no such environment, bad GPU options), as the outcome that answers it. */
export function invalidOutcome(error: unknown): Extract<SubmitOutcome, { status: "invalid" }> {
  if (!(error instanceof ApiError)) throw error;
  return {
    status: "invalid",
    httpStatus: error.status === 404 ? 404 : 422,
    code: error.code,
    message: error.detail,
    ...(error.fields ? { errors: error.fields } : {}),
  };
}

/** What a new job's run time is estimated from, besides its max runtime. */
export const facts = (job: NewJob) => ({ configName: job.configName, trainSteps: job.configSnapshot["--max_train_steps"] ?? null });

/** A new job as a plan's candidate; its expected run time is its max runtime only (withRecentRuns adds recent runs). */
export function candidateOf(job: NewJob, id: number, queuedAt: number): PendingJob {
  const minutes = maxRuntimeMinutes(job.configSnapshot["--max_runtime_minutes"]);
  return {
    id,
    jobId: job.jobId,
    userId: job.userId,
    teamId: job.teamId,
    priority: job.priority,
    priorityOverride: null,
    queuedAt,
    jobType: job.jobType,
    numProcesses: job.numProcesses,
    target: job.target,
    workerLabels: job.workerLabels,
    deviceIds: job.deviceIds,
    anyGpu: job.anyGpu,
    estimatedCost: job.estimatedCost,
    expectedMs: minutes === null ? null : minutes * 60_000,
    expectedMethod: minutes === null ? null : "max_runtime",
    expectedBasis: minutes === null ? null : maxRuntimeBasis(minutes),
    trainer: job.jobType === "local" ? jobTrainer(job.configSnapshot) : null,
  };
}

/**
 * Each submission as a job (index for index), or null with its outcome when it is refused
 * (invalid) before any plan.
 *
 * @example
 * const { jobs, outcomes } = prepareSubmissions(group, configs, capacity.approvalRules);
 */
export function prepareSubmissions(
  submissions: Submission[],
  configs: ReadonlyMap<string, EnvironmentConfig>,
  rules: ApprovalRules,
): { jobs: (NewJob | null)[]; outcomes: (SubmitOutcome | null)[] } {
  const outcomes: (SubmitOutcome | null)[] = submissions.map(() => null);
  const jobs = submissions.map((submission, index) => {
    if ("prepared" in submission) return submission.prepared;
    const { user, body } = submission;
    try {
      return prepareLocalJob(user, body, configs.get(body.config_name) ?? null, rules);
    } catch (error) {
      outcomes[index] = invalidOutcome(error);
      return null;
    }
  });
  return { jobs, outcomes };
}

/**
 * The new jobs that are a plan's candidates, under placeholder ids: a job an approval rule caught
 * waits on approval first.
 */
export function candidatesOf(jobs: (NewJob | null)[], queuedAt: number): PendingJob[] {
  const candidates: PendingJob[] = [];
  jobs.forEach((job, index) => {
    if (job !== null && job.approvalRule === null) candidates.push(candidateOf(job, CANDIDATE_ID_BASE + index, queuedAt));
  });
  return candidates;
}

/** What a plan made of the new submissions. */
export interface Sorted {
  /** The new jobs to store, each with where the plan put it, and the index of its submission. */
  fresh: { index: number; submission: NewSubmission }[];
  /** The plan's waiting jobs without the rejected ones, their positions closed up. */
  waiting: Waiting[];
  /** The new jobs' places in `waiting`, by placeholder id. */
  places: Map<number, Waiting>;
}

/**
 * Sorts the new jobs by the plan: blocked (an approval rule caught it), running (admitted),
 * rejected (no_wait and it cannot start now: answered in `outcomes`, never stored) or pending.
 */
export function sortSubmissions(
  plan: Plan,
  jobs: (NewJob | null)[],
  submissions: Submission[],
  outcomes: (SubmitOutcome | null)[],
): Sorted {
  const admittedById = new Map(plan.admitted.map((a) => [a.id, a]));
  const waitingById = new Map(plan.waiting.filter(isNew).map((w) => [w.id, w]));
  const rejected = new Set<number>();
  const fresh: Sorted["fresh"] = [];
  jobs.forEach((job, index) => {
    if (job === null) return;
    const id = CANDIDATE_ID_BASE + index;
    const admission = admittedById.get(id);
    const submission = submissions[index]!;
    if (job.approvalRule !== null) fresh.push({ index, submission: { job, to: "blocked" } });
    else if (admission) fresh.push({ index, submission: { job, to: "running", admission } });
    else if ("body" in submission && submission.body.no_wait) {
      const waiting = waitingById.get(id)!;
      outcomes[index] = { status: "rejected", reason: waiting.reason, message: waiting.message };
      rejected.add(id);
    } else fresh.push({ index, submission: { job, to: "pending" } });
  });
  if (!rejected.size) return { fresh, waiting: plan.waiting, places: waitingById };
  // Rejected submissions were never stored: the others' positions close up behind them.
  const waiting = plan.waiting.filter((w) => !rejected.has(w.id)).map((w, i) => ({ ...w, position: i + 1 }));
  return { fresh, waiting, places: new Map(waiting.filter(isNew).map((w) => [w.id, w])) };
}

/**
 * What a new job is answered, given where the batch stored it (its id, and its approval request's
 * when it is blocked).
 */
export function freshOutcome(
  { index, submission }: Sorted["fresh"][number],
  places: Sorted["places"],
  stored: { id: number; approvalId: number | null },
): SubmitOutcome {
  const { job } = submission;
  const { id } = stored;
  if (submission.to === "blocked")
    return {
      status: "blocked",
      id,
      jobId: job.jobId,
      approvalId: stored.approvalId!,
      message: `awaiting an admin's approval: ${job.approvalRule}`,
    };
  if (submission.to === "running")
    return { status: "running", id, jobId: job.jobId, gpus: submission.admission.gpus, workerId: submission.admission.workerId };
  const place = places.get(CANDIDATE_ID_BASE + index)!;
  return { status: "queued", id, jobId: job.jobId, position: place.position, reason: place.reason, message: place.message };
}

/**
 * The answers of the submissions that claimed an Idempotency-Key, for the batch that stores their
 * jobs: each as POST /api/queue/submit answers it (200, submitAnswer's body, which names no stored
 * id), so a replay finds it as soon as the job exists. An invalid submission's 4xx is left to the
 * middleware, as is every submission without `answerTo`.
 */
export function storedAnswers(submissions: Submission[], sorted: Sorted, outcomes: (SubmitOutcome | null)[]): BatchPart<void> {
  const statements = [];
  const fresh = new Map(sorted.fresh.map((f) => [f.index, f]));
  for (const [index, submission] of submissions.entries()) {
    if (!("answerTo" in submission) || submission.answerTo === undefined) continue;
    const f = fresh.get(index);
    const outcome = outcomes[index] ?? (f ? freshOutcome(f, sorted.places, { id: 0, approvalId: 0 }) : null);
    if (outcome === null || outcome.status === "invalid") continue;
    const { userId, key } = submission.answerTo;
    statements.push(answerKeyStatement(userId, key, { status: 200, body: JSON.stringify(submitAnswer(outcome)) }));
  }
  return { statements, read: () => undefined };
}
