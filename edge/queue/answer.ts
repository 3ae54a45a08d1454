import type { LocalSubmitResult } from "../../shared/schemas/queue";
import { ApiError } from "../errors";
import type { PreviewOutcome, SubmitOutcome } from "../scheduler/types";

type Invalid = Extract<SubmitOutcome, { status: "invalid" }>;

// An invalid submission answers the same 4xx whether it was a dry run or not.
const refusal = (outcome: Invalid) => new ApiError(outcome.httpStatus, outcome.code, outcome.message, outcome.errors);

const placement = (gpus: number[] | null, workerId: number | null) =>
  workerId !== null
    ? { stored: `dispatched to worker ${workerId}`, preview: `would be dispatched to worker ${workerId}` }
    : gpus?.length
      ? { stored: `running on GPUs [${gpus.join(", ")}]`, preview: `would run on GPUs [${gpus.join(", ")}]` }
      : { stored: "running on the CPU (no GPUs requested)", preview: "would run on the CPU (no GPUs requested)" };

/**
 * The Scheduler's decision on a submission as the API answers it (spec 2.6): the same for
 * POST /api/queue/submit and POST /api/training/start. An invalid submission is thrown as its 4xx.
 */
export function submitAnswer(outcome: SubmitOutcome): LocalSubmitResult {
  const base = { dry_run: false, allocated_gpus: null, worker_id: null, queue_position: null, wait_reason: null };
  switch (outcome.status) {
    case "invalid":
      throw refusal(outcome);
    case "running":
      return {
        ...base,
        success: true,
        job_id: outcome.jobId,
        status: "running",
        allocated_gpus: outcome.gpus,
        worker_id: outcome.workerId,
        message: placement(outcome.gpus, outcome.workerId).stored,
      };
    case "queued":
      return {
        ...base,
        success: true,
        job_id: outcome.jobId,
        status: "queued",
        queue_position: outcome.position,
        wait_reason: outcome.reason,
        message: `queued: ${outcome.message}`,
      };
    case "blocked":
      return {
        ...base,
        success: true,
        job_id: outcome.jobId,
        status: "blocked",
        wait_reason: "awaiting_approval",
        message: outcome.message,
      };
    case "rejected":
      return {
        ...base,
        success: false,
        job_id: null,
        status: "rejected",
        wait_reason: outcome.reason,
        message: `rejected (no_wait): ${outcome.message}`,
      };
  }
}

/**
 * A dry run's answer: the fields a real submission would answer now, with `dry_run: true`, no
 * job id, and a message that starts "would". An invalid submission is thrown as its 4xx, as
 * `submitAnswer` does.
 *
 * @example
 * previewAnswer({ status: "running", gpus: [0, 1], workerId: null }).message; // "would run on GPUs [0, 1]"
 */
export function previewAnswer(outcome: PreviewOutcome): LocalSubmitResult {
  const base = { dry_run: true, job_id: null, allocated_gpus: null, worker_id: null, queue_position: null, wait_reason: null };
  switch (outcome.status) {
    case "invalid":
      throw refusal(outcome);
    case "running":
      return {
        ...base,
        success: true,
        status: "running",
        allocated_gpus: outcome.gpus,
        worker_id: outcome.workerId,
        message: placement(outcome.gpus, outcome.workerId).preview,
      };
    case "queued":
      return {
        ...base,
        success: true,
        status: "queued",
        queue_position: outcome.position,
        wait_reason: outcome.reason,
        message: `would queue at position ${outcome.position}: ${outcome.message}`,
      };
    case "blocked":
      return {
        ...base,
        success: true,
        status: "blocked",
        wait_reason: "awaiting_approval",
        message: `would wait for an admin's approval: ${outcome.rule}`,
      };
    case "rejected":
      return {
        ...base,
        success: false,
        status: "rejected",
        wait_reason: outcome.reason,
        message: `would be rejected (no_wait): ${outcome.message}`,
      };
  }
}
