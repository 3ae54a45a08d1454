import { ApiKeyCreate, ApiKeyCreated, FirstAdminRequest, LoginRequest, Ok, SessionInfo, SetupStatus } from "../schemas/auth";
import { CloudJob, CloudSubmit, CloudSubmitAnswer } from "../schemas/cloud";
import { EventPage, EventsQuery, StreamQuery } from "../schemas/events";
import {
  JobActionResult,
  RetryResult,
  JobIdParam,
  LocalSubmit,
  LocalSubmitResult,
  MyQueue,
  Position,
  QueueJob,
  QueueList,
  QueueListQuery,
  QueueStats,
} from "../schemas/queue";
import { JobRef, TrainingCommandAnswer, TrainingStatus, TrainingStatusQuery } from "../schemas/training";
import { Me } from "../schemas/users";
import { endpoint } from "./endpoint";
import { adminEndpoints } from "./endpoints-admin";
import { datasetEndpoints } from "./endpoints-datasets";
import { notificationEndpoints } from "./endpoints-notifications";
import { queueEndpoints } from "./endpoints-queue";
import { settingsEndpoints } from "./endpoints-settings";
import { trainingEndpoints } from "./endpoints-training";
import { runEndpoints } from "./endpoints-runs";
import { workerEndpoints } from "./endpoints-workers";

/**
 * The operations the CLI, the runner and the dashboard call, each with its route's own schemas.
 * Add an operation here (with the schemas its route uses) before calling it from a client.
 */
export const endpoints = {
  // ---- users and credentials
  me: endpoint({ method: "GET", path: "/api/users/me", response: Me }),
  setupStatus: endpoint({ method: "GET", path: "/api/cloud/auth/setup/status", response: SetupStatus }),
  firstAdmin: endpoint({ method: "POST", path: "/api/cloud/auth/setup/first-admin", body: FirstAdminRequest, response: SessionInfo }),
  login: endpoint({ method: "POST", path: "/api/cloud/auth/login", body: LoginRequest, response: SessionInfo }),
  logout: endpoint({ method: "POST", path: "/api/cloud/auth/logout", response: Ok }),
  createApiKey: endpoint({ method: "POST", path: "/api/cloud/auth/api-keys", body: ApiKeyCreate, response: ApiKeyCreated }),

  // ---- the queue
  queueSubmit: endpoint({ method: "POST", path: "/api/queue/submit", body: LocalSubmit, response: LocalSubmitResult }),
  queueList: endpoint({ method: "GET", path: "/api/queue", query: QueueListQuery, response: QueueList }),
  queueJob: endpoint({ method: "GET", path: "/api/queue/jobs/{job_id}", params: JobIdParam, response: QueueJob }),
  queueMe: endpoint({ method: "GET", path: "/api/queue/me", response: MyQueue }),
  queueStats: endpoint({ method: "GET", path: "/api/queue/stats", response: QueueStats }),
  queuePosition: endpoint({ method: "GET", path: "/api/queue/position/{job_id}", params: JobIdParam, response: Position }),
  queueCancel: endpoint({ method: "POST", path: "/api/queue/{job_id}/cancel", params: JobIdParam, response: JobActionResult }),
  queueRetry: endpoint({ method: "POST", path: "/api/queue/{job_id}/retry", params: JobIdParam, response: RetryResult }),

  // ---- training
  trainingStatus: endpoint({ method: "GET", path: "/api/training/status", query: TrainingStatusQuery, response: TrainingStatus }),
  trainingCancel: endpoint({ method: "POST", path: "/api/training/cancel", body: JobRef, response: TrainingCommandAnswer }),
  trainingEvents: endpoint({ method: "GET", path: "/api/training/events", query: EventsQuery, response: EventPage }),
  /** Server-sent events (read with shared/client/event-stream.ts), or a WebSocket. */
  trainingEventStream: endpoint({ method: "GET", path: "/api/training/events/stream", query: StreamQuery, response: "raw" }),

  // ---- cloud
  cloudSubmit: endpoint({ method: "POST", path: "/api/cloud/jobs/submit", body: CloudSubmit, response: CloudSubmitAnswer }),
  cloudJob: endpoint({ method: "GET", path: "/api/cloud/jobs/{job_id}", params: JobIdParam, response: CloudJob }),
  cloudCancel: endpoint({ method: "POST", path: "/api/cloud/jobs/{job_id}/cancel", params: JobIdParam, response: CloudJob }),

  // ---- a runner's calls (worker token)
  ...workerEndpoints,
  // ---- more, by area (the dashboard's): queue administration, training control, administration, settings
  ...queueEndpoints,
  ...trainingEndpoints,
  ...runEndpoints,
  ...adminEndpoints,
  ...settingsEndpoints,
  ...datasetEndpoints,
  ...notificationEndpoints,
} as const;

export type Endpoints = typeof endpoints;
