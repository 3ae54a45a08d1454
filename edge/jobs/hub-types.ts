import type { WebhookDelivery } from "../../shared/schemas/deliveries";
import type { Env } from "../env";
import { objectNamed } from "../durable-object-names";

/** An event as watchers receive it: the trainer's fields plus its index and time. */
export interface HubEvent {
  index: number;
  timestamp: string;
  type: string;
  [field: string]: unknown;
}

/** A page of the job's outbound webhook deliveries, oldest first, and whether later ones exist. */
export interface DeliveryPage {
  deliveries: WebhookDelivery[];
  more: boolean;
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
  deliveries(afterId: number, limit: number): Promise<DeliveryPage>;
  fetch(request: Request): Promise<Response>;
}

/** The hub of one job. */
export function hubOf(env: Env, jobId: string): EventsHubApi {
  return objectNamed<EventsHubApi>(env.EVENTS_HUB, jobId);
}
