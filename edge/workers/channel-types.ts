import type { Env } from "../env";

/** The worker channel's RPC methods (edge/workers/channel.ts). */
export interface WorkerChannelApi {
  notify(): Promise<number>;
  disconnect(reason: string): Promise<number>;
  fetch(request: Request): Promise<Response>;
}

export interface WorkerChannelNamespace {
  idFromName(name: string): unknown;
  get(id: never): WorkerChannelApi;
}

export function channelOf(env: Pick<Env, "WORKER_CHANNEL">, workerId: number): WorkerChannelApi {
  return env.WORKER_CHANNEL.get(env.WORKER_CHANNEL.idFromName(String(workerId)) as never);
}
