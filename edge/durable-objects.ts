import type { DurableObjectBinding } from "./durable-object-names";
/*
 * Every Durable Object of the Worker, declared once: its binding, its class and the migration
 * that created it. The Worker's bindings (edge/env.ts) and the local stack's Miniflare
 * (edge/local/stack.ts) read this; edge/index.ts exports the classes and wrangler.toml, a static
 * file wrangler reads, repeats the bindings and migrations: test/local/durable-objects.test.ts holds
 * both to this list. A new Durable Object: its class exported from edge/index.ts, an entry here,
 * and in wrangler.toml a binding and a new [[migrations]] tag.
 * Imports no room's code (each object's RPC interface is typed where its accessor is written), so
 * Node code (the local stack) can read it and edge/env.ts stays at the bottom of the layering.
 */

/** One Durable Object class. */
export interface DurableObjectDeclaration {
  /** The class's name, as edge/index.ts exports it. */
  readonly className: string;
  /** The wrangler.toml [[migrations]] tag that created the class (SQLite storage). Never edit one that has shipped. */
  readonly migrationTag: string;
}

const durableObject = (className: string, migrationTag: string): DurableObjectDeclaration => ({
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
  SCHEDULER: durableObject("Scheduler", "v1-scheduler"),
  /** One events hub Durable Object per job (named by job id): live fan-out to watchers. */
  EVENTS_HUB: durableObject("EventsHub", "v2-events-hub"),
  /** One channel Durable Object per worker (named by worker id): wakes its runner. */
  WORKER_CHANNEL: durableObject("WorkerChannel", "v3-worker-channel"),
  /** One rate limiter Durable Object per client address (named by the address). */
  RATE_LIMITER: durableObject("RateLimiter", "v4-rate-limiter"),
  /** The metrics collector Durable Object (one, named "main"): HTTP counts from every isolate. */
  METRICS: durableObject("MetricsCollector", "v5-metrics"),
  /** One Durable Object per cloud job (named by job id): sends it to its provider and tracks it to the end. */
  CLOUD_JOBS: durableObject("CloudJob", "v6-cloud-jobs"),
  /** The queue hub Durable Object (one, named "main"): jobs' status changes, live, to the queue's watchers. */
  QUEUE_HUB: durableObject("QueueHub", "v7-queue-hub"),
} as const;

/** The Durable Object bindings of Env, one per entry of DURABLE_OBJECTS. */
export type DurableObjectBindings = { [Binding in keyof typeof DURABLE_OBJECTS]: DurableObjectBinding };
