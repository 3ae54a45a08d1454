import type { AuditInput } from "../../audit/trail";
import { recordAudit } from "../../audit/trail";
import type { Database } from "../../db/client";
import type { Env } from "../../env";
import type { Logger } from "../../log";
import { channelOf, cloudJobOf, queueHubOf, schedulerOf } from "../objects";
import { hubOf } from "../hub-types";
import { notifyChanges } from "./notify-changes";
import { publicUrlOf } from "../../notifications/notify";

/*
 * The effects of a job transition, applied in one place. A
 * transition (edge/jobs/lifecycle/<name>.ts) is one conditional statement or batch and returns
 * what it changed; `applyEffects` derives everything that must follow from that change alone:
 * a scheduler pass when capacity was freed or a job became pending, a wake-up for each runner
 * that must act, the events hub's end (watchers' `end` event and the lifecycle webhook) for
 * every job that reached a terminal status, the `job.retrying` webhook for a running job sent
 * back to the queue, the queue hub's `change` event to the queue's live watchers (every change with
 * jobs, a priority change or an approval included), the notifications people asked for
 * (./notify-changes.ts), and the audit entries the transition owes.
 */

export type JobStatus = "pending" | "running" | "blocked" | "completed" | "failed" | "cancelled";
export const TERMINAL_STATUSES: readonly JobStatus[] = ["completed", "failed", "cancelled"];

/** One job's change, as a transition returns it. */
export interface JobChange {
  jobId: string;
  /** null: a new job (submitted). */
  from: JobStatus | null;
  to: JobStatus;
  /** The runner that must hear of it: the worker it was admitted to, or the one it was running on. */
  workerId: number | null;
  /** error_message after the change (why it failed, was cancelled or is retried). */
  message?: string | null;
  /** For a job sent back to pending: the attempt it runs next, of how many. */
  attempt?: number;
  maxAttempts?: number;
  /** A cloud job: admitted, its provider is called; cancelled while running, it is cancelled there too. */
  cloud?: boolean;
}

/** What one transition changed: the jobs, and the audit entries it owes. */
export interface Change {
  jobs: JobChange[];
  audit?: AuditInput[];
}

/** Who asked for a change, for its audit entry (null: the service itself, e.g. a sweep). */
export interface Actor {
  user_id: number | null;
  username: string | null;
  client_ip: string | null;
  user_agent: string | null;
}

export interface EffectsContext {
  env: Pick<Env, "SCHEDULER" | "EVENTS_HUB" | "WORKER_CHANNEL" | "CLOUD_JOBS" | "QUEUE_HUB" | "WEBHOOK_OUTBOUND" | "SERVICE_PUBLIC_URL">;
  db: Database;
  log: Logger;
  actor: Actor | null;
  /** "scheduler": the change was made inside a Scheduler pass, which needs no further pass. */
  origin: "request" | "scheduler";
  /** Why, for the scheduler pass and the logs ("cancel", "job finished", ...). */
  trigger: string;
  /** Defers work past the response (ctx.waitUntil); without it, everything is awaited. */
  waitUntil?: (work: Promise<unknown>) => void;
}

const isTerminal = (status: JobStatus) => TERMINAL_STATUSES.includes(status);

/** Cloud job objects called at once by one change (see applyEffects). */
const CLOUD_CALLS_AT_ONCE = 4;

/** Runs the calls, at most `width` at a time. */
async function inTurn(calls: (() => Promise<unknown>)[], width: number): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < calls.length) await calls[next++]!();
  };
  await Promise.all(Array.from({ length: Math.min(width, calls.length) }, lane));
}

/**
 * Applies every effect a change calls for. Effects that fail are logged, never raised: the
 * change itself is already stored, and each effect has a fallback (the Scheduler's 5 s alarm,
 * the runner's own heartbeat, a watcher's reconnect).
 *
 * @example
 * await applyEffects(effectsOf(c, "cancel"), await cancelJob(db, jobId, { ownerId, actorId, running: false }));
 */
export async function applyEffects(ctx: EffectsContext, change: Change): Promise<void> {
  const { env, log } = ctx;
  const warn = (what: string, extra: Record<string, unknown>) => (error: unknown) =>
    log.warning(`could not ${what}`, { ...extra, error: String(error) });
  const work: Promise<unknown>[] = [];

  let passed: Promise<unknown> = Promise.resolve();
  if (ctx.origin !== "scheduler" && change.jobs.length) {
    passed = schedulerOf(env)
      // The one Scheduler, through the interface in ../objects.ts: the lifecycle imports none of its code.
      .pass(
        ctx.trigger,
        change.jobs.map((j) => j.jobId),
      )
      .catch(warn("run a scheduler pass", { trigger: ctx.trigger }));
    work.push(passed);
  }
  if (change.jobs.length) {
    // After the pass, so a waiting job's message has the place that pass gave it.
    const notifying = passed.then(() =>
      notifyChanges(
        { db: ctx.db, env, log, publicUrl: publicUrlOf(env), waitUntil: ctx.waitUntil },
        change.jobs,
        ctx.origin === "scheduler" ? undefined : () => schedulerOf(env).waitInfo(),
      ),
    );
    if (ctx.waitUntil) ctx.waitUntil(notifying);
    else work.push(notifying);
  }
  if (change.jobs.length) {
    work.push(
      queueHubOf(env)
        .changed(change.jobs.map((j) => ({ job_id: j.jobId, from: j.from, to: j.to })))
        .catch(warn("tell the queue's watchers", { jobs: change.jobs.length })),
    );
  }
  const wake = new Set<number>();
  for (const j of change.jobs) {
    if (j.workerId === null) continue;
    // Admitted to it (fetch the assignment) or taken from it while running (end the trainer).
    if (j.to === "running" || j.from === "running") wake.add(j.workerId);
  }
  for (const id of wake)
    work.push(
      channelOf(env, id)
        .notify()
        .catch(warn("wake a runner", { worker_id: id })),
    );
  // The cloud job's own object calls the provider: admitted, it is sent; cancelled while running,
  // it is stopped and billed. A few at a time: a pass that admits hundreds of cloud jobs must not
  // flood the runtime with object calls ahead of everything else (each only arms its object's alarm).
  const cloudCalls = change.jobs.flatMap((j) => {
    if (!j.cloud || j.from === j.to) return [];
    if (j.to === "running")
      return [
        () =>
          cloudJobOf(env, j.jobId)
            .start(j.jobId)
            .catch(warn("send the job to its provider", { job_id: j.jobId })),
      ];
    if (j.from === "running" && j.to === "cancelled")
      return [
        () =>
          cloudJobOf(env, j.jobId)
            .cancel(j.jobId)
            .catch(warn("cancel the job at its provider", { job_id: j.jobId })),
      ];
    return [];
  });
  if (cloudCalls.length) work.push(inTurn(cloudCalls, CLOUD_CALLS_AT_ONCE));
  for (const j of change.jobs) {
    const hub = () => hubOf(env as Env, j.jobId);
    if (isTerminal(j.to) && j.from !== j.to) {
      work.push(
        hub()
          .finish(j.jobId, j.to, { error_message: j.message ?? null })
          .catch(warn("end the job's events", { job_id: j.jobId })),
      );
    } else if (j.from === "running" && j.to === "pending") {
      const retry = { attempt: j.attempt ?? null, max_attempts: j.maxAttempts ?? null, error_message: j.message ?? null };
      work.push(
        hub()
          .retrying(j.jobId, retry)
          .catch(warn("tell the job's receivers it is retried", { job_id: j.jobId })),
      );
    }
  }
  for (const entry of change.audit ?? []) {
    const actor = ctx.actor;
    const input: AuditInput = actor
      ? { actor_user_id: actor.user_id, actor: actor.username, client_ip: actor.client_ip, user_agent: actor.user_agent, ...entry }
      : entry;
    const write = recordAudit(ctx.db, input).catch((error: unknown) =>
      log.error("could not write an audit entry", { event_type: entry.event_type, error: String(error) }),
    );
    if (ctx.waitUntil) ctx.waitUntil(write);
    else work.push(write);
  }
  await Promise.all(work);
}
