import { EnvironmentName } from "../../shared/schemas/environments";
import { ApiError } from "../errors";

/**
 * Refuses a name that could not be an environment's directory or would shadow a fixed route
 * (the rule is EnvironmentName's). Routes validate first; this keeps every other caller honest.
 *
 * @example
 * assertEnvironmentName("portraits-flux"); // passes
 * assertEnvironmentName("../etc"); // throws a 422 ApiError
 */
export function assertEnvironmentName(name: string): void {
  const result = EnvironmentName.safeParse(name);
  if (result.success) return;
  const message = result.error.issues.map((issue) => issue.message).join("; ");
  throw new ApiError(422, "invalid_request", `Invalid environment name ${JSON.stringify(name)}: ${message}`, [{ path: "name", message }]);
}

const INLINE_PREFIX = "inline-run-";

/**
 * The environment a user's inline run (a form started with no active environment) is saved as:
 * one per user, so users never overwrite each other's inline runs.
 *
 * @example
 * inlineEnvironmentName(7); // "inline-run-7"
 */
export function inlineEnvironmentName(userId: number): string {
  return `${INLINE_PREFIX}${userId}`;
}

/**
 * Refuses to create another user's inline-run name (`inline-run-<their id>`), which would block
 * their inline runs.
 *
 * @example
 * assertNotOthersInlineName("inline-run-8", 7); // throws a 422 ApiError
 */
export function assertNotOthersInlineName(name: string, userId: number): void {
  if (/^inline-run-\d+$/i.test(name) && name !== inlineEnvironmentName(userId)) {
    throw new ApiError(422, "reserved_name", `${JSON.stringify(name)} is reserved for another user's inline runs; choose another name`, [
      { path: "body.name", message: "reserved" },
    ]);
  }
}
