import type { z } from "zod";
import type {
  Assignment as AssignmentSchema,
  HeartbeatAnswer as HeartbeatAnswerSchema,
  JobFinish,
  WorkerHeartbeat,
  WorkerRegister,
} from "../shared/schemas/workers";
import type { EventBatch } from "../shared/schemas/events";

/*
 * The runner's side of the worker API: JSON over HTTPS with the worker token. Every shape sent or
 * received is the edge's own (shared/schemas): an answer is parsed with its schema, so a change
 * on one side shows as a clear error on the other, not as an undefined deep in the runner.
 */

export type Assignment = z.infer<typeof AssignmentSchema>;
export type HeartbeatAnswer = z.infer<typeof HeartbeatAnswerSchema>;
export type RegisterBody = z.input<typeof WorkerRegister>;
export type HeartbeatBody = z.input<typeof WorkerHeartbeat>;
export type FinishBody = z.infer<typeof JobFinish>;
export type EventBatchBody = z.infer<typeof EventBatch>;

export class EdgeError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(`${status}: ${detail}`);
  }
}

/** An answer that is not what its schema says: the edge and this runner disagree on the API. */
export class EdgeAnswerError extends Error {}

/** Something with zod's safeParse: a schema of shared/schemas. */
type AnswerSchema<T> = {
  safeParse(data: unknown): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } };
};

export class EdgeClient {
  constructor(
    private readonly base: string,
    private readonly token: string,
  ) {}

  /**
   * A GET whose JSON answer is parsed with `schema`.
   *
   * @example
   * const manifest = await edge.get("/api/workers/datasets/manifest?job_id=j&path=p", DatasetManifest);
   */
  async get<T>(path: string, schema: AnswerSchema<T>): Promise<T> {
    const response = await this.fetch(path);
    return parseAnswer(path, await response.json(), schema);
  }

  /** A GET with the token; throws EdgeError unless 2xx (the body is left to the caller). */
  async fetch(path: string): Promise<Response> {
    const response = await fetch(new URL(path, this.base), {
      headers: { authorization: `Bearer ${this.token}` },
      signal: AbortSignal.timeout(300_000),
    });
    if (!response.ok) throw await edgeError(response);
    return response;
  }

  /** A POST of `body` as JSON; the answer is parsed with `schema` when one is given. */
  async post<T = unknown>(path: string, body: unknown, schema?: AnswerSchema<T>): Promise<T> {
    const response = await fetch(new URL(path, this.base), {
      method: "POST",
      headers: { authorization: `Bearer ${this.token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    if (!response.ok) throw await edgeError(response);
    const answer = (await response.json()) as unknown;
    return schema ? parseAnswer(path, answer, schema) : (answer as T);
  }
}

function parseAnswer<T>(path: string, answer: unknown, schema: AnswerSchema<T>): T {
  const parsed = schema.safeParse(answer);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new EdgeAnswerError(
    `the edge's answer to ${path.split("?")[0]} is not what this runner expects (${issue ? `${issue.path.join(".") || "(body)"}: ${issue.message}` : "invalid"}); are the runner and the edge the same version?`,
  );
}

/** A refusal as an EdgeError with the answer's `detail` (or its text when it is not JSON). */
async function edgeError(response: Response): Promise<EdgeError> {
  const text = await response.text();
  try {
    return new EdgeError(response.status, (JSON.parse(text) as { detail?: string }).detail ?? text);
  } catch {
    return new EdgeError(response.status, text);
  }
}
