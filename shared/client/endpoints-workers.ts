import { EventBatch, EventBatchStored } from "../schemas/events";
import { StorageCredentials } from "../schemas/storage";
import {
  DatasetManifest,
  DatasetPath,
  HeartbeatAnswer,
  JobFinish,
  JobFinished,
  WorkerHeartbeat,
  WorkerJobParam,
  WorkerRegister,
} from "../schemas/workers";
import { endpoint } from "./endpoint";

/**
 * A runner's calls (worker token). Part of `endpoints` (./endpoints.ts); each with its route's own
 * schemas. The runner imports this table alone, so it builds only these schemas, not every route's
 * (issue 31: the idle runner's memory).
 */
export const workerEndpoints = {
  workerRegister: endpoint({ method: "POST", path: "/api/workers/register", body: WorkerRegister, response: HeartbeatAnswer }),
  workerHeartbeat: endpoint({ method: "POST", path: "/api/workers/heartbeat", body: WorkerHeartbeat, response: HeartbeatAnswer }),
  workerJobFinish: endpoint({
    method: "POST",
    path: "/api/workers/jobs/{job_id}/finish",
    params: WorkerJobParam,
    body: JobFinish,
    response: JobFinished,
  }),
  workerJobEvents: endpoint({
    method: "POST",
    path: "/api/workers/jobs/{job_id}/events",
    params: WorkerJobParam,
    body: EventBatch,
    response: EventBatchStored,
  }),
  workerStorageCredentials: endpoint({
    method: "POST",
    path: "/api/workers/jobs/{job_id}/storage-credentials",
    params: WorkerJobParam,
    response: StorageCredentials,
  }),
  /** The wake-up WebSocket: open it at client.url(...) with client.authHeaders(). */
  workerChannel: endpoint({ method: "GET", path: "/api/workers/channel", response: "raw" }),
  workerDatasetManifest: endpoint({ method: "GET", path: "/api/workers/datasets/manifest", query: DatasetPath, response: DatasetManifest }),
  /** One dataset file's bytes, with X-Content-SHA256. */
  workerDatasetFile: endpoint({ method: "GET", path: "/api/workers/datasets/file", query: DatasetPath, response: "raw" }),
} as const;
