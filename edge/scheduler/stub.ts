import { objectNamed } from "../durable-object-names";
import type { Env } from "../env";

/**
 * The one Scheduler instance.
 *
 * @example
 * await schedulerOf(c.env).pass("cancel");
 */
export function schedulerOf(env: Env) {
  return objectNamed(env.SCHEDULER, "main");
}
