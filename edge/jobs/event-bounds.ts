import type { EventLimits } from "../../shared/schemas/events";

/*
 * What a job's event log may hold (issue 26, "Bounds"): one pass over a batch as a pure function,
 * beside its SQL in events.ts. The caps are per job, all its attempts together (a retried job
 * keeps one log, so a runaway attempt cannot make room for itself by failing), and per user over
 * all their jobs. Until a job passes one, every event is stored. The first event that does not
 * fit truncates the log, for good: an `events.truncated` notice is stored there, once, and from
 * then on only lifecycle events are stored - at most RESERVE_EVENTS and RESERVE_BYTES more than
 * the log held when it was truncated, so even those are bounded - while everything else (log
 * lines, progress, validation images, anything unknown) is counted and dropped. How many were
 * dropped is on the job (GET /api/training/status) and, when it ends, in an `events.summary`.
 */

/** What stays meaningful of a job past its cap: how it started, moved through its stages, saved, and ended. */
export const LIFECYCLE_EVENT_TYPES: ReadonlySet<string> = new Set([
  "training.started",
  "training.stage",
  "training.status",
  "training.completed",
  "training.failed",
  "training.error",
  "training.fenced",
  "training.stopping",
  "training.stop_requested",
  "training.stop_escalated",
  "training.stop_checkpoint_missed",
  "checkpoint.saved",
  "checkpoints.listed",
  "model.saved",
  "upload.completed",
  "script.finished",
  "script.failed",
  "script.refused",
  "dataset.missing",
  "dataset.ready",
  "sandbox.off",
  "resume.prepared",
  "command.undelivered",
  "events.gap",
  "events.dropped",
  "events.truncated",
  "events.summary",
  "cloud.budget_exceeded",
]);

/** Lifecycle events a truncated log still takes: at most this many more, and this many more bytes. */
export const RESERVE_EVENTS = 1_000;
export const RESERVE_BYTES = 1024 * 1024;

/** A job's log as stored: its events and bytes, and its size when it was truncated (null: it has not been). */
export interface LogUsage {
  events: number;
  bytes: number;
  truncatedAt: { events: number; bytes: number } | null;
}

/** An event that may be stored: its type and the bytes of its JSON. */
export interface Candidate {
  type: string;
  bytes: number;
}

export type TruncationReason = "job_events" | "job_bytes" | "user_bytes";

export interface Admission {
  /** Per candidate, in order: stored (true) or counted and dropped. */
  stored: boolean[];
  /** The notice that truncates the log in this batch, to be stored just before candidate `before`; null when none. */
  truncation: { before: number; at: { events: number; bytes: number }; event: Record<string, unknown>; bytes: number } | null;
  dropped: { events: number; bytes: number };
}

const utf8 = new TextEncoder();
/** The bytes of a string as stored (UTF-8). */
export const byteLength = (text: string) => utf8.encode(text).byteLength;

const size = (bytes: number) =>
  bytes >= 1024 ** 3
    ? `${(bytes / 1024 ** 3).toFixed(1)} GiB`
    : bytes >= 1024 ** 2
      ? `${(bytes / 1024 ** 2).toFixed(1)} MiB`
      : `${Math.ceil(bytes / 1024)} KiB`;

/**
 * The `events.truncated` notice for a log truncated at `at` (the job's log then) for `reason`.
 *
 * @example
 * truncationNotice("job_events", { events: 50_000, bytes: 9_000_000 }, 120_000_000, limits);
 */
export function truncationNotice(
  reason: TruncationReason,
  at: { events: number; bytes: number },
  userBytes: number | null,
  limits: EventLimits,
): Record<string, unknown> {
  const why = {
    job_events: `this job has stored ${at.events} events, its cap (max_events_per_job ${limits.max_events_per_job})`,
    job_bytes: `this job has stored ${size(at.bytes)} of events, its cap (max_bytes_per_job ${limits.max_bytes_per_job})`,
    user_bytes: `its owner's jobs have stored ${size(userBytes ?? 0)} of events, their quota (max_bytes_per_user ${limits.max_bytes_per_user})`,
  }[reason];
  return {
    type: "events.truncated",
    level: "warning",
    title: `Events truncated: ${why}. From here on only lifecycle events (training.*, checkpoints, ends) are stored; the rest are counted (events_dropped in GET /api/training/status)`,
    data: {
      reason,
      stored_events: at.events,
      stored_bytes: at.bytes,
      ...(reason === "user_bytes" ? { user_bytes: userBytes } : {}),
      max_events_per_job: limits.max_events_per_job,
      max_bytes_per_job: limits.max_bytes_per_job,
      max_bytes_per_user: limits.max_bytes_per_user,
    },
  };
}

/**
 * Which candidates of a batch (its new events, then its gap notices) a job's log takes, in order,
 * given the log (`usage`), its owner's stored bytes over all their jobs (`userBytes`; null: a job
 * without an owner, under no user quota) and the limits in force. The truncation notice, when
 * this batch truncates the log, counts as stored.
 *
 * @example
 * admitEvents({ events: 49_999, bytes: 10_000, truncatedAt: null }, 0, limits, [{ type: "log", bytes: 60 }, { type: "log", bytes: 60 }]);
 * // stored [true, false], a truncation before candidate 1, dropped { events: 1, bytes: 60 }
 */
export function admitEvents(usage: LogUsage, userBytes: number | null, limits: EventLimits, candidates: Candidate[]): Admission {
  let { events, bytes } = usage;
  let user = userBytes;
  let truncatedAt = usage.truncatedAt;
  let truncation: Admission["truncation"] = null;
  const dropped = { events: 0, bytes: 0 };
  const store = (n: number) => {
    events += 1;
    bytes += n;
    if (user !== null) user += n;
  };
  const stored = candidates.map((candidate, i) => {
    if (truncatedAt === null) {
      const fitsJob = events + 1 <= limits.max_events_per_job && bytes + candidate.bytes <= limits.max_bytes_per_job;
      const fitsUser = user === null || user + candidate.bytes <= limits.max_bytes_per_user;
      if (fitsJob && fitsUser) {
        store(candidate.bytes);
        return true;
      }
      const reason: TruncationReason = !fitsJob ? (events + 1 > limits.max_events_per_job ? "job_events" : "job_bytes") : "user_bytes";
      truncatedAt = { events, bytes };
      const event = truncationNotice(reason, truncatedAt, user, limits);
      const noticeBytes = byteLength(JSON.stringify(event));
      truncation = { before: i, at: truncatedAt, event, bytes: noticeBytes };
      store(noticeBytes);
    }
    const fitsReserve = events + 1 <= truncatedAt.events + RESERVE_EVENTS && bytes + candidate.bytes <= truncatedAt.bytes + RESERVE_BYTES;
    if (LIFECYCLE_EVENT_TYPES.has(candidate.type) && fitsReserve) {
      store(candidate.bytes);
      return true;
    }
    dropped.events += 1;
    dropped.bytes += candidate.bytes;
    return false;
  });
  return { stored, truncation, dropped };
}
