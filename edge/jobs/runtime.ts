import { ApiError } from "../errors";

/*
 * A job's run-time option, `--max_runtime_minutes`: what caps how long it may run, and what its
 * expected end and run time assume when nothing better is known (edge/jobs/estimate.ts), for local
 * and cloud jobs alike.
 */

/** The longest run time a job may ask for, in minutes: a week. */
export const MAX_RUNTIME_MINUTES = 10_080;
/** The environment option that caps a job's run time. */
export const RUNTIME_OPTION = "--max_runtime_minutes";

/** Minutes from a run-time value (a number or a numeric string); undefined when unset, "invalid" when not a whole number from 1 to 10080. */
function readMinutes(raw: unknown): number | undefined | "invalid" {
  // A form sends an unset option as "" (options travel as form fields).
  if (raw === undefined || raw === null || raw === "") return undefined;
  const value = typeof raw === "string" && /^\s*\d+\s*$/.test(raw) ? Number(raw) : raw;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > MAX_RUNTIME_MINUTES) return "invalid";
  return value;
}

/**
 * Minutes from a run-time value, refusing one that is not a whole number from 1 to 10080 (422
 * invalid_option naming `where`); undefined when unset.
 *
 * @example
 * runtimeMinutes("90", "--max_runtime_minutes"); // 90
 */
export function runtimeMinutes(raw: unknown, where: string): number | undefined {
  const value = readMinutes(raw);
  if (value === "invalid") {
    const message = `must be a whole number of minutes from 1 to ${MAX_RUNTIME_MINUTES}, not ${JSON.stringify(raw)}`;
    throw new ApiError(422, "invalid_option", `${where} ${message}`, [{ path: where, message }]);
  }
  return value;
}

/**
 * A `--max_runtime_minutes` value read as submission reads it, without refusing: its minutes, or
 * null when unset or invalid (a local job's environment is not checked for it at submit, and an
 * estimate must never fail a request).
 *
 * @example
 * maxRuntimeMinutes("90"); // 90
 * maxRuntimeMinutes("soon"); // null
 */
export function maxRuntimeMinutes(raw: unknown): number | null {
  const value = readMinutes(raw);
  return value === undefined || value === "invalid" ? null : value;
}
