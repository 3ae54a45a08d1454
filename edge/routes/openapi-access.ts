import { LEVEL_LABEL, LEVEL_PRIORITY, LEVELS, type Level } from "../../shared/levels";
import type { Access } from "../../shared/permissions";

/**
 * The credentials the API takes, as OpenAPI security schemes. Which one a route accepts comes
 * from its entry in shared/permissions.ts ROUTE_ACCESS, through `securityFor`.
 */
export const SECURITY_SCHEMES = {
  apiKey: {
    type: "apiKey",
    in: "header",
    name: "X-API-Key",
    description: "An API key (`st_` and 43 characters), made with `POST /api/cloud/auth/api-keys`.",
  },
  bearer: { type: "http", scheme: "bearer", description: "The same API key as `Authorization: Bearer st_...`." },
  session: {
    type: "apiKey",
    in: "cookie",
    name: "st_session",
    description:
      "The session cookie set by `POST /api/cloud/auth/login`: `st_session` over plain HTTP, `__Host-st_session` (Secure) over HTTPS.",
  },
  workerToken: {
    type: "http",
    scheme: "bearer",
    description: "A worker token (`stw_...`) an admin made with `POST /api/admin/workers`, for a runner on a GPU box.",
  },
  metricsScrapeToken: {
    type: "http",
    scheme: "bearer",
    description: "The `METRICS_SCRAPE_TOKEN` value: reads the Prometheus scrape and nothing else.",
  },
  sigv4: {
    type: "apiKey",
    in: "header",
    name: "Authorization",
    description:
      "AWS Signature Version 4 with a job's storage credentials (header or presigned query), for the S3-compatible storage endpoint.",
  },
} as const;

type SchemeName = keyof typeof SECURITY_SCHEMES;
type Requirement = Partial<Record<SchemeName, string[]>>;

const USER: Requirement[] = [{ apiKey: [] }, { bearer: [] }, { session: [] }];

/**
 * The OpenAPI `security` of a route with this access: `[]` for a public route, else the schemes
 * any one of which is enough.
 *
 * @example
 * securityFor({ level: "viewer", session: true }); // [{ session: [] }]
 */
export function securityFor(access: Access): Requirement[] {
  if (access === "public") return [];
  if (access === "worker") return [{ workerToken: [] }];
  if (access === "storage") return [{ sigv4: [] }, ...USER];
  if (access.session) return [{ session: [] }];
  return access.scrapeToken ? [...USER, { metricsScrapeToken: [] }] : USER;
}

const levelWords = (level: Level) => (level === "viewer" ? "any user, viewer or above" : level === "admin" ? "admin" : `${level} or above`);

/**
 * The one line that says who may call a route, as each operation's description ends.
 *
 * @example
 * accessLine({ level: "researcher" }); // "Access: researcher or above (session or API key)."
 */
export function accessLine(access: Access): string {
  if (access === "public") return "Access: public (no credential).";
  if (access === "worker") return "Access: a worker token (`Authorization: Bearer stw_...`); user credentials are refused.";
  if (access === "storage") return "Access: a job's SigV4 signature, or a session or API key for reads (checked by the endpoint itself).";
  if (access.session) return `Access: ${levelWords(access.level)}, with a session cookie only (an API key cannot mint credentials).`;
  if (access.scrapeToken) return `Access: ${levelWords(access.level)} (session or API key), or the metrics scrape token.`;
  return `Access: ${levelWords(access.level)} (session or API key).`;
}

const code = (route: string) => `\`${route}\``;

/**
 * The table of who may call what, generated from the route declarations: one row per level
 * (what it adds to the levels below it) and one per credential that is not a user's.
 */
export function levelsTable(routeAccess: Record<string, Access>): string {
  const entries = Object.entries(routeAccess);
  const routesWhere = (test: (access: Access) => boolean) =>
    entries
      .filter(([, access]) => test(access))
      .map(([route, access]) => code(route) + (typeof access === "object" && access.session ? " (session cookie only)" : ""))
      .join(", ") || "-";
  const rows = [
    `| public (no credential) | - | ${routesWhere((a) => a === "public")} |`,
    ...[...LEVELS]
      .reverse()
      .map(
        (level) =>
          `| ${level} | ${LEVEL_PRIORITY[level]} (${LEVEL_LABEL[level]}) | ${routesWhere((a) => typeof a === "object" && a.level === level)} |`,
      ),
    `| metrics scrape token | - | ${routesWhere((a) => typeof a === "object" && a.scrapeToken === true)} |`,
    `| worker token (a runner) | - | ${routesWhere((a) => a === "worker")} |`,
    `| SigV4 or a session / API key (the storage endpoint checks) | - | ${routesWhere((a) => a === "storage")} |`,
  ];
  return ["| Who | Queue priority | May call (a level: also what the rows above it may) |", "| --- | --- | --- |", ...rows].join("\n");
}

/** An OpenAPI document as far as this module reads and writes it. */
export interface OpenApiDocument {
  paths?: Record<string, Record<string, { description?: string; security?: unknown; "x-access"?: Access } & Record<string, unknown>>>;
  components?: { securitySchemes?: Record<string, unknown> } & Record<string, unknown>;
  [key: string]: unknown;
}

/**
 * Writes each operation's access into the document: `x-access` (the declaration itself),
 * `security`, and the access line at the end of its description; and the security schemes.
 * An operation the declarations do not name is an error here, as it is for the middleware.
 *
 * @example
 * withAccess(app.getOpenAPI31Document(config), ROUTE_ACCESS);
 */
export function withAccess<T extends OpenApiDocument>(doc: T, routeAccess: Record<string, Access>): T {
  for (const [path, operations] of Object.entries(doc.paths ?? {})) {
    for (const [method, operation] of Object.entries(operations)) {
      const route = `${method.toUpperCase()} ${path}`;
      const access = Object.hasOwn(routeAccess, route) ? routeAccess[route] : undefined;
      if (access === undefined) throw new Error(`${route} is documented but declares no access in shared/permissions.ts`);
      operation["x-access"] = access;
      operation.security = securityFor(access);
      operation.description = [operation.description?.trim(), accessLine(access)].filter(Boolean).join("\n\n");
    }
  }
  doc.components = { ...doc.components, securitySchemes: { ...SECURITY_SCHEMES } };
  return doc;
}
