import { ApiKey, ApiKeyIdParam, ApiKeyList, RegistrationSetting } from "../schemas/auth";
import {
  GpuCleared,
  GpuHealthHistory,
  GpuHealthQuery,
  GpuParam,
  SystemStatus,
  SystemStatusQuery,
  SystemWorkerList,
} from "../schemas/system";
import { User, UserCreate, UserList } from "../schemas/users";
import { WorkerCreate, WorkerCreated, WorkerIdParam, WorkerList, WorkerRemoved } from "../schemas/workers";
import { endpoint } from "./endpoint";

/** Administration: users, API keys, workers and the system view. Part of `endpoints` (./endpoints.ts); each with its route's own schemas. */
export const adminEndpoints = {
  // ---- GPUs and workers, as every user sees them
  systemStatus: endpoint({ method: "GET", path: "/api/system/status", query: SystemStatusQuery, response: SystemStatus }),
  systemWorkers: endpoint({ method: "GET", path: "/api/system/workers", response: SystemWorkerList }),
  gpuHealth: endpoint({
    method: "GET",
    path: "/api/system/workers/{id}/gpus/{index}/health",
    params: GpuParam,
    query: GpuHealthQuery,
    response: GpuHealthHistory,
  }),
  gpuClear: endpoint({ method: "POST", path: "/api/system/workers/{id}/gpus/{index}/clear", params: GpuParam, response: GpuCleared }),

  // ---- workers and their tokens (admin)
  workerList: endpoint({ method: "GET", path: "/api/admin/workers", response: WorkerList }),
  workerCreate: endpoint({ method: "POST", path: "/api/admin/workers", body: WorkerCreate, response: WorkerCreated }),
  workerRotateToken: endpoint({ method: "POST", path: "/api/admin/workers/{id}/token", params: WorkerIdParam, response: WorkerCreated }),
  workerDelete: endpoint({ method: "DELETE", path: "/api/admin/workers/{id}", params: WorkerIdParam, response: WorkerRemoved }),

  // ---- users and registration (admin)
  userList: endpoint({ method: "GET", path: "/api/users", response: UserList }),
  userCreate: endpoint({ method: "POST", path: "/api/users", body: UserCreate, response: User }),
  registrationSet: endpoint({
    method: "PUT",
    path: "/api/cloud/auth/registration",
    body: RegistrationSetting,
    response: RegistrationSetting,
  }),

  // ---- the caller's API keys (creating one is endpoints.createApiKey)
  apiKeyList: endpoint({ method: "GET", path: "/api/cloud/auth/api-keys", response: ApiKeyList }),
  apiKeyRevoke: endpoint({ method: "DELETE", path: "/api/cloud/auth/api-keys/{key_id}", params: ApiKeyIdParam, response: ApiKey }),
} as const;
