import { createRoute, z } from "@hono/zod-openapi";
import { ownerScope } from "../../shared/levels";
import { JobIdParam } from "../../shared/schemas/queue";
import { identify, principalOf, workerOf } from "../middleware/authorize";
import { createRouter } from "../router";
import { patchSetting } from "./setting-patch";
import { schedulerOf } from "../jobs/objects";
import { getSetting } from "../settings-store";
import { assertJobCanRun, issueStorageCredentials, runnerStorageCredentials, type IssuedCredentials } from "../storage/credentials";
import { StorageCredentials, StorageQuota, StorageQuotaUpdate } from "../../shared/schemas/storage";
import { WorkerJobParam } from "../../shared/schemas/workers";
import type { StorageUser } from "../storage/access";
import { handleStorage, isSigned, STORAGE_PREFIX, storagePattern } from "../storage/endpoint";
import { S3Error, s3CodeForStatus } from "../storage/errors";
import { s3ErrorResponse } from "../storage/xml";
import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env";
import { error, json } from "./openapi";

/** The storage endpoint's credentials for jobs (the S3-compatible API itself: edge/storage). */
export const storageRoutes = createRouter();

/**
 * The storage endpoint's own conventions for the rest of the app, on its paths only: every error
 * (a middleware's refusal, such as a 429 or a 413, included) is S3's XML error, which S3 clients
 * read (a 429 is `SlowDown`, which they back off from), and metrics label its requests by the
 * endpoint's bounded patterns (`/api/cloud/storage/{bucket}/{key}`), never by bucket or key.
 * Registered before anything that can refuse a request.
 *
 * @example
 * app.use("*", storageConventions());
 */
export function storageConventions(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const label = storagePattern(c.req.path);
    if (label === null) return next();
    c.set("routeLabel", label);
    c.set("renderError", ({ status, body, headers }) => {
      const response = s3ErrorResponse(
        new S3Error(s3CodeForStatus(status), body.detail),
        c.req.path,
        c.get("requestId") ?? "",
        c.req.method,
      );
      for (const [name, value] of Object.entries(headers ?? {})) response.headers.set(name, value);
      return response;
    });
    await next();
  };
}

storageRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/queue/{job_id}/storage-credentials",
    tags: ["Storage"],
    summary: "Issue S3 credentials for an active job (its owner, leads and admins)",
    description:
      "A new access key id (the job's upload token) and secret for the storage endpoint, valid only for this job's bucket and only while the job is pending, blocked or running. Not for a job that can never run as configured (more GPUs than the box has, no worker with its labels and GPUs: 409 job_cannot_run). Issuing again replaces the earlier pair. Jobs on local GPUs and remote workers may always have them; a provider's jobs only while that provider's s3_endpoint_enabled is on. endpoint_url uses the provider's s3_public_url, else SERVICE_PUBLIC_URL.",
    request: { params: JobIdParam },
    responses: {
      201: json(StorageCredentials, "Issued; the secret is not shown again"),
      401: error("No valid credential"),
      403: error("Not your job"),
      404: error("No such job"),
      409: error(
        "The job has ended, cannot run as configured (job_cannot_run), or its provider's storage endpoint is off (s3_endpoint_enabled)",
      ),
    },
  }),
  async (c) => {
    const { job_id } = c.req.valid("param");
    const { user } = principalOf(c);
    await assertJobCanRun(c.get("db"), job_id, await schedulerOf(c.env).waitInfo());
    const issued = await issueStorageCredentials(c.get("db"), job_id, ownerScope(user));
    c.get("log").info("storage credentials issued", { job_id, access_key_id: issued.access_key_id, by: user.id });
    return c.json(credentialsAnswer(c, issued), 201);
  },
);

/**
 * Issued credentials as the API answers them. `endpoint_url` is what the job is told to upload
 * to: its provider's s3_public_url, else SERVICE_PUBLIC_URL, else the address this request came
 * to. SigV4 signs the path, so only the origin counts.
 */
function credentialsAnswer(c: Context<AppEnv>, { public_url, ...issued }: IssuedCredentials) {
  const base = public_url ? new URL(public_url).origin : (c.get("config").publicUrl?.origin ?? new URL(c.req.url).origin);
  return { ...issued, endpoint_url: `${base}${STORAGE_PREFIX}`, bucket: issued.job_id, region: "auto" };
}

storageRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/workers/jobs/{job_id}/storage-credentials",
    tags: ["Workers"],
    summary: "A runner fetches the storage credentials of a job it runs, for its trainer (worker token)",
    description:
      "The job's current credentials, or fresh ones when it has none (asking again never revokes a pair a trainer may be using). The runner passes them to the trainer as TRAINER_STORAGE_* environment variables. Only for a job running on this worker.",
    request: { params: WorkerJobParam },
    responses: {
      200: json(StorageCredentials, "The job's credentials"),
      401: error("No valid worker token"),
      404: error("Not a running job of this worker"),
    },
  }),
  async (c) => {
    return c.json(credentialsAnswer(c, await runnerStorageCredentials(c.get("db"), workerOf(c).id, c.req.valid("param").job_id)), 200);
  },
);

storageRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/admin/storage-quota",
    tags: ["Storage"],
    summary: "What one job may keep on the storage endpoint (admin)",
    description: "`max_bytes` (default 50 GiB) and `max_objects` (default 100,000) per job, counted as objects and parts are stored.",
    responses: { 200: json(StorageQuota, "The quota in force"), 401: error("No valid credential"), 403: error("Not an admin") },
  }),
  async (c) => c.json(await getSetting(c.get("db"), "storage_quota"), 200),
);

storageRoutes.openapi(
  createRoute({
    method: "put",
    path: "/api/admin/storage-quota",
    tags: ["Storage"],
    summary: "Set what one job may keep on the storage endpoint (admin)",
    description:
      "Either field or both; the other keeps its value. An upload that would pass it is refused with S3's QuotaExceeded (403) and stores nothing; objects already stored stay.",
    request: { body: { required: true, content: { "application/json": { schema: StorageQuotaUpdate } } } },
    responses: {
      200: json(StorageQuota, "The quota now in force"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      422: error("Not a whole number of bytes or objects"),
    },
  }),
  async (c) => c.json(await patchSetting(c, "storage_quota", c.req.valid("json"), "storage_quota_changed", "storage quota"), 200),
);

// The S3 API itself: authenticated inside by SigV4 with a job's credentials (so not in the
// access table's user levels), answered in S3's XML.
// Users may also read results with their session or API key: their own jobs', or (leads and
// admins) every job's.
const s3 = async (c: Context<AppEnv>) => {
  let user: StorageUser | null = null;
  if (!isSigned(c.req.raw)) {
    const principal = await identify(c).catch(() => null);
    if (principal) user = { username: principal.user.username, ownerId: ownerScope(principal.user) };
  }
  return handleStorage(c.req.raw, c.get("db"), c.env.STORAGE, c.get("requestId"), user);
};
storageRoutes.all(STORAGE_PREFIX, s3);
storageRoutes.all(`${STORAGE_PREFIX}/*`, s3);
