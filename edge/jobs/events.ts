import type { z } from "@hono/zod-openapi";
import { MAX_EVENT_BYTES, type EventBatch } from "../../shared/schemas/events";
import type { InStatement } from "@libsql/client/web";
import type { Database } from "../db/client";
import { ApiError, notFound } from "../errors";
import { advanceRate, expectedEnd, parseRate, progressPoint, type ProgressPoint } from "../scheduler/estimate";
import { checkCanReadJob } from "./access";
import type { HubEvent } from "./hub-types";

/*
 * Each job's event log in libSQL (ARCHITECTURE "Events"). The runner sends its trainer's events
 * in batches numbered by (attempt, seq); each batch is stored by one statement that gives its
 * events the next dense indexes of the job, and skips events already stored, so a batch the
 * runner resends after a lost answer changes nothing.
 *
 * A batch that brings the running job's progress also moves its expected end (issue 17): the
 * step rate and end are kept on the queue entry, so the listing and the Scheduler read two
 * columns instead of the log.
 */

/**
 * Stores a batch; returns the events it stored, as watchers receive them (with any gap notice), and
 * how many of the batch's own were new. `workerId`: the runner that sends them; null for the
 * service's own (a cloud job's logs).
 *
 * A runner may send the events of an attempt it ran (job_attempts) after the job moved on - the
 * edge was away while its trainer ended, or the job was given to another box meanwhile: they are
 * stored, marked `late: true`, rather than lost. Another worker's, or for an attempt it did not
 * run: 404. Sequence numbers of an attempt that never arrived (a runner that had to drop events)
 * are said by an `events.gap` event, never silently skipped.
 *
 * When a stored `training.progress` says where the job is (numeric data.step and
 * data.total_steps), the job's step rate and expected end move with it: the entry is read in
 * the same batch, and one more write follows.
 */
export async function appendEvents(
  db: Database,
  workerId: number | null,
  jobId: string,
  batch: z.infer<typeof EventBatch>,
): Promise<{ stored: HubEvent[]; added: number; nextIndex: number }> {
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
  const at = Date.now();
  const now = new Date(at).toISOString();
  const progress = lastProgress(batch, at);
  // The sender ran this attempt of the job: it runs it now, or job_attempts says it did.
  const ranIt = `EXISTS (SELECT 1 FROM queue_entries q WHERE q.job_id = ?1 AND (?5 IS NULL OR (q.worker_id = ?5 AND q.attempt = ?2)
                  OR EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = ?1 AND a.attempt = ?2 AND a.worker_id = ?5)))`;
  // Late: the job no longer runs this attempt there (it ended, or went back to the queue).
  const late = `NOT EXISTS (SELECT 1 FROM queue_entries q WHERE q.job_id = ?1 AND q.status = 'running' AND q.attempt = ?2 AND (?5 IS NULL OR q.worker_id = ?5))`;
  // SQLite reads the SELECT in full before inserting (same table), so MAX(idx) is the log's end
  // before this batch and the fresh events take the next indexes in order.
  const [before, inserted, end, entry] = await db.$client.batch(
    [
      { sql: "SELECT MAX(seq) AS seq FROM job_events WHERE job_id = ?1 AND attempt = ?2 AND seq >= 0", args: [jobId, batch.attempt] },
      {
        sql: `INSERT INTO job_events (job_id, idx, attempt, seq, type, payload, created_at)
              SELECT ?1, base.n + ROW_NUMBER() OVER (ORDER BY e.key), ?2, e.value ->> '$.seq', e.value ->> '$.type',
                     CASE WHEN ${late} THEN json_set(e.value ->> '$.payload', '$.late', json('true')) ELSE e.value ->> '$.payload' END, ?3
              FROM json_each(?4) AS e, (SELECT COALESCE(MAX(idx), -1) AS n FROM job_events WHERE job_id = ?1) AS base
              WHERE ${ranIt}
                AND NOT EXISTS (SELECT 1 FROM job_events j WHERE j.job_id = ?1 AND j.attempt = ?2 AND j.seq = e.value ->> '$.seq')
              RETURNING idx, seq, payload`,
        args: [jobId, batch.attempt, now, JSON.stringify(rows), workerId],
      },
      {
        sql: `SELECT COALESCE(MAX(idx), -1) + 1 AS next, ${ranIt} AS mine FROM job_events WHERE job_id = ?1`,
        args: [jobId, batch.attempt, null, null, workerId],
      },
      ...(progress
        ? [
            {
              sql: "SELECT status, attempt, started_at, progress_rate FROM queue_entries WHERE job_id = ?1 AND (?2 IS NULL OR worker_id = ?2)",
              args: [jobId, workerId],
            },
          ]
        : []),
    ],
    "write",
  );
  if (!Number(end!.rows[0]!.mine)) throw notFound(`Job ${jobId} of this worker (attempt ${batch.attempt})`);
  const stored: HubEvent[] = inserted!.rows
    .map((r) => ({ ...(JSON.parse(String(r.payload)) as { type: string }), index: Number(r.idx), timestamp: now }))
    .sort((a, b) => a.index - b.index);
  let nextIndex = Number(end!.rows[0]!.next);
  const added = stored.length;
  // A runner numbers an attempt's events 0, 1, 2, ...; the service's own (a cloud job's log, by byte offset) are not counted so.
  const gaps =
    workerId === null
      ? []
      : missingSeqs(
          before!.rows[0]?.seq ?? null,
          rows.map((r) => r.seq),
        );
  for (const gap of gaps) {
    const event = {
      type: "events.gap",
      level: "warning",
      title: `${gap.to - gap.from + 1} event(s) of attempt ${batch.attempt} never arrived (seq ${gap.from}${gap.to > gap.from ? ` to ${gap.to}` : ""})`,
      data: { attempt: batch.attempt, from_seq: gap.from, to_seq: gap.to },
    };
    // Its own sequence number below zero (one per gap start), so it never meets a trainer's.
    const notice = await db.$client.execute({
      sql: `INSERT INTO job_events (job_id, idx, attempt, seq, type, payload, created_at)
            SELECT ?1, COALESCE(MAX(idx), -1) + 1, ?2, ?3, 'events.gap', ?4, ?5 FROM job_events WHERE job_id = ?1 AND true
            ON CONFLICT DO NOTHING RETURNING idx`,
      args: [jobId, batch.attempt, -1 - gap.from, JSON.stringify(event), now],
    });
    if (notice.rows[0]) {
      stored.push({ ...event, index: Number(notice.rows[0].idx), timestamp: now });
      nextIndex = Number(notice.rows[0].idx) + 1;
    }
  }
  // A resent progress event (not stored again) was counted the first time.
  const fresh = progress && inserted!.rows.some((r) => Number(r.seq) === progress.seq);
  const update = fresh ? progressUpdate(jobId, batch.attempt, progress.point, entry!.rows[0] as Record<string, unknown> | undefined) : null;
  if (update) await db.$client.execute(update);
  return { stored, added, nextIndex };
}

/**
 * The runs of sequence numbers an attempt is missing, given the highest stored before a batch and
 * the batch's own: only above what was stored, so a batch sent again reports nothing twice.
 *
 * @example
 * missingSeqs(4, [8, 9, 12]); // [{ from: 5, to: 7 }, { from: 10, to: 11 }]
 */
export function missingSeqs(storedMax: unknown, batch: number[]): { from: number; to: number }[] {
  let expected = storedMax === null || storedMax === undefined ? 0 : Number(storedMax) + 1;
  const gaps: { from: number; to: number }[] = [];
  for (const seq of [...batch].filter((s) => s >= expected).sort((a, b) => a - b)) {
    if (seq > expected) gaps.push({ from: expected, to: seq - 1 });
    expected = seq + 1;
  }
  return gaps;
}

/**
 * The batch's last progress event that says where the job is, with the time the service received
 * it: events carry no time the service could trust (the trainer's clock is its own), and a runner
 * sends every second or so, which the rate's two-minute average absorbs.
 */
function lastProgress(batch: z.infer<typeof EventBatch>, at: number): { seq: number; point: ProgressPoint } | null {
  for (let i = batch.events.length - 1; i >= 0; i--) {
    const { seq, event } = batch.events[i]!;
    const point = event.type === "training.progress" ? progressPoint(event.data, at) : null;
    if (point) return { seq, point };
  }
  return null;
}

/**
 * The write that moves a running job's step rate and expected end by one progress point, or
 * null when nothing moves: the job is not running in the batch's attempt (a late batch of an
 * attempt that was retried), or the point says nothing new (edge/scheduler/estimate.ts). The
 * write holds only while the entry is as read (same attempt, same rate), so a batch racing
 * another or a retry changes nothing.
 */
function progressUpdate(
  jobId: string,
  attempt: number,
  point: ProgressPoint,
  row: Record<string, unknown> | undefined,
): InStatement | null {
  if (!row || row.status !== "running" || Number(row.attempt) !== attempt || typeof row.started_at !== "string") return null;
  const stored = row.progress_rate === null ? null : String(row.progress_rate);
  const prev = parseRate(stored);
  const startedAt = Date.parse(row.started_at);
  const rate = advanceRate(prev, point, Number.isNaN(startedAt) ? null : startedAt);
  if (rate === null || rate === prev) return null;
  const end = expectedEnd({ startedAt, rate, maxRuntime: null, cloud: null }, point.at);
  if (end?.method !== "progress") return null;
  return {
    sql: `UPDATE queue_entries SET progress_rate = ?1, expected_end_at = ?2, expected_end_method = 'progress'
          WHERE job_id = ?3 AND status = 'running' AND attempt = ?4 AND progress_rate IS ?5`,
    args: [JSON.stringify(rate), new Date(end.at).toISOString(), jobId, attempt, stored],
  };
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
