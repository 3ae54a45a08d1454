import type { LocalSubmitResult } from "../../shared/schemas/queue";
import { ApiError } from "../errors";
import { AWAITING_APPROVAL_BASIS, UNKNOWN_RUN_BASIS } from "../jobs/estimate";
import type { PreviewOutcome, SubmitOutcome } from "../jobs/job";

/**
 * The Scheduler's decision on a submission as the API answers it: the same for
 * POST /api/queue/submit and POST /api/training/start. With `dryRun` (a PreviewOutcome) it says
 * what would happen now: no job id, and a message that starts "would". An invalid submission is
 * thrown as its 4xx either way.
 *
 * @example
 * submitAnswer({ status: "running", gpus: [0, 1], workerId: null }, true).message; // "would run on GPUs [0, 1]"
 */
export function submitAnswer(outcome: SubmitOutcome | PreviewOutcome, dryRun = false): LocalSubmitResult {
  if (outcome.status === "invalid") throw new ApiError(outcome.httpStatus, outcome.code, outcome.message, outcome.errors);
  const would = (stored: string, preview: string) => (dryRun ? `would ${preview}` : stored);
  const base = {
    success: true,
    dry_run: dryRun,
    job_id: "jobId" in outcome ? outcome.jobId : null,
    allocated_gpus: null,
    worker_id: null,
    queue_position: null,
    wait_reason: null,
  };
  // The estimates are a dry run's: a stored job's are in the listing after the next pass.
  const estimate = (start: { at: number | null; basis: string }, run: { ms: number; basis: string } | null) =>
    dryRun
      ? {
          expected_start_at: start.at === null ? null : new Date(start.at).toISOString(),
          expected_start_basis: start.basis,
          expected_run_seconds: run === null ? null : Math.round(run.ms / 1000),
          expected_run_basis: run === null ? UNKNOWN_RUN_BASIS : run.basis,
        }
      : {};
  switch (outcome.status) {
    case "running": {
      const { gpus, workerId } = outcome;
      const devices = gpus?.length ? `GPUs [${gpus.join(", ")}]` : "the CPU (no GPUs requested)";
      const message =
        workerId !== null
          ? would(`dispatched to worker ${workerId}`, `be dispatched to worker ${workerId}`)
          : would(`running on ${devices}`, `run on ${devices}`);
      return { ...base, status: "running", allocated_gpus: gpus, worker_id: workerId, message };
    }
    case "queued":
      return {
        ...base,
        ...("start" in outcome ? estimate(outcome.start, outcome.expected) : {}),
        status: "queued",
        queue_position: outcome.position,
        wait_reason: outcome.reason,
        message: would(`queued: ${outcome.message}`, `queue at position ${outcome.position}: ${outcome.message}`),
      };
    case "blocked":
      return {
        ...base,
        ...(dryRun ? { expected_start_at: null, expected_start_basis: AWAITING_APPROVAL_BASIS } : {}),
        status: "blocked",
        wait_reason: "awaiting_approval",
        message: "rule" in outcome ? `would wait for an admin's approval: ${outcome.rule}` : outcome.message,
      };
    case "rejected":
      return {
        ...base,
        success: false,
        status: "rejected",
        wait_reason: outcome.reason,
        message: would(`rejected (no_wait): ${outcome.message}`, `be rejected (no_wait): ${outcome.message}`),
      };
  }
}
