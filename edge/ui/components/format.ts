/** Formatting shared by the views: times, durations, sizes, money. */

/** An ISO timestamp or unix seconds as local date and time; "-" when absent. */
export function formatTime(value: string | number | null | undefined): string {
  if (value === null || value === undefined || value === "") return "-";
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

/** An ISO timestamp as the local hour and minute (10:42); "-" when absent or not a time. */
export function formatClock(value: string | null | undefined): string {
  const date = value ? new Date(value) : null;
  return date && !Number.isNaN(date.getTime()) ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : "-";
}

/**
 * Seconds as a short duration.
 *
 * @example
 * formatDuration(3725); // "1 h 2 min"
 */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "-";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/**
 * How far ahead an ISO time is, for an expected start: "in 25 min", "in 1 h 5 min"; "any moment"
 * when it is due or past; "-" when absent.
 *
 * @example
 * formatFromNow(new Date(Date.now() + 1_500_000).toISOString()); // "in 25 min"
 */
export function formatFromNow(value: string | null | undefined, now = Date.now()): string {
  const at = value ? Date.parse(value) : NaN;
  if (Number.isNaN(at)) return "-";
  const s = Math.round((at - now) / 1000);
  if (s <= 30) return "any moment";
  if (s < 3600) return `in ${Math.max(1, Math.round(s / 60))} min`;
  return `in ${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

/** US dollars, with cents (or four decimals under a cent). */
export function formatUsd(value: number | null | undefined): string {
  if (value === null || value === undefined) return "-";
  return `$${value !== 0 && Math.abs(value) < 0.01 ? value.toFixed(4) : value.toFixed(2)}`;
}
