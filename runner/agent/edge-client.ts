import type { z } from "zod";
import { ServiceClient } from "../../shared/client/client";
import type {
  Assignment as AssignmentSchema,
  HeartbeatAnswer as HeartbeatAnswerSchema,
  JobFinish,
  WorkerHeartbeat,
  WorkerRegister,
} from "../../shared/schemas/workers";
import type { EventBatch } from "../../shared/schemas/events";
import { version } from "../../package.json";
import { httpFetch } from "./http-fetch";

/*
 * The runner's side of the worker API: every call goes through the shared typed client
 * (shared/client) with the worker token, naming an endpoint of shared/client/endpoints-workers.ts, so
 * what it sends and parses is the edge's own schemas; a change on one side shows as a clear
 * ServiceError (`unexpected_answer`) on the other, not as an undefined deep in the runner.
 */

export type Assignment = z.infer<typeof AssignmentSchema>;
export type HeartbeatAnswer = z.infer<typeof HeartbeatAnswerSchema>;
export type RegisterBody = z.input<typeof WorkerRegister>;
export type HeartbeatBody = z.input<typeof WorkerHeartbeat>;
export type FinishBody = z.infer<typeof JobFinish>;
export type EventBatchBody = z.infer<typeof EventBatch>;

/**
 * The client a runner talks to its edge with: the worker token as a bearer, 30 s per call
 * unless the call says otherwise (a dataset file download), over node:http(s) kept-alive
 * connections rather than the global fetch (./http-fetch.ts: undici's memory, issue 31).
 *
 * @example
 * const edge = edgeClient("https://train.example.com", "stw_...");
 * const answer = await edge.call(workerEndpoints.workerHeartbeat, { body: { acked_commands: [] } });
 */
export function edgeClient(url: string, token: string): ServiceClient {
  return new ServiceClient({
    baseUrl: url,
    bearer: token,
    timeoutMs: 30_000,
    headers: { "user-agent": `training-runner/${version}` },
    fetch: httpFetch(),
  });
}

/**
 * Whether a refusal is final (4xx: the edge will answer the same again), not a network failure, a
 * 5xx, a timeout (408) or a rate limit (429), which are worth trying again.
 */
export const refusedForGood = (status: number) => status >= 400 && status < 500 && status !== 408 && status !== 429;
