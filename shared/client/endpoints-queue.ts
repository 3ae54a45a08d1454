import {
  ConfigListQuery,
  Environment,
  EnvironmentCreate,
  EnvironmentList,
  EnvironmentParams,
  EnvironmentReadQuery,
  ExampleList,
} from "../schemas/environments";
import { JobActionResult, JobIdParam, PriorityUpdate, QueueHistory, QueueHistoryQuery, RejectQuery } from "../schemas/queue";
import { endpoint } from "./endpoint";

/** Queue operations beyond submit/list/cancel: approvals, priorities, limits, history. Part of `endpoints` (./endpoints.ts); each with its route's own schemas. */
export const queueEndpoints = {
  queueApprove: endpoint({ method: "POST", path: "/api/queue/{job_id}/approve", params: JobIdParam, response: JobActionResult }),
  queueReject: endpoint({
    method: "POST",
    path: "/api/queue/{job_id}/reject",
    params: JobIdParam,
    query: RejectQuery,
    response: JobActionResult,
  }),
  queuePriority: endpoint({
    method: "POST",
    path: "/api/queue/{job_id}/priority",
    params: JobIdParam,
    body: PriorityUpdate,
    response: JobActionResult,
  }),
  /** Server-sent events: `ready`, then `change` {jobs: [{job_id, from, to}], at} (open with EventSource at client.url(...)). */
  queueChanges: endpoint({ method: "GET", path: "/api/queue/changes", response: "raw" }),
  queueHistory: endpoint({ method: "GET", path: "/api/queue/history", query: QueueHistoryQuery, response: QueueHistory }),
  // The environments a submission can name.
  configList: endpoint({ method: "GET", path: "/api/configs", query: ConfigListQuery, response: EnvironmentList }),
  configGet: endpoint({
    method: "GET",
    path: "/api/configs/{name}",
    params: EnvironmentParams,
    query: EnvironmentReadQuery,
    response: Environment,
  }),
  configExamples: endpoint({ method: "GET", path: "/api/configs/examples", response: ExampleList }),
  configCreate: endpoint({ method: "POST", path: "/api/configs/environments", body: EnvironmentCreate, response: Environment }),
} as const;
