/** True when a libSQL error (possibly wrapped by drizzle) is a UNIQUE or PRIMARY KEY violation. */
export function isUniqueViolation(error: unknown): boolean {
  for (let e: unknown = error; e; e = (e as { cause?: unknown }).cause) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === "string" && /CONSTRAINT_(UNIQUE|PRIMARYKEY)/.test(code)) return true;
    if (typeof message === "string" && /UNIQUE constraint failed|PRIMARY KEY constraint failed/.test(message)) return true;
  }
  return false;
}
