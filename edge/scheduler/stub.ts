import type { Env } from "../env";

/**
 * The one Scheduler instance.
 *
 * @example
 * await schedulerOf(c.env).pass("cancel");
 */
export function schedulerOf(env: Env) {
  return env.SCHEDULER.get(env.SCHEDULER.idFromName("main") as never);
}
