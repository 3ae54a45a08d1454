import type { z } from "@hono/zod-openapi";
import type { EventBatch } from "../../shared/schemas/events";
import type { Database } from "../db/client";
import { ApiError, notFound } from "../errors";
import { checkCanReadJob } from "./access";
import type { HubEvent } from "./hub-types";

/*
 * Each job's event log in libSQL (ARCHITECTURE "Events"). The runner sends its trainer's events
 * in batches numbered by (attempt, seq); each batch is stored by one statement that gives its
 * events the next dense indexes of the job, and skips events already stored, so a batch the
 * runner resends after a lost answer changes nothing.
 */

/** Largest event accepted (a validation image as a data URI fits well within it). */
export const MAX_EVENT_BYTES = 512 * 1024;

/**
 * Stores a batch; returns the events it really added, as watchers receive them. `workerId`: the
 * runner that sends them (the job must be its); null for the service's own (a cloud job's logs).
 */
export async function appendEvents(
  db: Database,
  workerId: number | null,
  jobId: string,
  batch: z.infer<typeof EventBatch>,
): Promise<{ stored: HubEvent[]; nextIndex: number }> {
  const rows = batch.events.map((e, i) => {
    const payload = JSON.stringify(e.event);
    if (payload.length > MAX_EVENT_BYTES)
      throw new ApiError(
        413,
        "event_too_large",
        `event ${i} (seq ${e.seq}) is ${payload.length} bytes; at most ${MAX_EVENT_BYTES} are accepted`,
      );
    return { seq: e.seq, type: e.event.type, payload };
  });
  const seqs = new Set(rows.map((r) => r.seq));
  if (seqs.size !== rows.length) throw new ApiError(422, "duplicate_seq", "each event of a batch needs its own seq");
  const now = new Date().toISOString();
  // SQLite reads the SELECT in full before inserting (same table), so MAX(idx) is the log's end
  // before this batch and the fresh events take the next indexes in order.
  const [inserted, end] = await db.$client.batch(
    [
      {
        sql: `INSERT INTO job_events (job_id, idx, attempt, seq, type, payload, created_at)
              SELECT ?1, base.n + ROW_NUMBER() OVER (ORDER BY e.key), ?2, e.value ->> '$.seq', e.value ->> '$.type', e.value ->> '$.payload', ?3
              FROM json_each(?4) AS e, (SELECT COALESCE(MAX(idx), -1) AS n FROM job_events WHERE job_id = ?1) AS base
              WHERE EXISTS (SELECT 1 FROM queue_entries WHERE job_id = ?1 AND (?5 IS NULL OR worker_id = ?5))
                AND NOT EXISTS (SELECT 1 FROM job_events j WHERE j.job_id = ?1 AND j.attempt = ?2 AND j.seq = e.value ->> '$.seq')
              RETURNING idx, seq`,
        args: [jobId, batch.attempt, now, JSON.stringify(rows), workerId],
      },
      {
        sql: "SELECT COALESCE(MAX(idx), -1) + 1 AS next, EXISTS (SELECT 1 FROM queue_entries WHERE job_id = ?1 AND (?2 IS NULL OR worker_id = ?2)) AS mine FROM job_events WHERE job_id = ?1",
        args: [jobId, workerId],
      },
    ],
    "write",
  );
  if (!Number(end!.rows[0]!.mine)) throw notFound(`Job ${jobId} of this worker`);
  const bySeq = new Map(batch.events.map((e) => [e.seq, e.event]));
  const stored = inserted!.rows
    .map((r) => ({ ...(bySeq.get(Number(r.seq)) as { type: string }), index: Number(r.idx), timestamp: now }))
    .sort((a, b) => a.index - b.index);
  return { stored, nextIndex: Number(end!.rows[0]!.next) };
}

/**
 * The page of a caller who has no job that has started yet (none named): nothing, from index 0.
 * Poll again, or open the stream, which waits for the job.
 */
export function noJobYetPage(): { job_id: null; status: null; events: []; next_index: 0; next_cursor: null } {
  // No cursor: a cursor keeps its job, and there is none yet; poll again without one.
  return { job_id: null, status: null, events: [], next_index: 0, next_cursor: null };
}

/** The most bytes of events one page holds (always at least one event): next_index says where to go on. */
export const MAX_PAGE_BYTES = 1024 * 1024;

/**
 * A page of a job's events from `sinceIndex`: at most `limit` events and MAX_PAGE_BYTES of them
 * (the sizes are read first, so an oversized page is never fetched whole). `scope` (ownerScope;
 * null: anyone's) is checked on the entry read in the same batch: 404 or 403 `not_your_job`.
 */
export async function readEvents(db: Database, jobId: string, sinceIndex: number, limit: number, scope: number | null = null) {
  const [job, sizes] = await db.$client.batch(
    [
      { sql: "SELECT status, user_id FROM queue_entries WHERE job_id = ?", args: [jobId] },
      {
        sql: "SELECT idx, length(CAST(payload AS BLOB)) AS size FROM job_events WHERE job_id = ? AND idx >= ? ORDER BY idx LIMIT ?",
        args: [jobId, sinceIndex, limit],
      },
    ],
    "read",
  );
  checkCanReadJob(job!.rows[0], jobId, scope);
  let last = -1;
  let bytes = 0;
  for (const row of sizes!.rows) {
    bytes += Number(row.size);
    if (last >= 0 && bytes > MAX_PAGE_BYTES) break;
    last = Number(row.idx);
  }
  const events = await db.$client.execute({
    sql: "SELECT idx, created_at, payload FROM job_events WHERE job_id = ? AND idx >= ? AND idx <= ? ORDER BY idx",
    args: [jobId, sinceIndex, last],
  });
  const list = events.rows.map((r) => ({
    ...(JSON.parse(String(r.payload)) as { type: string }),
    index: Number(r.idx),
    timestamp: String(r.created_at),
  }));
  return {
    job_id: jobId,
    status: String(job!.rows[0]!.status),
    events: list,
    next_index: list.length ? list[list.length - 1]!.index + 1 : sinceIndex,
  };
}

/** Whether the job's log holds an event at `index` or later (a paged reader's "is there more"). */
export async function hasEventsFrom(db: Database, jobId: string, index: number): Promise<boolean> {
  const found = await db.$client.execute({
    sql: "SELECT EXISTS (SELECT 1 FROM job_events WHERE job_id = ? AND idx >= ?) AS more",
    args: [jobId, index],
  });
  return Number(found.rows[0]!.more) === 1;
}
