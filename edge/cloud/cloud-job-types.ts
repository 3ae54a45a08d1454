import type { Env } from "../env";
import { objectNamed, type NamedNamespace } from "../durable-object-names";

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

export type CloudJobNamespace = NamedNamespace<CloudJobApi>;

/** The Durable Object of one cloud job (named by job id). */
export function cloudJobOf(env: Pick<Env, "CLOUD_JOBS">, jobId: string): CloudJobApi {
  return objectNamed(env.CLOUD_JOBS, jobId);
}
