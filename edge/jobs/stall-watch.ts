import type { Database } from "../db/client";
import type { HubEvent } from "./hub-types";
import { advanceWatch, parseWatch, phaseOf } from "./stall";

/*
 * The event intake's side of stall detection: each stored batch of a running attempt moves the
 * facts the stall rule reads (queue_entries.stall_watch: the last new step and when it came,
 * recent times per step, the validation or checkpoint phase), and a new step clears a stall
 * mark. A batch of an attempt the job no longer runs (late) changes nothing.
 */

/** A service event's sequence number: below every trainer's (0, 1, ...) and every gap notice's, one per millisecond. */
export function serviceSeq(now: number): number {
  return -1e15 - now;
}

/**
 * Moves the job's stall watch by the events just stored; returns the stall mark a new step
 * cleared (when its last step had come, and that step), else null. One conditional write: a
 * batch racing another reads again.
 *
 * @example
 * const cleared = await watchEvents(db, "local-1a2b", 1, stored);
 */
export async function watchEvents(
  db: Database,
  jobId: string,
  attempt: number,
  stored: HubEvent[],
  now = Date.now(),
): Promise<{ since: string; step: number } | null> {
  const relevant = stored
    .filter((e) => !(e as { late?: unknown }).late && phaseOf(e.type) !== undefined)
    .map((e) => ({ type: e.type, step: ((e as { data?: { step?: unknown } }).data ?? {}).step }));
  if (!relevant.length) return null;
  for (let tries = 0; tries < 8; tries++) {
    const read = await db.$client.execute({
      sql: "SELECT stall_watch, stalled_since, started_at FROM queue_entries WHERE job_id = ? AND status = 'running' AND attempt = ?",
      args: [jobId, attempt],
    });
    const row = read.rows[0];
    if (!row || typeof row.started_at !== "string") return null;
    const stored = row.stall_watch === null ? null : String(row.stall_watch);
    const prev = parseWatch(stored);
    const next = advanceWatch(prev, relevant, Date.parse(row.started_at), now);
    if (next === prev) return null;
    const progressed = next !== null && (prev === null || next.step > prev.step);
    const written = await db.$client.execute({
      sql: `UPDATE queue_entries SET stall_watch = ?1, stalled_since = CASE WHEN ?2 THEN NULL ELSE stalled_since END
            WHERE job_id = ?3 AND status = 'running' AND attempt = ?4 AND stall_watch IS ?5 RETURNING job_id`,
      args: [JSON.stringify(next), progressed ? 1 : 0, jobId, attempt, stored],
    });
    if (!written.rows.length) continue;
    return progressed && row.stalled_since !== null ? { since: String(row.stalled_since), step: next!.step } : null;
  }
  return null;
}
