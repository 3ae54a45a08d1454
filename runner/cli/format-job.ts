import type { QueueEntry } from "../../shared/schemas/queue";

/*
 * How jobs read in the terminal: table cells, ages, GPUs and the reason a job waits. Pure
 * functions of the API's answers, shared by `jobs list`, `jobs status` and `jobs submit`.
 */

/**
 * A value as a table cell: "-" for nothing (also another user's field the API does not show),
 * arrays joined with commas, objects as JSON.
 *
 * @example
 * cell(null); // "-"
 * cell([0, 1]); // "0,1"
 */
export function cell(value: unknown): string {
  if (value === null || value === undefined) return "-";
  if (Array.isArray(value)) return value.map((item) => (typeof item === "object" ? JSON.stringify(item) : String(item))).join(",");
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/**
 * The time since `from` in one unit, as `squeue` and `kubectl` show ages: 42s, 5m, 2h, 3d.
 *
 * @example
 * age("2026-01-01T00:00:00Z", new Date("2026-01-01T02:30:00Z")); // "2h"
 */
export function age(from: string, now: Date = new Date()): string {
  const seconds = Math.max(0, Math.floor((now.getTime() - Date.parse(from)) / 1000));
  if (Number.isNaN(seconds)) return "-";
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86_400)}d`;
}

/** GPU device indices as the service writes them: [0, 1]. */
export const gpuList = (gpus: readonly number[]) => `[${gpus.join(", ")}]`;

/**
 * The GPUS cell of a job: the GPUs it holds ([0,1]), else what it asks for (2), "cpu" for a job
 * that needs none, "cloud" for a cloud job, "-" when the API does not show it.
 */
export function gpusCell(entry: Partial<QueueEntry>): string {
  if (entry.job_type === "cloud") return "cloud";
  if (entry.allocated_gpus?.length) return `[${entry.allocated_gpus.join(",")}]`;
  if (entry.num_processes === undefined) return "-";
  return entry.num_processes === 0 ? "cpu" : String(entry.num_processes);
}

/**
 * A stalled job's status, as `jobs status` shows it; null when it is not marked stalled.
 *
 * @example
 * stalledText({ status: "running", stalled_since: "2026-11-23T10:00:00.000Z" }); // "running, STALLED: no training step since 2026-11-23T10:00:00.000Z"
 */
export function stalledText(entry: { status: string; stalled_since?: string | null }): string | null {
  return entry.stalled_since ? `${entry.status}, STALLED: no training step since ${entry.stalled_since}` : null;
}

/**
 * A running job's expected end and how it was estimated, as `jobs status` shows it; null when unknown.
 *
 * @example
 * expectedEndText({ expected_end_at: "2026-11-23T10:00:00.000Z", expected_end_method: "max_runtime" }); // "2026-11-23T10:00:00.000Z (from max runtime)"
 */
export function expectedEndText(entry: Partial<Pick<QueueEntry, "expected_end_at" | "expected_end_method">>): string | null {
  if (!entry.expected_end_at || !entry.expected_end_method) return null;
  return `${entry.expected_end_at} (from ${entry.expected_end_method.replaceAll("_", " ")})`;
}

/**
 * A waiting job's expected run time and how it was estimated; null when unknown.
 *
 * @example
 * expectedRunText({ expected_minutes: 90, expected_minutes_method: "recent_runs" }); // "about 90 min (from recent runs)"
 */
export function expectedRunText(entry: Partial<Pick<QueueEntry, "expected_minutes" | "expected_minutes_method">>): string | null {
  if (entry.expected_minutes === null || entry.expected_minutes === undefined || !entry.expected_minutes_method) return null;
  const minutes = entry.expected_minutes >= 10 ? Math.round(entry.expected_minutes) : entry.expected_minutes;
  return `about ${minutes} min (from ${entry.expected_minutes_method.replaceAll("_", " ")})`;
}

/**
 * A waiting job's expected run time in words from expected_run_seconds and its basis.
 *
 * @example
 * runTimeText({ expected_run_seconds: 5400, expected_run_basis: "its --max_runtime_minutes (90)" }); // "1h 30m: its --max_runtime_minutes (90)"
 */
export function runTimeText(entry: Partial<Pick<QueueEntry, "expected_run_seconds" | "expected_run_basis">>): string | null {
  const basis = entry.expected_run_basis ?? null;
  if (entry.expected_run_seconds === null || entry.expected_run_seconds === undefined) return basis;
  return `${duration(entry.expected_run_seconds)}${basis ? `: ${basis}` : ""}`;
}

/**
 * How far ahead a time is, in one unit: "in 25m", "in 3h"; "now" when it is due or past.
 *
 * @example
 * untilText("2026-01-01T02:30:00Z", new Date("2026-01-01T00:00:00Z")); // "in 2h"
 */
export function untilText(at: string, now: Date = new Date()): string {
  const ms = Date.parse(at) - now.getTime();
  if (Number.isNaN(ms)) return "-";
  if (ms <= 0) return "now";
  return `in ${age(now.toISOString(), new Date(at))}`;
}

/**
 * The START cell of `jobs list`: when a waiting job is expected to start ("in 25m"), "unknown" when
 * the service cannot say, "-" for other jobs (or another user's job the API shows nothing of).
 *
 * @example
 * startCell({ status: "pending", expected_start_at: null, expected_start_basis: "unknown: ..." }); // "unknown"
 */
export function startCell(
  entry: Partial<Pick<QueueEntry, "status" | "expected_start_at" | "expected_start_basis">>,
  now: Date = new Date(),
): string {
  if (entry.status !== "pending" && entry.status !== "blocked") return "-";
  if (entry.expected_start_at) return untilText(entry.expected_start_at, now);
  return entry.status === "blocked" || entry.expected_start_basis !== undefined ? "unknown" : "-";
}

/**
 * A waiting job's expected start with how it was estimated, as `jobs status` shows it; null when
 * the API gives neither.
 *
 * @example
 * expectedStartText({ expected_start_at: "2026-11-23T10:00:00.000Z", expected_start_basis: "after local-1 ends (expected 2026-11-23T10:00Z)" });
 * // "2026-11-23T10:00:00.000Z (in 20m): after local-1 ends (expected 2026-11-23T10:00Z)"
 */
export function expectedStartText(
  entry: Partial<Pick<QueueEntry, "expected_start_at" | "expected_start_basis">>,
  now: Date = new Date(),
): string | null {
  const basis = entry.expected_start_basis ?? null;
  if (entry.expected_start_at) return `${entry.expected_start_at} (${untilText(entry.expected_start_at, now)})${basis ? `: ${basis}` : ""}`;
  return basis;
}

/**
 * Why a job waits, in one phrase: its reason code and the Scheduler's message.
 *
 * @example
 * waitText({ wait_reason: "gpus_busy", wait_message: "needs 2 GPU(s)" }); // "gpus_busy: needs 2 GPU(s)"
 */
export function waitText(entry: { wait_reason?: string | null; wait_message?: string | null }): string {
  const reason = entry.wait_reason ?? null;
  const message = entry.wait_message ?? null;
  if (reason && message) return `${reason}: ${message}`;
  return reason ?? message ?? "not scheduled yet";
}

/**
 * A byte count for people: 512 B, 1.5 KiB, 12.0 MiB.
 *
 * @example
 * bytes(1536); // "1.5 KiB"
 */
export function bytes(count: number): string {
  if (count < 1024) return `${count} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = count / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** US dollars to the cent, or to a hundredth of a cent below one cent (per-second rates are tiny). */
export const usd = (amount: number) => (amount !== 0 && Math.abs(amount) < 0.01 ? `$${amount.toFixed(4)}` : `$${amount.toFixed(2)}`);

/** A duration in seconds as 1h 5m, 12m, 40s. */
export function duration(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  if (h > 0) return m ? `${h}h ${m}m` : `${h}h`;
  if (m > 0) return `${m}m`;
  return `${Math.round(seconds)}s`;
}
