import { ServiceClient, ServiceError, type CallOptions } from "../../shared/client/client";
import type { Endpoint, EndpointInput, EndpointOutput } from "../../shared/client/endpoint";
import { endpoints } from "../../shared/client/endpoints";

export { endpoints, ServiceError };

/**
 * The dashboard's one client: the shared typed client on this page's origin. The browser sends
 * the session cookie itself (same origin), and its Origin header satisfies the CSRF rule.
 *
 * `endpoints` is typed by shared/client/endpoints.ts, schemas and all, but the dashboard's build
 * (edge/local/ui-build.ts) loads that file as a table of method, path and answer kind only: no zod
 * in the script, and the answers of this origin are taken as they come, unparsed (the API checks
 * what it is sent; the CLI and the runner parse what they get).
 */
export const client = new ServiceClient({ baseUrl: `${location.origin}/`, timeoutMs: 30_000 });

let onUnauthenticated: () => void = () => {};

/** What to do when any call answers 401 (the session ended): session.ts shows the login form. */
export function whenUnauthenticated(handler: () => void) {
  onUnauthenticated = handler;
}

/**
 * Calls an endpoint through the shared client; a 401 also ends the page's session.
 *
 * @example
 * const page = await call(endpoints.queueList, { query: { status: "pending" } });
 */
export async function call<E extends Endpoint>(endpoint: E, input: EndpointInput<E>, options?: CallOptions): Promise<EndpointOutput<E>> {
  try {
    return await client.call(endpoint, input, options);
  } catch (error) {
    if (error instanceof ServiceError && error.status === 401 && (endpoint as Endpoint) !== endpoints.login) onUnauthenticated();
    throw error;
  }
}

/** Any thrown value as a ServiceError, so every error shows the same way. */
export function asServiceError(error: unknown): ServiceError {
  if (error instanceof ServiceError) return error;
  return new ServiceError(0, "client_error", error instanceof Error ? error.message : String(error));
}
