import type { Level } from "./levels";

/**
 * Who may call what. The authorisation middleware looks every request up here by
 * `METHOD /route/{pattern}`; a route missing from the table is treated as admin-only, and a
 * test fails when the app serves a route this table does not name.
 *
 * - "public": no credential needed.
 * - { level }: a session or API key of a user holding at least that level.
 * - { level, session: true }: as above, but only through a session cookie (an API key cannot
 *   mint further credentials).
 */
export type Access = "public" | { level: Level; session?: true };

export const ROUTE_ACCESS: Record<string, Access> = {
  "GET /api/cloud/health": "public",
  "GET /api/cloud/health/live": "public",
  "GET /api/cloud/health/ready": "public",
  "GET /openapi.json": "public",
  "GET /docs": "public",
  "GET /redoc": "public",
  "GET /docs/assets/{file}": "public",

  "GET /api/cloud/auth/setup/status": "public",
  "POST /api/cloud/auth/setup/first-admin": "public",
  "POST /api/cloud/auth/login": "public",
  "POST /api/cloud/auth/register": "public",
  "POST /api/cloud/auth/logout": { level: "viewer" },
  "PUT /api/cloud/auth/registration": { level: "admin" },
  "POST /api/cloud/auth/api-keys": { level: "viewer", session: true },
  "GET /api/cloud/auth/api-keys": { level: "viewer" },
  "DELETE /api/cloud/auth/api-keys/{key_id}": { level: "viewer" },

  "GET /api/users/me": { level: "viewer" },
  "GET /api/users": { level: "admin" },
  "POST /api/users": { level: "admin" },
};

/** The access rule for a route, admin-only when the table does not name it. */
export function accessFor(method: string, pattern: string): Access {
  return ROUTE_ACCESS[`${method.toUpperCase()} ${pattern}`] ?? { level: "admin" };
}
