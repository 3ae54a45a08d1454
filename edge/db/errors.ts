import { ApiError } from "../errors";

/** True when a libSQL error (possibly wrapped by drizzle) is a UNIQUE or PRIMARY KEY violation. */
export function isUniqueViolation(error: unknown): boolean {
  for (let e: unknown = error; e; e = (e as { cause?: unknown }).cause) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === "string" && /CONSTRAINT_(UNIQUE|PRIMARYKEY)/.test(code)) return true;
    if (typeof message === "string" && /UNIQUE constraint failed|PRIMARY KEY constraint failed/.test(message)) return true;
  }
  return false;
}

/** How long a client is asked to wait before trying again after the database was busy. */
export const BUSY_RETRY_AFTER_SECONDS = 2;

/**
 * The answer for a fault of the database itself, or null for any other error: SQLITE_BUSY or
 * SQLITE_LOCKED (another process held its lock longer than the bridge waits: a backup, a
 * migration tool) is 503 with Retry-After; SQLITE_FULL (its disk is full) is 507. A statement
 * that failed so changed nothing (a batch is rolled back whole).
 *
 * @example
 * databaseFault(new LibsqlError("database is locked", "SQLITE_BUSY")); // ApiError 503 database_busy
 */
export function databaseFault(error: unknown): ApiError | null {
  for (let e: unknown = error; e; e = (e as { cause?: unknown }).cause) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    const text = `${typeof code === "string" ? code : ""} ${typeof message === "string" ? message : ""}`;
    if (/SQLITE_(BUSY|LOCKED)|database is locked|database table is locked/.test(text))
      return new ApiError(
        503,
        "database_busy",
        "The database is busy: another process holds its lock (a backup or a migration tool?). Nothing was changed; try again shortly",
        undefined,
        { "Retry-After": String(BUSY_RETRY_AFTER_SECONDS) },
      );
    if (/SQLITE_FULL|database or disk is full/.test(text))
      return new ApiError(
        507,
        "storage_full",
        "The disk holding the database is full. Nothing was changed; free space on it and try again",
      );
  }
  return null;
}
