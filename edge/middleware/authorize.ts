import type { Context, MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import { findTargetHandler, isMiddleware } from "hono/utils/handler";
import { levelAtLeast } from "../../shared/levels";
import { accessFor } from "../../shared/permissions";
import type { AppEnv, Principal } from "../app-env";
import { findApiKeyUser } from "../auth/api-keys";
import { constantTimeEqual } from "../auth/crypto";
import { findSessionUser } from "../auth/sessions";
import { readSessionCookie } from "../auth/session-cookie";
import { ApiError } from "../errors";
import { countWorkerTokenFailure } from "./failure-limits";
import { findWorkerByToken } from "../workers/workers";

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** `/api/x/:job_id{[0-9]+}` -> `/api/x/{job_id}`: the form used by the access table and OpenAPI. */
export function toOpenApiPath(honoPath: string): string {
  return honoPath.replace(/:([A-Za-z0-9_]+)(\{[^}]*\})?/g, "{$1}");
}

/** The pattern of the route (not middleware) this request matched, or null for a 404. */
export function routePattern(c: Context): string | null {
  const route = matchedRoutes(c).findLast((r) => r.method !== "ALL");
  return route ? toOpenApiPath(route.path) : null;
}

/**
 * The route (not middleware) this request matched, as the access table names it: the route's
 * own method (`ALL` for an `.all()` route) and its pattern; null for a 404.
 *
 * @example
 * matchedRoute(c); // { method: "ALL", pattern: "/api/cloud/storage/*" }
 */
export function matchedRoute(c: Context): { method: string; pattern: string } | null {
  const route = matchedRoutes(c).findLast((r) => r.method !== "ALL" || !isMiddleware(findTargetHandler(r.handler)));
  return route ? { method: route.method, pattern: toOpenApiPath(route.path) } : null;
}

/** The caller of a request by API key or session cookie (null: neither sent); a wrong key throws 401. */
export async function identify(c: Context<AppEnv>): Promise<Principal | null> {
  const db = c.get("db");
  const bearer = /^Bearer\s+(\S+)$/i.exec(c.req.header("authorization") ?? "")?.[1];
  const key = c.req.header("x-api-key") ?? bearer;
  if (key !== undefined) {
    const found = await findApiKeyUser(db, key);
    // A wrong key is refused outright rather than falling back to a cookie: the caller meant it.
    if (!found)
      throw new ApiError(401, "invalid_api_key", "The API key is invalid, expired or revoked", undefined, { "WWW-Authenticate": "Bearer" });
    c.executionCtx.waitUntil(
      found.touch().catch((error: unknown) => c.get("log").warning("could not record API key use", { error: String(error) })),
    );
    return { user: found.user, via: "api_key", apiKeyId: found.keyId };
  }
  const token = readSessionCookie(c);
  if (token) {
    const found = await findSessionUser(db, token);
    if (found) return { user: found.user, via: "session", sessionTokenHash: found.tokenHash };
  }
  return null;
}

// Prometheus scrapes with a dedicated token rather than a user's key: it can read metrics and
// nothing else. Any other bearer falls through to the usual API key check.
function presentsScrapeToken(c: Context<AppEnv>): boolean {
  const expected = c.get("config").metricsScrapeToken;
  const bearer = /^Bearer\s+(\S+)$/i.exec(c.req.header("authorization") ?? "")?.[1];
  return expected !== undefined && bearer !== undefined && constantTimeEqual(bearer, expected);
}

// A browser sends Origin on cross-site POSTs (and Sec-Fetch-Site on all); a cookie-carrying
// request from another site is refused. Non-browser clients send neither and are not at risk.
function isCrossSite(c: Context<AppEnv>): boolean {
  const origin = c.req.header("origin");
  if (origin) {
    const allowed = [new URL(c.req.url).origin, c.get("config").publicUrl?.origin];
    return !allowed.includes(origin);
  }
  return c.req.header("sec-fetch-site") === "cross-site";
}

/**
 * The one authorisation middleware: finds the route's rule in shared/permissions.ts, identifies
 * the caller by API key (X-API-Key or Authorization: Bearer) or session cookie (or, where the rule
 * allows it, the metrics scrape token), and answers 401
 * (no or bad credential), 403 (level too low, API key where a session is required, or a
 * cross-site cookie request) before any handler runs. A matched route the table does not name is
 * refused with 500 `route_access_undeclared` (fails closed); "storage" routes authenticate
 * themselves.
 */
export function authorize(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const route = matchedRoute(c);
    if (route === null) return next();
    const method = c.req.method === "HEAD" ? "GET" : c.req.method;
    const access = accessFor(route.method, route.pattern);
    if (access === undefined) {
      // Fails closed: a route nobody declared is a bug, and guessing its level would hide it.
      c.get("log").error("route without a declared access refused", { route: `${route.method} ${route.pattern}` });
      throw new ApiError(
        500,
        "route_access_undeclared",
        `${route.method} ${route.pattern} declares no access in shared/permissions.ts, so it is refused`,
      );
    }
    if (access === "public" || access === "storage") return next();
    if (access === "worker") {
      const token = /^Bearer\s+(\S+)$/i.exec(c.req.header("authorization") ?? "")?.[1];
      if (!token)
        throw new ApiError(401, "unauthenticated", "A worker token is required: Authorization: Bearer stw_...", undefined, {
          "WWW-Authenticate": "Bearer",
        });
      const worker = await findWorkerByToken(c.get("db"), token);
      if (!worker) {
        await countWorkerTokenFailure(c); // 429 instead, past the address's failure limit
        throw new ApiError(401, "invalid_worker_token", "The worker token is invalid or its worker was removed", undefined, {
          "WWW-Authenticate": "Bearer",
        });
      }
      c.set("worker", worker);
      return next();
    }
    if (access.scrapeToken && presentsScrapeToken(c)) return next();

    const principal = await identify(c);
    if (!principal) {
      throw new ApiError(
        401,
        "unauthenticated",
        "Authentication required: send an API key (X-API-Key or Authorization: Bearer) or log in",
        undefined,
        {
          "WWW-Authenticate": "Bearer",
        },
      );
    }
    if (principal.via === "session" && !SAFE_METHODS.has(method) && isCrossSite(c)) {
      throw new ApiError(
        403,
        "csrf_rejected",
        "Cross-site request refused: session-authenticated changes must come from this service's own pages",
      );
    }
    if (access.session && principal.via !== "session") {
      throw new ApiError(403, "session_required", "This needs a logged-in session; an API key cannot be used here");
    }
    if (!levelAtLeast(principal.user.level, access.level)) {
      throw new ApiError(
        403,
        "forbidden",
        `This needs the ${access.level} level or higher; you are ${principal.user.level ?? "without a level"}`,
      );
    }
    c.set("principal", principal);
    return next();
  };
}

/** The runner inside a handler of a worker-token route. */
export function workerOf(c: Context<AppEnv>) {
  const worker = c.get("worker");
  if (!worker) throw new ApiError(500, "internal", "worker route reached without a worker");
  return worker;
}

/** The authenticated caller inside a handler whose route is not public. */
export function principalOf(c: Context<AppEnv>): Principal {
  const principal = c.get("principal");
  if (!principal) throw new ApiError(500, "internal", "route reached without an authenticated principal");
  return principal;
}
