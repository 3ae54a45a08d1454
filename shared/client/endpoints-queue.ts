import {
  ConfigListQuery,
  DataloaderRegenerated,
  Environment,
  EnvironmentActivated,
  EnvironmentCreate,
  EnvironmentDeleted,
  EnvironmentExport,
  EnvironmentUpdate,
  EnvironmentList,
  EnvironmentParams,
  EnvironmentReadQuery,
  ExampleList,
} from "../schemas/environments";
import { OptionCatalogue } from "../schemas/option-catalogue";
import { TrainingForm, ValidationResult } from "../schemas/training";
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
  configUpdate: endpoint({
    method: "PUT",
    path: "/api/configs/{name}",
    params: EnvironmentParams,
    body: EnvironmentUpdate,
    response: Environment,
  }),
  configDelete: endpoint({ method: "DELETE", path: "/api/configs/{name}", params: EnvironmentParams, response: EnvironmentDeleted }),
  configActivate: endpoint({
    method: "POST",
    path: "/api/configs/{name}/activate",
    params: EnvironmentParams,
    response: EnvironmentActivated,
  }),
  configDataloader: endpoint({
    method: "POST",
    path: "/api/configs/{name}/dataloader",
    params: EnvironmentParams,
    response: DataloaderRegenerated,
  }),
  /** The environment as `<name>.json` serves it (an attachment). */
  configExport: endpoint({
    method: "GET",
    path: "/api/configs/{name}/export",
    params: EnvironmentParams,
    query: EnvironmentReadQuery,
    response: EnvironmentExport,
  }),
  /** The training options the service knows (types, defaults, allowed values, help), for the environment form and the CLI. */
  trainingOptions: endpoint({ method: "GET", path: "/api/training/options", response: OptionCatalogue }),
  /** A whole configuration checked field by field as a training form (JSON body: the options); nothing is saved. */
  trainingValidate: endpoint({ method: "POST", path: "/api/training/validate", body: TrainingForm, response: ValidationResult }),
} as const;
