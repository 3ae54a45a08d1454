import type { Env } from "../env";
import { objectNamed, type NamedNamespace } from "../durable-object-names";

/** One job's status change as queue watchers see it: only what GET /api/queue shows everyone. */
export interface QueueChange {
  job_id: string;
  /** null: the job was just submitted. */
  from: string | null;
  to: string;
}

/** The queue hub's RPC methods (edge/queue/hub.ts), for code type-checked without workerd's types. */
export interface QueueHubApi {
  changed(jobs: QueueChange[]): Promise<void>;
  fetch(request: Request): Promise<Response>;
}

export type QueueHubNamespace = NamedNamespace<QueueHubApi>;

/**
 * The one queue hub (named "main").
 *
 * @example
 * await queueHubOf(env).changed([{ job_id: "local-1", from: "pending", to: "running" }]);
 */
export function queueHubOf(env: Pick<Env, "QUEUE_HUB">): QueueHubApi {
  return objectNamed(env.QUEUE_HUB, "main");
}
