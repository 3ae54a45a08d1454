import type { LocalSubmitResult } from "../../shared/schemas/queue";
import { ApiError } from "../errors";
import type { SubmitOutcome } from "../scheduler/types";

/**
 * The Scheduler's decision on a submission as the API answers it (spec 2.6): the same for
 * POST /api/queue/submit and POST /api/training/start. An invalid submission is thrown as its 4xx.
 */
export function submitAnswer(outcome: SubmitOutcome): LocalSubmitResult {
  const base = { dry_run: false, allocated_gpus: null, worker_id: null, queue_position: null, wait_reason: null };
  switch (outcome.status) {
    case "invalid":
      throw new ApiError(outcome.httpStatus, outcome.code, outcome.message, outcome.errors);
    case "running": {
      const where =
        outcome.workerId !== null
          ? `dispatched to worker ${outcome.workerId}`
          : outcome.gpus?.length
            ? `running on GPUs [${outcome.gpus.join(", ")}]`
            : "running on the CPU (no GPUs requested)";
      return {
        ...base,
        success: true,
        job_id: outcome.jobId,
        status: "running",
        allocated_gpus: outcome.gpus,
        worker_id: outcome.workerId,
        message: where,
      };
    }
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
