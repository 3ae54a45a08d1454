import { ServiceError, type ServiceClient } from "../../shared/client/client";
import { endpoints } from "../../shared/client/endpoints";
import { readEventStream } from "../../shared/client/event-stream";
import type { Event } from "../../shared/event-line";

export interface FollowOptions {
  client: ServiceClient;
  jobId: string;
  /** The first event index to show. */
  since: number;
  /** Each event once, in index order. */
  onEvent: (event: Event) => void;
  /** Why it reconnects, for stderr. */
  onNote?: (text: string) => void;
  /** Waits between attempts (tests pass one that does not wait). */
  sleep?: (ms: number) => Promise<void>;
  /** Consecutive failed attempts (no event delivered in between) before giving up; default 20, about 3 minutes. */
  maxFailures?: number;
  /** A connection silent this long is taken for dead; the service sends a keep-alive every 15 s. */
  idleMs?: number;
}

/** The wait before reconnect attempt `failures` (1, 2, ...): 1 s doubling up to 10 s. */
export function backoffMs(failures: number): number {
  return Math.min(10_000, 1000 * 2 ** Math.max(0, failures - 1));
}

/** Whether trying again may help: the service unreachable or overloaded, not a refusal. */
function retryable(error: unknown): boolean {
  if (!(error instanceof ServiceError)) return false;
  if (error.status === 0) return error.code !== "aborted";
  return error.status === 429 || error.status >= 500;
}

/**
 * Follows a job's live event stream (server-sent events) until its `end` event and returns the
 * job's final status. A connection that drops or goes silent before the end is opened again
 * (1 s, 2 s, ... 10 s apart) with Last-Event-ID set to the last event seen, and an event already
 * delivered is never delivered twice. A refusal (unknown job, another user's) is thrown at once.
 *
 * @example
 * const status = await followEvents({ client, jobId: "local-3f9c2a1b04de", since: 0, onEvent: (e) => console.log(e.type) });
 */
export async function followEvents(options: FollowOptions): Promise<string> {
  const { client, jobId, onEvent } = options;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const maxFailures = options.maxFailures ?? 20;
  const idleMs = options.idleMs ?? 45_000;
  let next = options.since;
  let lastId: string | null = null;
  let failures = 0;
  for (;;) {
    const abort = new AbortController();
    let idle: NodeJS.Timeout | undefined;
    const awake = () => {
      clearTimeout(idle);
      idle = setTimeout(() => abort.abort(), idleMs);
    };
    let failure: ServiceError;
    try {
      awake();
      const response: Response = await client.call(
        endpoints.trainingEventStream,
        { query: { job_id: jobId, since_index: next } },
        { timeoutMs: null, signal: abort.signal, headers: lastId === null ? {} : { "last-event-id": lastId } },
      );
      awake();
      for await (const message of readEventStream(response, awake)) {
        awake();
        if (message.event === "end") return endStatus(message.data);
        const event = parseEvent(message.data);
        const index = typeof event.index === "number" ? event.index : Number(message.id);
        if (index < next) continue; // already delivered before the reconnect
        onEvent(event);
        next = index + 1;
        lastId = String(index);
        failures = 0;
      }
      failure = new ServiceError(0, "unreachable", "the event stream closed before the job ended");
    } catch (error) {
      if (abort.signal.aborted) failure = new ServiceError(0, "timeout", `no word from the service for ${idleMs / 1000} s`);
      else if (error instanceof ServiceError) {
        if (!retryable(error)) throw error;
        failure = error;
      } else failure = new ServiceError(0, "unreachable", `the event stream broke (${(error as Error)?.message ?? String(error)})`);
    } finally {
      clearTimeout(idle);
    }
    failures++;
    if (failures >= maxFailures) throw failure;
    const wait = backoffMs(failures);
    options.onNote?.(`${failure.detail}; reconnecting in ${wait / 1000} s`);
    await sleep(wait);
  }
}

function parseEvent(data: string): Event {
  try {
    const event = JSON.parse(data) as Event;
    if (event && typeof event === "object" && typeof event.type === "string") return event;
  } catch {
    // reported below
  }
  throw new ServiceError(200, "unexpected_answer", `the event stream sent something that is not an event: ${data.slice(0, 200)}`);
}

function endStatus(data: string): string {
  try {
    const status = (JSON.parse(data) as { status?: unknown }).status;
    if (typeof status === "string") return status;
  } catch {
    // reported below
  }
  throw new ServiceError(200, "unexpected_answer", `the event stream's end event carries no status: ${data.slice(0, 200)}`);
}
