import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env";
import { ApiError } from "../errors";

/**
 * Whether `origin` (an Origin header) is a page of this service: the host (and port) the request
 * was sent to, or SERVICE_PUBLIC_URL's. Hosts rather than whole origins, because behind the
 * local HTTPS front the Worker sees `http://` for a page the browser loaded over `https://`; a
 * page of another site never has this host and port. `null` (a sandboxed frame, a file) never is.
 */
function isOwnPage(origin: string, requestUrl: string, publicUrl: URL | undefined): boolean {
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return false;
  }
  return host === new URL(requestUrl).host || host === publicUrl?.host;
}

/**
 * Refuses a WebSocket upgrade that a browser opened from another site's page: 403
 * `foreign_origin`, before anything else looks at it. A WebSocket is not held to the same-origin
 * rule and a browser sends the user's session cookie with it, so without this check any page a
 * logged-in user visits could read their jobs' events. A browser always sends Origin on an
 * upgrade; the runner and other programs send none, and are let through to their own checks.
 *
 * @example
 * app.use("*", websocketOrigin());
 */
export function websocketOrigin(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (c.req.header("upgrade")?.toLowerCase() !== "websocket") return next();
    const origin = c.req.header("origin");
    if (origin !== undefined && !isOwnPage(origin, c.req.url, c.get("config").publicUrl))
      throw new ApiError(
        403,
        "foreign_origin",
        `A WebSocket may only be opened from this service's own pages, not from ${JSON.stringify(origin)}`,
      );
    return next();
  };
}
