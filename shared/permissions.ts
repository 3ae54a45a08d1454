import type { Level } from "./levels";

/**
 * Who may call what. The authorisation middleware looks every request up here by
 * `METHOD /route/{pattern}` (`ALL /pattern` for a route that takes every method); a route
 * missing from the table is refused (`route_access_undeclared`), and a test fails when the app
 * serves a route this table does not name.
 *
 * - "public": no credential needed.
 * - { level }: a session or API key of a user holding at least that level.
 * - { level, session: true }: as above, but only through a session cookie (an API key cannot
 *   mint further credentials).
 * - "worker": a worker token (`Authorization: Bearer stw_...`), for the runner on a GPU box;
 *   user credentials are refused there.
 * - { level, scrapeToken: true }: as { level }, or the metrics scrape token
 *   (`Authorization: Bearer <METRICS_SCRAPE_TOKEN>`), so Prometheus needs no user's key.
 * - "storage": the route authenticates each request itself (the S3-compatible storage endpoint:
 *   a job's SigV4 signature, or a user's session or API key for reads), so the middleware hands
 *   it every request.
 */
export type Access = "public" | "worker" | "storage" | { level: Level; session?: true; scrapeToken?: true };

export const ROUTE_ACCESS: Record<string, Access> = {
  "GET /api/cloud/health": "public",
  "GET /api/cloud/health/live": "public",
  "GET /api/cloud/health/ready": "public",
  "GET /openapi.json": "public",
  "GET /docs": "public",
  "GET /redoc": "public",
  "GET /": "public",
  "GET /ui/{file}": "public",
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
  "GET /api/users/me/notifications": { level: "viewer" },
  "PUT /api/users/me/notifications": { level: "viewer" },
  "GET /api/users/me/notifications/deliveries": { level: "viewer" },
  "GET /api/admin/notifications/smtp": { level: "admin" },
  "PUT /api/admin/notifications/smtp": { level: "admin" },
  "POST /api/admin/notifications/smtp/test": { level: "admin" },
  // The link's signed token is the credential: it decides its own job once, as its admin.
  "GET /api/notifications/approval/{token}": "public",
  "POST /api/notifications/approval/{token}": "public",
  "GET /api/users": { level: "admin" },
  "POST /api/users": { level: "admin" },
  "GET /api/users/{user_id}/stall-policy": { level: "viewer" },
  "PUT /api/users/{user_id}/stall-policy": { level: "viewer" },

  "POST /api/configs/environments": { level: "researcher" },
  "GET /api/configs/": { level: "viewer" },
  "GET /api/configs": { level: "viewer" },
  "GET /api/configs/examples": { level: "viewer" },
  "GET /api/configs/{name}": { level: "viewer" },
  "PUT /api/configs/{name}": { level: "researcher" },
  "DELETE /api/configs/{name}": { level: "researcher" },
  "POST /api/configs/{name}/activate": { level: "researcher" },
  "POST /api/configs/{name}/dataloader": { level: "researcher" },
  "GET /api/configs/{name}/export": { level: "viewer" },

  "GET /api/queue": { level: "viewer" },
  "GET /api/queue/stats": { level: "viewer" },
  "GET /api/queue/me": { level: "viewer" },
  "GET /api/queue/history": { level: "viewer" },
  "GET /api/queue/changes": { level: "viewer" },
  "GET /api/queue/position/{job_id}": { level: "viewer" },
  "GET /api/queue/jobs/{job_id}": { level: "viewer" },
  "POST /api/queue/submit": { level: "researcher" },
  "POST /api/queue/{job_id}/cancel": { level: "researcher" },
  "POST /api/queue/{job_id}/retry": { level: "researcher" },
  "POST /api/queue/{job_id}/priority": { level: "lead" },
  "POST /api/queue/{job_id}/approve": { level: "admin" },
  "POST /api/queue/{job_id}/reject": { level: "admin" },
  "GET /api/queue/concurrency": { level: "viewer" },
  "POST /api/queue/concurrency": { level: "admin" },
  "GET /api/queue/approval-rules": { level: "viewer" },
  "PUT /api/queue/approval-rules": { level: "admin" },
  "POST /api/queue/process": { level: "admin" },
  "POST /api/queue/cleanup": { level: "admin" },
  "GET /api/system/status": { level: "viewer" },
  "GET /api/system/workers": { level: "viewer" },
  "GET /api/system/workers/{id}/gpus/{index}/health": { level: "viewer" },
  "POST /api/system/workers/{id}/gpus/{index}/clear": { level: "admin" },

  "GET /api/admin/workers": { level: "admin" },
  "POST /api/admin/workers": { level: "admin" },
  "DELETE /api/admin/workers/{id}": { level: "admin" },
  "POST /api/admin/workers/{id}/token": { level: "admin" },
  "POST /api/workers/register": "worker",
  "POST /api/workers/heartbeat": "worker",
  "POST /api/workers/jobs/{job_id}/finish": "worker",
  "POST /api/workers/jobs/{job_id}/events": "worker",
  "POST /api/workers/jobs/{job_id}/storage-credentials": "worker",
  "GET /api/workers/channel": "worker",
  "GET /api/workers/datasets/manifest": "worker",
  "GET /api/workers/datasets/file": "worker",
  "GET /api/training/events": { level: "viewer" },
  "GET /api/training/events/stream": { level: "viewer" },
  "GET /api/training/status": { level: "viewer" },
  "GET /api/training/webhooks": { level: "viewer" },
  "GET /api/training/config": { level: "viewer" },
  "GET /api/runs": { level: "viewer" },
  "GET /api/runs/{job_id}": { level: "viewer" },
  "GET /api/runs/{job_id}/series": { level: "viewer" },
  "GET /api/runs/{job_id}/validations": { level: "viewer" },
  "GET /api/runs/{job_id}/images/{n}": { level: "viewer" },
  "GET /api/training/options": { level: "viewer" },
  "GET /api/datasets": { level: "viewer" },
  "GET /api/datasets/file": { level: "viewer" },
  "GET /api/datasets/usage": { level: "viewer" },
  "POST /api/datasets/folders": { level: "researcher" },
  "POST /api/datasets/upload": { level: "researcher" },
  "POST /api/datasets/upload/zip": { level: "researcher" },
  "DELETE /api/datasets": { level: "researcher" },
  "GET /api/datasets/folders/{name}/cloud-sharing": { level: "viewer" },
  "PUT /api/datasets/folders/{name}/cloud-sharing": { level: "researcher" },
  "GET /api/admin/webhooks": { level: "admin" },
  "PUT /api/admin/webhooks": { level: "admin" },
  "POST /api/training/checkpoints": { level: "viewer" },
  "POST /api/training/stop": { level: "researcher" },
  "POST /api/training/validate": { level: "researcher" },
  "POST /api/training/start": { level: "researcher" },
  "POST /api/training/cancel": { level: "researcher" },
  "POST /api/training/validation/run": { level: "researcher" },
  "POST /api/training/checkpoint/run": { level: "researcher" },

  "POST /api/cloud/jobs/submit": { level: "researcher" },
  "GET /api/cloud/jobs/{job_id}": { level: "viewer" },
  "POST /api/cloud/jobs/{job_id}/cancel": { level: "researcher" },
  "POST /api/cloud/jobs/{job_id}/resume": { level: "researcher" },
  "GET /api/cloud/settings": { level: "viewer" },
  "PUT /api/cloud/settings": { level: "admin" },
  "GET /api/cloud/rates": { level: "viewer" },
  "PUT /api/cloud/rates": { level: "admin" },
  "GET /api/cloud/providers": "public",
  "GET /api/cloud/providers/{provider}": { level: "admin" },
  "PUT /api/cloud/providers/{provider}": { level: "admin" },
  "GET /api/cloud/providers/{provider}/webhooks": { level: "admin" },
  "POST /api/webhooks/{provider}": "public",
  "GET /api/audit": { level: "admin" },
  "GET /api/audit/verify": { level: "admin" },
  "POST /api/queue/{job_id}/storage-credentials": { level: "researcher" },
  "GET /api/admin/storage-quota": { level: "admin" },
  "GET /api/cost": { level: "researcher" },
  "GET /api/admin/gpu-prices": { level: "admin" },
  "PUT /api/admin/gpu-prices": { level: "admin" },
  "GET /api/admin/budgets": { level: "admin" },
  "PUT /api/admin/budgets": { level: "admin" },
  "PUT /api/admin/storage-quota": { level: "admin" },
  "GET /api/admin/event-limits": { level: "admin" },
  "PUT /api/admin/event-limits": { level: "admin" },
  "GET /api/admin/stall-detection": { level: "admin" },
  "PUT /api/admin/stall-detection": { level: "admin" },
  "GET /api/admin/dataset-quota": { level: "admin" },
  "PUT /api/admin/dataset-quota": { level: "admin" },

  "GET /api/cloud/metrics/prometheus": { level: "admin", scrapeToken: true },
  "GET /api/cloud/metrics/config": { level: "admin" },
  "PUT /api/cloud/metrics/config": { level: "admin" },
  "POST /api/cloud/metrics/config/templates/{template}": { level: "admin" },
  "GET /api/cloud/metrics/config/preview": { level: "admin" },

  "ALL /api/cloud/storage": "storage",
  "ALL /api/cloud/storage/*": "storage",
};

/**
 * The access rule for a route, or undefined when the table does not name it (the caller refuses
 * the request: a route nobody declared is a bug, not an admin route).
 *
 * @example
 * accessFor("GET", "/api/queue"); // { level: "viewer" }
 */
export function accessFor(method: string, pattern: string): Access | undefined {
  return Object.hasOwn(ROUTE_ACCESS, `${method.toUpperCase()} ${pattern}`) ? ROUTE_ACCESS[`${method.toUpperCase()} ${pattern}`] : undefined;
}
