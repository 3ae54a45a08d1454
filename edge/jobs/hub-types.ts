import type { Env } from "../env";

/** An event as watchers receive it: the trainer's fields plus its index and time. */
export interface HubEvent {
  index: number;
  timestamp: string;
  type: string;
  [field: string]: unknown;
}

/** A retried job's attempt (the one it runs next), of how many, and why it was retried. */
export interface RetryDetail {
  attempt: number | null;
  max_attempts: number | null;
  error_message: string | null;
}

/** The events hub's RPC methods (edge/jobs/hub.ts), for code type-checked without workerd's types. */
export interface EventsHubApi {
  publish(jobId: string, events: HubEvent[]): Promise<void>;
  finish(jobId: string, status: string, detail?: { error_message?: string | null }): Promise<void>;
  retrying(jobId: string, retry: RetryDetail): Promise<void>;
  deliveries(): Promise<{ url: string; type: string; status: string; attempts: number; last_error: string | null; created_at: string; delivered_at: string | null }[]>;
  fetch(request: Request): Promise<Response>;
}

export interface EventsHubNamespace {
  idFromName(name: string): unknown;
  get(id: never): EventsHubApi;
}

/** The hub of one job. */
export function hubOf(env: Env, jobId: string): EventsHubApi {
  return env.EVENTS_HUB.get(env.EVENTS_HUB.idFromName(jobId) as never);
}
