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
