import type { Env } from "../env";
import { objectNamed, type NamedNamespace } from "../durable-object-names";

/** The worker channel's RPC methods (edge/workers/channel.ts). */
export interface WorkerChannelApi {
  notify(): Promise<number>;
  disconnect(reason: string): Promise<number>;
  fetch(request: Request): Promise<Response>;
}

export type WorkerChannelNamespace = NamedNamespace<WorkerChannelApi>;

export function channelOf(env: Pick<Env, "WORKER_CHANNEL">, workerId: number): WorkerChannelApi {
  return objectNamed(env.WORKER_CHANNEL, String(workerId));
}
