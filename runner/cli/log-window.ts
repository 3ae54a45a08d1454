import type { ServiceClient } from "../../shared/client/client";
import type { EndpointOutput } from "../../shared/client/endpoint";
import { endpoints } from "../../shared/client/endpoints";
import type { Event } from "../../shared/event-line";
import { UsageError } from "./output";

/** Where `jobs logs` starts: at an event index, or at the events stored since a moment (ms since the epoch). */
export type Since = { index: number } | { after: number };

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * Reads `--since`: a bare whole number is an event index (0 is the first event); a whole number
 * with s, m, h or d is a duration back from `now`. Anything else is a usage error naming both forms.
 *
 * @example
 * parseSince("10m", Date.parse("2026-01-01T00:10:00Z")); // { after: Date.parse("2026-01-01T00:00:00Z") }
 */
export function parseSince(value: string, now: number): Since {
  const match = /^(\d+)([smhd])?$/.exec(value);
  const amount = match ? Number(match[1]) : NaN;
  if (!match || !Number.isSafeInteger(amount))
    throw new UsageError(
      `--since must be an event index (0 or more) or a duration such as 30s, 10m, 2h or 1d, not ${JSON.stringify(value)}`,
    );
  const unit = match[2] as keyof typeof UNIT_MS | undefined;
  return unit === undefined ? { index: amount } : { after: now - amount * UNIT_MS[unit] };
}

/**
 * Reads `--tail`: how many of the last events to print (0 or more).
 *
 * @example
 * parseTail("3"); // 3
 */
export function parseTail(value: string): number {
  const count = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(count))
    throw new UsageError(`--tail must be a number of events (0 or more), not ${JSON.stringify(value)}`);
  return count;
}

/**
 * Pages through a job's stored events (GET /api/training/events) and hands on those in the
 * window: from `since` (an index, or a time compared with each event's `timestamp`), and of those
 * only the last `tail` when given. Returns the index after the last stored event read, where a
 * live stream picks up. With a tail, only that many events are held at once.
 */
export async function readWindow(
  client: ServiceClient,
  jobId: string,
  window: { since: Since; tail: number | null },
  onEvent: (event: Event) => void,
): Promise<number> {
  const { since, tail } = window;
  const kept: Event[] = [];
  const take = (event: Event) => {
    if ("after" in since && !(Date.parse(event.timestamp) >= since.after)) return;
    if (tail === null) return onEvent(event);
    kept.push(event);
    if (kept.length > tail) kept.shift();
  };
  let next = "index" in since ? since.index : 0;
  let cursor: string | null = null;
  for (;;) {
    const query: { cursor: string } | { job_id: string; since_index: number } = cursor ? { cursor } : { job_id: jobId, since_index: next };
    const page: EndpointOutput<typeof endpoints.trainingEvents> = await client.call(endpoints.trainingEvents, { query });
    page.events.forEach(take);
    next = page.next_index;
    if (!page.events.length || page.next_cursor === null) break;
    cursor = page.next_cursor;
  }
  kept.forEach(onEvent);
  return next;
}
