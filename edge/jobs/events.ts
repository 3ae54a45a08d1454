import type { z } from "@hono/zod-openapi";
import { MAX_EVENT_BYTES, type EventBatch, type EventLimits } from "../../shared/schemas/events";
import type { InStatement, Row } from "@libsql/client/web";
import { parseSetting } from "../settings-store";
import { admitEvents, byteLength, type Admission, type LogUsage } from "./event-bounds";
import type { Database } from "../db/client";
import { ApiError, notFound } from "../errors";
import { advanceRate, expectedEnd, parseRate, progressPoint, type ProgressPoint } from "./estimate";
import { checkCanReadJob } from "./access";
import type { HubEvent } from "./hub-types";
import { BoundedMap } from "../../shared/remembered";

/*
 * Each job's event log in libSQL. The runner sends its trainer's events
 * in batches numbered by (attempt, seq); each batch is stored by one write batch that gives its
 * events the next dense indexes of the job, and skips events already stored, so a batch the
 * runner resends after a lost answer changes nothing.
 *
 * A batch that brings the running job's progress also moves its expected end (issue 17): the
 * step rate and end are kept on the queue entry, so the listing and the Scheduler read two
 * columns instead of the log.
 *
 * The log is bounded (issue 26): a cap per job and a quota per user (event-bounds.ts), kept in
 * job_event_usage beside every write, and a retention for ended jobs (event-retention.ts).
 */

/** How many times a batch is planned again when another write to the same log, or the same user's, came between its read and its write. */
const APPEND_TRIES = 8;

/** A row a batch writes: one of its events, or a notice of the edge's own (a gap, the truncation). */
interface PlannedRow {
  attempt: number;
  seq: number;
  type: string;
  payload: string;
}

/**
 * Stores a batch; returns the events it stored, as watchers receive them (with any notice), how
 * many of the batch's own were new, and how many it counted without storing them. `workerId`:
 * the runner that sends them; null for the service's own (a cloud job's logs).
 *
 * A runner may send the events of an attempt it ran (job_attempts) after the job moved on - the
 * edge was away while its trainer ended, or the job was given to another box meanwhile: they are
 * stored, marked `late: true`, rather than lost. Another worker's, or for an attempt it did not
 * run: 404. Sequence numbers of an attempt that never arrived (a runner that had to drop events)
 * are said by an `events.gap` event, never silently skipped - until the log is truncated, when
 * missing numbers are the rule.
 *
 * The log is bounded (event-bounds.ts): the batch is read with the log's usage and its owner's,
 * planned by `admitEvents`, and written in one batch that holds only while both usages are as
 * read, so two batches at once (two attempts, two jobs of one user) cannot both take the last
 * room; the one that loses reads again. Events past the bounds are taken and counted, never
 * refused: a runner resends what the edge refuses, and would do so for ever.
 *
 * When a new `training.progress` says where the job is (numeric data.step and data.total_steps),
 * the job's step rate and expected end move with it, stored or not: the write that moves them is
 * answered (`progressWrite`) for the caller to run once the events are published, so watchers
 * do not wait one more database round trip for them.
 */
export async function appendEvents(
  db: Database,
  workerId: number | null,
  jobId: string,
  batch: z.infer<typeof EventBatch>,
): Promise<{ stored: HubEvent[]; added: number; nextIndex: number; dropped: number; progressWrite: InStatement | null }> {
  const rows = batch.events.map((e, i) => {
    const payload = JSON.stringify(e.event);
    if (payload.length > MAX_EVENT_BYTES)
      throw new ApiError(
        413,
        "event_too_large",
        `event ${i} (seq ${e.seq}) is ${payload.length} bytes; at most ${MAX_EVENT_BYTES} are accepted`,
      );
    return { seq: e.seq, event: e.event, payload };
  });
  const seqs = new Set(rows.map((r) => r.seq));
  if (seqs.size !== rows.length) throw new ApiError(422, "duplicate_seq", "each event of a batch needs its own seq");
  const progress = lastProgress(batch, Date.now());
  const key = keptKey(workerId, jobId, batch.attempt);
  for (let tries = 1; ; tries++) {
    // The log as this isolate's last write of this sender's attempt left it, when that serves
    // (keptLog); else read. The write holds only while what the plan took from it still holds.
    const kept = tries === 1 && progress === null ? keptLog(key, seqs) : null;
    const log = kept ?? (await readLog(db, workerId, jobId, batch.attempt, [...seqs], progress !== null));
    if (!log.mine) throw notFound(`Job ${jobId} of this worker (attempt ${batch.attempt})`);
    const now = new Date().toISOString();
    const fresh = rows.filter((r) => !log.existing.has(r.seq));
    // A runner numbers an attempt's events 0, 1, 2, ...; the service's own (a cloud job's log, by byte offset) are not counted so.
    const gaps = workerId === null || log.usage.truncatedAt !== null ? [] : missingSeqs(log.maxSeq, [...seqs]);
    const candidates: PlannedRow[] = [
      ...fresh.map((r) => ({
        attempt: batch.attempt,
        seq: r.seq,
        type: r.event.type,
        payload: log.late ? JSON.stringify({ ...r.event, late: true }) : r.payload,
      })),
      // Its own sequence number below zero (one per gap start), so it never meets a trainer's.
      ...gaps.map((gap) => ({
        attempt: batch.attempt,
        seq: -1 - gap.from,
        type: "events.gap",
        payload: JSON.stringify(gapNotice(batch.attempt, gap)),
      })),
    ];
    if (!candidates.length) return { stored: [], added: 0, nextIndex: log.last + 1, dropped: 0, progressWrite: null };
    const plan = admitEvents(
      log.usage,
      log.userBytes,
      log.limits,
      candidates.map((c) => ({ type: c.type, bytes: byteLength(c.payload) })),
    );
    const planned: PlannedRow[] = [];
    candidates.forEach((candidate, i) => {
      if (plan.truncation?.before === i) planned.push(truncationRow(plan.truncation.event));
      if (plan.stored[i]) planned.push(candidate);
    });
    const result = await writeLog(db, jobId, batch.attempt, workerId, log, planned, plan, now, kept !== null);
    if (!result) {
      keptLogs.delete(key);
      if (tries < APPEND_TRIES) continue;
      throw busy(jobId);
    }
    const written = result.rows;
    keepLog(key, log, batch.attempt, result);
    // What each row holds, as objects: the write answers only where it put them, not the payloads
    // back (each JSON text would cross the database's wire twice and be parsed again here).
    const bodies = new Map<string, Record<string, unknown>>();
    for (const r of fresh) bodies.set(`${batch.attempt}:${r.seq}`, log.late ? { ...r.event, late: true } : r.event);
    for (const gap of gaps) bodies.set(`${batch.attempt}:${-1 - gap.from}`, gapNotice(batch.attempt, gap));
    if (plan.truncation) bodies.set(`0:${TRUNCATED_SEQ}`, plan.truncation.event);
    const stored: HubEvent[] = written
      .map((r) => ({ ...(bodies.get(`${Number(r.attempt)}:${Number(r.seq)}`) as { type: string }), index: Number(r.idx), timestamp: now }))
      .sort((a, b) => a.index - b.index);
    const added = written.filter((r) => Number(r.attempt) === batch.attempt && Number(r.seq) >= 0).length;
    // A progress event stored before was counted the first time.
    const progressWrite =
      progress && !log.existing.has(progress.seq) ? progressUpdate(jobId, batch.attempt, progress.point, log.entry) : null;
    return {
      stored,
      added,
      nextIndex: stored.length ? stored[stored.length - 1]!.index + 1 : log.last + 1,
      dropped: plan.dropped.events,
      progressWrite,
    };
  }
}

/*
 * The log as a sender's last write left it, per isolate, so that its next batch is one round trip
 * (the write) instead of two (a read, then the write): a runner sends an attempt's batches one
 * after another, and the read said nothing new between them. Kept only what the write guards
 * (writeLog `fromKept`: the log's usage, the owner's bytes, that the sender ran the attempt,
 * whether it is late, the limits), so a kept log that no longer holds costs a failed write and a
 * read, never a wrong row. Not for a batch with progress (its expected end needs the entry read)
 * nor one whose seqs reach what the attempt has stored (a resend: the read finds which exist).
 */
const keptLogs = new BoundedMap<string, LogState>(4096);

const keptKey = (workerId: number | null, jobId: string, attempt: number) => `${workerId ?? "-"}:${attempt}:${jobId}`;

/** The kept log for a batch of these seqs, when it serves: every seq above the attempt's highest stored. */
function keptLog(key: string, seqs: Set<number>): LogState | null {
  const log = keptLogs.get(key);
  if (!log) return null;
  const floor = log.maxSeq ?? -1;
  for (const seq of seqs) if (seq <= floor) return null;
  return log;
}

/** Keeps the log as `written` left it: its next index, the attempt's highest seq, the usage (as stored) and the owner's bytes. */
function keepLog(key: string, log: LogState, attempt: number, written: { rows: Row[]; usage: Row }): void {
  let last = log.last;
  let maxSeq = log.maxSeq;
  for (const r of written.rows) {
    last = Math.max(last, Number(r.idx));
    if (Number(r.attempt) === attempt && Number(r.seq) >= 0) maxSeq = Math.max(maxSeq ?? -1, Number(r.seq));
  }
  const u = written.usage;
  const usage: LogUsage = {
    events: Number(u.events),
    bytes: Number(u.bytes),
    truncatedAt: u.truncated_events === null ? null : { events: Number(u.truncated_events), bytes: Number(u.truncated_bytes) },
  };
  keptLogs.set(key, {
    ...log,
    existing: new Set(),
    maxSeq,
    last,
    usage,
    usageKey: String(u.usage_key),
    userBytes: log.userBytes === null ? null : log.userBytes + usage.bytes - log.usage.bytes,
    entry: undefined,
  });
}

const busy = (jobId: string) =>
  new ApiError(503, "events_busy", `Job ${jobId}'s event log kept changing while this batch was stored: send it again`, undefined, {
    "Retry-After": "1",
  });

/** What a batch is planned from, read in one batch: whether the sender ran the attempt, the log, its usage and its owner's. */
interface LogState {
  mine: boolean;
  late: boolean;
  userId: number | null;
  /** The attempt's highest trainer seq stored (null: none). */
  maxSeq: number | null;
  /** Which of the batch's seqs are stored already. */
  existing: Set<number>;
  /** The log's last index (-1: empty). */
  last: number;
  usage: LogUsage;
  /** The usage row as read ("" when there is none): the write holds only while it is unchanged. */
  usageKey: string;
  /** The owner's stored bytes over all their jobs (null: no owner). */
  userBytes: number | null;
  limits: EventLimits;
  /** The event_limits setting as stored (null: none): a write planned from a kept log holds only while it is unchanged. */
  limitsRaw: string | null;
  entry: Record<string, unknown> | undefined;
}

// The sender ran this attempt of the job: it runs it now, or job_attempts says it did.
const RAN_IT = `EXISTS (SELECT 1 FROM queue_entries q WHERE q.job_id = :job AND (:worker IS NULL OR (q.worker_id = :worker AND q.attempt = :attempt)
                  OR EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = :job AND a.attempt = :attempt AND a.worker_id = :worker)))`;
// The usage row of the job as one value, to compare with what was read.
// One row's usage key, as the read compares it and the write returns it.
const USAGE_KEY_OF_ROW = `events || ':' || bytes || ':' || dropped`;
const USAGE_KEY = `COALESCE((SELECT ${USAGE_KEY_OF_ROW} FROM job_event_usage WHERE job_id = :job), '')`;
const USER_BYTES = "COALESCE((SELECT SUM(bytes) FROM job_event_usage WHERE user_id = :user), 0)";
// Whether the sender's events are late now (readLog's `late`), as 0 or 1.
const LATE = `NOT EXISTS (SELECT 1 FROM queue_entries q WHERE q.job_id = :job AND q.status = 'running' AND q.attempt = :attempt
                AND (:worker IS NULL OR q.worker_id = :worker))`;
const LIMITS_RAW = "(SELECT value FROM settings WHERE key = 'event_limits')";

async function readLog(
  db: Database,
  workerId: number | null,
  jobId: string,
  attempt: number,
  seqs: number[],
  withEntry: boolean,
): Promise<LogState> {
  const args = { job: jobId, attempt, worker: workerId };
  const [job, maxSeq, existing, usage, limits, entry] = await db.$client.batch(
    [
      {
        // Late: the job no longer runs this attempt there (it ended, or went back to the queue).
        sql: `SELECT ${RAN_IT} AS mine, ${LATE} AS late,
                     (SELECT user_id FROM queue_entries WHERE job_id = :job) AS user_id`,
        args,
      },
      {
        sql: "SELECT MAX(seq) AS seq FROM job_events WHERE job_id = :job AND attempt = :attempt AND seq >= 0",
        args: { job: jobId, attempt },
      },
      {
        sql: "SELECT seq FROM job_events WHERE job_id = :job AND attempt = :attempt AND seq IN (SELECT value FROM json_each(:seqs))",
        args: { job: jobId, attempt, seqs: JSON.stringify(seqs) },
      },
      {
        sql: `SELECT (SELECT COALESCE(MAX(idx), -1) FROM job_events WHERE job_id = :job) AS last, ${USAGE_KEY} AS usage_key,
                     u.events, u.bytes, u.truncated_events, u.truncated_bytes,
                     (SELECT COALESCE(SUM(o.bytes), 0) FROM job_event_usage o
                      WHERE o.user_id = (SELECT user_id FROM queue_entries WHERE job_id = :job)) AS user_bytes
              FROM (SELECT 1) LEFT JOIN job_event_usage u ON u.job_id = :job`,
        args: { job: jobId },
      },
      { sql: "SELECT value FROM settings WHERE key = 'event_limits'", args: [] },
      ...(withEntry
        ? [
            {
              sql: "SELECT status, attempt, started_at, progress_rate FROM queue_entries WHERE job_id = :job AND (:worker IS NULL OR worker_id = :worker)",
              args: { job: jobId, worker: workerId },
            },
          ]
        : []),
    ],
    "read",
  );
  const j = job!.rows[0]!;
  const u = usage!.rows[0]!;
  const userId = j.user_id === null ? null : Number(j.user_id);
  const limitsValue = limits!.rows[0]?.value;
  return {
    mine: Number(j.mine) === 1,
    late: Number(j.late) === 1,
    userId,
    maxSeq: (maxSeq!.rows[0]?.seq ?? null) === null ? null : Number(maxSeq!.rows[0]!.seq),
    existing: new Set(existing!.rows.map((r) => Number(r.seq))),
    last: Number(u.last),
    usage: {
      events: Number(u.events ?? 0),
      bytes: Number(u.bytes ?? 0),
      truncatedAt: u.truncated_events === null ? null : { events: Number(u.truncated_events), bytes: Number(u.truncated_bytes) },
    },
    usageKey: String(u.usage_key),
    userBytes: userId === null ? null : Number(u.user_bytes),
    limits: parseSetting("event_limits", typeof limitsValue === "string" ? limitsValue : null),
    limitsRaw: typeof limitsValue === "string" ? limitsValue : null,
    entry: entry?.rows[0] as Record<string, unknown> | undefined,
  };
}

/**
 * Writes a planned batch in one write batch: the rows, at the log's next indexes, and the usage
 * (the bytes as SQLite counts them), both only while the log's usage is as `log` read it and the
 * owner's still admits the plan (ownerGuard). The rows stored, or null when something came
 * between (nothing was written).
 */
async function writeLog(
  db: Database,
  jobId: string,
  attempt: number,
  workerId: number | null,
  log: LogState,
  planned: PlannedRow[],
  plan: Admission,
  now: string,
  fromKept = false,
): Promise<{ rows: Row[]; usage: Row } | null> {
  const owner = ownerGuard(log, planned, plan);
  // Planned from a kept log, the write also holds only while the sender still ran the attempt,
  // the job is as late or not as it was, and the limits are as they were (a read checks these).
  const kept = fromKept ? ` AND ${RAN_IT} AND ${LATE} = :late AND ${LIMITS_RAW} IS :limits_raw` : "";
  const unchanged = `${USAGE_KEY} = :usage_key AND (:user IS NULL OR ${owner.sql})${kept}`;
  const guard = {
    job: jobId,
    usage_key: log.usageKey,
    user: log.userId,
    ...owner.args,
    ...(fromKept ? { attempt, worker: workerId, late: log.late ? 1 : 0, limits_raw: log.limitsRaw } : {}),
  };
  const [inserted, usage] = await db.$client.batch(
    [
      {
        // SQLite reads the SELECT in full before inserting (same table), so MAX(idx) is the log's
        // end before this batch and the rows take the next indexes in order.
        sql: `INSERT INTO job_events (job_id, idx, attempt, seq, type, payload, created_at)
              SELECT :job, base.n + ROW_NUMBER() OVER (ORDER BY e.key), e.value ->> '$.attempt', e.value ->> '$.seq', e.value ->> '$.type',
                     e.value ->> '$.payload', :now
              FROM json_each(:rows) AS e, (SELECT COALESCE(MAX(idx), -1) AS n FROM job_events WHERE job_id = :job) AS base
              WHERE ${unchanged} AND ${RAN_IT}
                AND NOT EXISTS (SELECT 1 FROM job_events j WHERE j.job_id = :job AND j.attempt = e.value ->> '$.attempt' AND j.seq = e.value ->> '$.seq')
              RETURNING idx, attempt, seq`,
        args: { ...guard, attempt, worker: workerId, now, rows: JSON.stringify(planned) },
      },
      {
        sql: `INSERT INTO job_event_usage (job_id, user_id, events, bytes, dropped, dropped_bytes, truncated_events, truncated_bytes)
              SELECT :job, :user, n.events, n.bytes, :dropped, :dropped_bytes, :truncated_events, :truncated_bytes
              FROM (SELECT COUNT(*) AS events, COALESCE(SUM(length(CAST(payload AS BLOB))), 0) AS bytes FROM job_events WHERE job_id = :job AND idx > :last) AS n
              WHERE ${unchanged}
              ON CONFLICT (job_id) DO UPDATE SET events = events + excluded.events, bytes = bytes + excluded.bytes,
                dropped = dropped + excluded.dropped, dropped_bytes = dropped_bytes + excluded.dropped_bytes,
                truncated_events = COALESCE(truncated_events, excluded.truncated_events),
                truncated_bytes = COALESCE(truncated_bytes, excluded.truncated_bytes)
              RETURNING events, bytes, truncated_events, truncated_bytes, ${USAGE_KEY_OF_ROW} AS usage_key`,
        args: {
          ...guard,
          last: log.last,
          dropped: plan.dropped.events,
          dropped_bytes: plan.dropped.bytes,
          truncated_events: plan.truncation?.at.events ?? null,
          truncated_bytes: plan.truncation?.at.bytes ?? null,
        },
      },
    ],
    "write",
  );
  return usage!.rows.length ? { rows: inserted!.rows, usage: usage!.rows[0]! } : null;
}

/**
 * The condition on the owner's stored bytes under which a plan still holds when it is written.
 * Another job of the same owner storing events between the read and the write changes those
 * bytes; requiring them unchanged made an owner's running jobs retry each other's batches (and
 * answer 503 events_busy after APPEND_TRIES) once a dozen of them reported at once. The
 * condition is what the plan depended on, so what is written is the plan a read at the moment of
 * the write would make, and the quota is never passed:
 * - a log truncated before: its plan never looked at the owner's bytes (no condition);
 * - nothing truncated: every candidate stored, which holds while the owner's bytes plus these
 *   still fit the quota (admitEvents stores while each next one fits; sizes are >= 0);
 * - this batch truncates the log before candidate k: the k before it (if any) must still fit,
 *   and the owner's bytes must not have fallen (then the k-th still does not fit).
 *   The notice's figure of the owner's bytes is as read.
 */
function ownerGuard(log: LogState, planned: PlannedRow[], plan: Admission): { sql: string; args: Record<string, number | null> } {
  if (log.usage.truncatedAt !== null) return { sql: "1", args: {} };
  // The edge's own notice (attempt 0), not a trainer's event that calls itself events.truncated.
  const cut = plan.truncation === null ? planned.length : planned.findIndex((row) => row.attempt === 0 && row.seq === TRUNCATED_SEQ);
  const before = planned.slice(0, cut).reduce((sum, row) => sum + byteLength(row.payload), 0);
  const fits = `(:before_bytes = 0 OR ${USER_BYTES} + :before_bytes <= :quota)`;
  const args = { before_bytes: before, quota: log.limits.max_bytes_per_user };
  if (plan.truncation === null) return { sql: fits, args };
  return { sql: `${fits} AND ${USER_BYTES} >= :user_bytes`, args: { ...args, user_bytes: log.userBytes } };
}

function gapNotice(attempt: number, gap: { from: number; to: number }) {
  return {
    type: "events.gap",
    level: "warning",
    title: `${gap.to - gap.from + 1} event(s) of attempt ${attempt} never arrived (seq ${gap.from}${gap.to > gap.from ? ` to ${gap.to}` : ""})`,
    data: { attempt, from_seq: gap.from, to_seq: gap.to },
  };
}

// The edge's own notices about a whole job's log: attempt 0 (a job's attempts count from 1), once each.
const TRUNCATED_SEQ = -1;
const SUMMARY_SEQ = -2;

const truncationRow = (event: Record<string, unknown>): PlannedRow => ({
  attempt: 0,
  seq: TRUNCATED_SEQ,
  type: "events.truncated",
  payload: JSON.stringify(event),
});

/**
 * What a job's log holds and has dropped; zeros for a job with no events.
 *
 * @example
 * const { dropped } = await eventUsage(db, jobId);
 */
export async function eventUsage(
  db: Database,
  jobId: string,
): Promise<{ events: number; bytes: number; dropped: number; droppedBytes: number }> {
  const result = await db.$client.execute({
    sql: "SELECT events, bytes, dropped, dropped_bytes FROM job_event_usage WHERE job_id = ?",
    args: [jobId],
  });
  const row = result.rows[0];
  return {
    events: Number(row?.events ?? 0),
    bytes: Number(row?.bytes ?? 0),
    dropped: Number(row?.dropped ?? 0),
    droppedBytes: Number(row?.dropped_bytes ?? 0),
  };
}

/**
 * When a job ends with events dropped: its `events.summary` (how many were counted and not
 * stored, and what the log holds), stored once after its last event; null when nothing was
 * dropped or it is stored already. Events that arrive later still count on the job.
 *
 * @example
 * const summary = await summariseDroppedEvents(db, jobId); // the hub sends it before `end`
 */
export async function summariseDroppedEvents(db: Database, jobId: string): Promise<HubEvent | null> {
  const usage = await eventUsage(db, jobId);
  if (!usage.dropped) return null;
  const now = new Date().toISOString();
  const event = {
    type: "events.summary",
    level: "warning",
    title: `${usage.dropped} event(s) of this job (${usage.droppedBytes} bytes) were counted and not stored, past its event cap or its owner's quota; its log holds ${usage.events} events (${usage.bytes} bytes)`,
    data: { dropped_events: usage.dropped, dropped_bytes: usage.droppedBytes, stored_events: usage.events, stored_bytes: usage.bytes },
  };
  const payload = JSON.stringify(event);
  const [inserted] = await db.$client.batch(
    [
      {
        sql: `INSERT INTO job_events (job_id, idx, attempt, seq, type, payload, created_at)
              SELECT ?1, COALESCE(MAX(idx), -1) + 1, 0, ?2, 'events.summary', ?3, ?4 FROM job_events WHERE job_id = ?1 AND true
              ON CONFLICT DO NOTHING RETURNING idx`,
        args: [jobId, SUMMARY_SEQ, payload, now],
      },
      {
        sql: "UPDATE job_event_usage SET events = events + 1, bytes = bytes + length(CAST(?2 AS BLOB)) WHERE job_id = ?1 AND changes() = 1",
        args: [jobId, payload],
      },
    ],
    "write",
  );
  const row = inserted!.rows[0];
  return row ? { ...event, index: Number(row.idx), timestamp: now } : null;
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
 * attempt that was retried), or the point says nothing new (edge/jobs/estimate.ts). The
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
