import type { LocalSubmit } from "../../shared/schemas/queue";
import type { NewJob, PreviewOutcome, SubmitOutcome, Submitter, WaitInfo } from "../jobs/job";
import type { NamedNamespace } from "../durable-object-names";

/*
 * What the Scheduler Durable Object offers over RPC, apart from its class, so that code type-checked
 * for Node (tests, the local host) can name it without the Workers runtime's types. The job's
 * vocabulary it speaks is edge/jobs/job.ts.
 */

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
  /** Where each waiting job stands and why, as the latest pass placed it; never admits anything. */
  waitInfo(): Promise<WaitInfo[]>;
}

/** The SCHEDULER binding, as far as this code uses it. */
export type SchedulerNamespace = NamedNamespace<SchedulerApi>;
