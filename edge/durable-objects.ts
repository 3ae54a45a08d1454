import type { CloudJobNamespace } from "./cloud/cloud-job-types";
import type { EventsHubNamespace } from "./jobs/hub-types";
import type { QueueHubNamespace } from "./queue/hub-types";
import type { MetricsNamespace } from "./metrics/collector-types";
import type { RateLimiterNamespace } from "./ratelimit/limiter-types";
import type { SchedulerNamespace } from "./scheduler/types";
import type { WorkerChannelNamespace } from "./workers/channel-types";

/*
 * Every Durable Object of the Worker, declared once: its binding, its class and the migration
 * that created it. The Worker's bindings (edge/env.ts) and the local stack's Miniflare
 * (edge/local/stack.ts) read this; edge/index.ts exports the classes and wrangler.toml, a static
 * file wrangler reads, repeats the bindings and migrations: test/durable-objects.test.ts holds
 * both to this list. A new Durable Object: its class exported from edge/index.ts, an entry here,
 * and in wrangler.toml a binding and a new [[migrations]] tag.
 * Imports types only, so Node code (the local stack) can read it.
 */

/** One Durable Object class; `Namespace` is the type of its binding in Env. */
export interface DurableObjectDeclaration<Namespace> {
  /** The class's name, as edge/index.ts exports it. */
  readonly className: string;
  /** The wrangler.toml [[migrations]] tag that created the class (SQLite storage). Never edit one that has shipped. */
  readonly migrationTag: string;
  /** Type only, never set: what the binding is in Env. */
  readonly binding?: Namespace;
}

const durableObject = <Namespace>(className: string, migrationTag: string): DurableObjectDeclaration<Namespace> => ({
  className,
  migrationTag,
});

/**
 * The Worker's Durable Objects by binding name, in the order their migrations shipped.
 *
 * @example
 * DURABLE_OBJECTS.SCHEDULER.className; // "Scheduler"
 */
export const DURABLE_OBJECTS = {
  /** The Scheduler Durable Object (one instance, named "main"). */
  SCHEDULER: durableObject<SchedulerNamespace>("Scheduler", "v1-scheduler"),
  /** One events hub Durable Object per job (named by job id): live fan-out to watchers. */
  EVENTS_HUB: durableObject<EventsHubNamespace>("EventsHub", "v2-events-hub"),
  /** One channel Durable Object per worker (named by worker id): wakes its runner. */
  WORKER_CHANNEL: durableObject<WorkerChannelNamespace>("WorkerChannel", "v3-worker-channel"),
  /** One rate limiter Durable Object per client address (named by the address). */
  RATE_LIMITER: durableObject<RateLimiterNamespace>("RateLimiter", "v4-rate-limiter"),
  /** The metrics collector Durable Object (one, named "main"): HTTP counts from every isolate. */
  METRICS: durableObject<MetricsNamespace>("MetricsCollector", "v5-metrics"),
  /** One Durable Object per cloud job (named by job id): sends it to its provider and tracks it to the end. */
  CLOUD_JOBS: durableObject<CloudJobNamespace>("CloudJob", "v6-cloud-jobs"),
  /** The queue hub Durable Object (one, named "main"): jobs' status changes, live, to the queue's watchers. */
  QUEUE_HUB: durableObject<QueueHubNamespace>("QueueHub", "v7-queue-hub"),
} as const;

/** The Durable Object bindings of Env, typed from DURABLE_OBJECTS. */
export type DurableObjectBindings = {
  [Binding in keyof typeof DURABLE_OBJECTS]: (typeof DURABLE_OBJECTS)[Binding] extends DurableObjectDeclaration<infer Namespace>
    ? Namespace
    : never;
};
