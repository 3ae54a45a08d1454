/**
 * User levels, highest first, with the queue priority each one gives.
 * A user may hold several levels; the highest one decides what they may do.
 */
export const LEVELS = ["admin", "lead", "researcher", "viewer"] as const;
export type Level = (typeof LEVELS)[number];

export const LEVEL_PRIORITY: Record<Level, number> = { admin: 30, lead: 20, researcher: 10, viewer: 0 };
export const LEVEL_LABEL: Record<Level, string> = { admin: "Urgent", lead: "High", researcher: "Normal", viewer: "Low" };

/** The highest of the given levels, or null when there are none. */
export function highestLevel(levels: readonly string[]): Level | null {
  return LEVELS.find((level) => levels.includes(level)) ?? null;
}

/**
 * Whose jobs a user may act on: null (anyone's) for leads and admins, else their own id. The
 * one rule behind cancelling, training control and storage credentials.
 */
export function ownerScope(user: { id: number; level: Level | null }): number | null {
  return levelAtLeast(user.level, "lead") ? null : user.id;
}

/** True when `held` is at least as high as `required`. */
export function levelAtLeast(held: Level | null, required: Level): boolean {
  if (held === null) return false;
  return LEVELS.indexOf(held) <= LEVELS.indexOf(required);
}
