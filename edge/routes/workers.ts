import { createRoute, z } from "@hono/zod-openapi";
import {
  DatasetManifest,
  DatasetPath,
  HeartbeatAnswer,
  JobFinish,
  JobFinished,
  WorkerCreate,
  WorkerCreated,
  WorkerHeartbeat,
  WorkerIdParam,
  WorkerJobParam,
  WorkerList,
  WorkerRegister,
  WorkerRemoved,
} from "../../shared/schemas/workers";
import { auditLater } from "../audit/trail";
import type { AppEnv } from "../app-env";
import { ApiError } from "../errors";
import { principalOf, workerOf } from "../middleware/authorize";
import { createRouter } from "../router";
import { error, json } from "./openapi";
import { schedulerOf, channelOf } from "../jobs/objects";
import { getSetting } from "../settings-store";
import { EventBatch, EventBatchStored } from "../../shared/schemas/events";
import { recordEvents } from "../jobs/record-events";
import { ackCommands, openCommands } from "../jobs/commands";
import { applyEffects } from "../jobs/lifecycle/effects";
import { finishJob } from "../jobs/lifecycle/finish";
import { removeWorker } from "../jobs/lifecycle/remove-worker";
import { effectsOf, notifyContextOf } from "./effects-context";
import { datasetManifest, targetSegments } from "../datasets/datasets";
import { keyOf } from "../datasets/paths";
import { notFound } from "../errors";
import {
  assignmentsOf,
  createWorker,
  heartbeat,
  HEARTBEAT_INTERVAL_SECONDS,
  listWorkers,
  registerWorker,
  rotateWorkerToken,
} from "../workers/workers";
import type { Context } from "hono";
import { checkDatasetPath, datasetsOfAssignedJob } from "../workers/dataset-access";
import { announceQuarantines, quarantinedGpus, recordGpuHealth } from "../workers/gpu-health";

export const workersRoutes = createRouter();

const tags = ["Workers"];

workersRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/admin/workers",
    tags,
    summary: "Create a worker and its token (admin)",
    description: "The token is shown once. Start the runner on the box with it; it registers and heartbeats.",
    request: { body: { required: true, content: { "application/json": { schema: WorkerCreate } } } },
    responses: {
      201: json(WorkerCreated, "Created (status connecting)"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      409: error("Name taken"),
      422: error("Invalid body"),
    },
  }),
  async (c) => {
    const worker = await createWorker(c.get("db"), c.req.valid("json").name);
    c.get("log").info("worker created", { worker_id: worker.id, worker: worker.name, by: principalOf(c).user.id });
    return c.json(worker, 201);
  },
);

workersRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/admin/workers",
    tags,
    summary: "GPU boxes and workers with status and current job (admin)",
    description: "Statuses `connecting`, `IDLE`, `busy`, `draining`, `offline`, with GPUs, labels, last heartbeat and current job.",
    responses: { 200: json(WorkerList, "Workers"), 401: error("No valid credential"), 403: error("Not an admin") },
  }),
  async (c) => c.json({ workers: await listWorkers(c.get("db")) }, 200),
);

// A channel opened with a token that no longer works is closed too; one that cannot be reached is
// left to fail on its runner's next ask, which the token check refuses.
async function disconnectChannel(c: Context<AppEnv>, workerId: number, reason: string): Promise<void> {
  await channelOf(c.env, workerId)
    .disconnect(reason)
    .catch((error: unknown) => c.get("log").warning("worker channel unreachable", { worker_id: workerId, error: String(error) }));
}

workersRoutes.openapi(
  createRoute({
    method: "delete",
    path: "/api/admin/workers/{id}",
    tags,
    summary: "Remove a worker (admin)",
    description:
      "Its token is refused from the next request on and its runner's channel is closed. Its running jobs are handled as when a worker goes silent past the heartbeat timeout: back to the queue with attempt + 1, or failed when no attempts are left.",
    request: { params: WorkerIdParam },
    responses: {
      200: json(WorkerRemoved, "Removed"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      404: error("No such worker"),
      422: error("A bad id"),
    },
  }),
  async (c) => {
    const { id } = c.req.valid("param");
    const removed = await removeWorker(c.get("db"), id);
    const { name, requeued, failed } = removed;
    c.get("log").info("worker removed", { worker_id: id, worker: name, requeued, failed, by: principalOf(c).user.id });
    await applyEffects(effectsOf(c, "worker removed"), removed);
    await disconnectChannel(c, id, "worker removed");
    return c.json({ id, name, requeued, failed }, 200);
  },
);

workersRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/admin/workers/{id}/token",
    tags,
    summary: "Replace a worker's token (admin)",
    description:
      "The new token is shown once, in this answer; the old one is refused from the next request on, and a channel opened with it is closed. Restart the runner with the new one.",
    request: { params: WorkerIdParam },
    responses: {
      201: json(WorkerCreated, "The worker with its new token"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      404: error("No such worker"),
      422: error("A bad id"),
    },
  }),
  async (c) => {
    const { id } = c.req.valid("param");
    const worker = await rotateWorkerToken(c.get("db"), id);
    c.get("log").info("worker token rotated", { worker_id: id, worker: worker.name, by: principalOf(c).user.id });
    auditLater(c, { event_type: "worker_token_rotated", target: `worker:${id}`, details: { name: worker.name } });
    await disconnectChannel(c, id, "worker token replaced");
    return c.json(worker, 201);
  },
);

async function answer(c: Context<AppEnv>, workerId: number, status: z.infer<typeof HeartbeatAnswer>["status"]) {
  const db = c.get("db");
  const [limits, assignments, commands, quarantined] = await Promise.all([
    getSetting(db, "concurrency"),
    assignmentsOf(db, workerId),
    openCommands(db, workerId),
    quarantinedGpus(db, workerId),
  ]);
  return {
    worker_id: workerId,
    status,
    heartbeat_interval_seconds: HEARTBEAT_INTERVAL_SECONDS,
    heartbeat_timeout_seconds: limits.worker_heartbeat_timeout_seconds,
    assignments,
    commands,
    quarantined_gpus: quarantined,
  };
}

workersRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/workers/register",
    tags,
    summary: "A runner registers its box (worker token)",
    description:
      "Inventory (index, uuid, name, memory per GPU), labels and role. role local makes it this service's local GPU box (at most one). Registering again updates the inventory and keeps running jobs.",
    request: { body: { required: true, content: { "application/json": { schema: WorkerRegister } } } },
    responses: {
      200: json(HeartbeatAnswer, "Registered"),
      401: error("No valid worker token"),
      409: error("Another box is the local box"),
      422: error("Invalid body"),
    },
  }),
  async (c) => {
    const worker = await registerWorker(c.get("db"), workerOf(c), c.req.valid("json"));
    c.get("log").info("worker registered", { worker_id: worker.id, worker: worker.name, role: worker.role, gpus: worker.gpu_count });
    await schedulerOf(c.env).pass("worker registered");
    return c.json(await answer(c, worker.id, worker.status), 200);
  },
);

workersRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/workers/heartbeat",
    tags,
    summary: "A runner says it is alive (worker token)",
    description:
      "Send at least every heartbeat_interval_seconds. Silence past heartbeat_timeout_seconds takes the worker offline and its running jobs back to the queue. The answer lists the jobs assigned to this worker. `gpu_health` is stored (one sample per GPU per minute, 24 h) and a GPU with a fatal fault is quarantined in this same request: its jobs go back to the queue (so this answer no longer assigns them), and `quarantined_gpus` lists the GPUs no job may use until an admin clears them.",
    request: { body: { required: true, content: { "application/json": { schema: WorkerHeartbeat } } } },
    responses: {
      200: json(HeartbeatAnswer, "Alive"),
      401: error("No valid worker token"),
      409: error("Not registered yet"),
      422: error("Invalid body"),
    },
  }),
  async (c) => {
    const worker = workerOf(c);
    const body = c.req.valid("json");
    const [{ status, cameBack }] = await Promise.all([
      heartbeat(c.get("db"), worker, body),
      ackCommands(c.get("db"), worker.id, body.acked_commands ?? []),
    ]);
    if (body.gpu_health || body.xid_readable !== undefined) {
      const health = await recordGpuHealth(c.get("db"), worker.id, body.gpu_health ?? [], body.xid_readable, new Date());
      for (const gpu of health.quarantined)
        c.get("log").warning("GPU quarantined", { worker_id: worker.id, worker: worker.name, gpu: gpu.index, reason: gpu.reason });
      if (health.quarantined.length) {
        await applyEffects(effectsOf(c, "GPU quarantined"), health);
        await announceQuarantines(notifyContextOf(c), worker, health);
        if (!health.jobs.length) await schedulerOf(c.env).pass("GPU quarantined");
      }
    }
    if (cameBack || status === "IDLE") await schedulerOf(c.env).pass(cameBack ? "worker back online" : "worker idle");
    return c.json(await answer(c, worker.id, status), 200);
  },
);

workersRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/workers/jobs/{job_id}/finish",
    tags,
    summary: "A runner reports that a job has ended (worker token)",
    description:
      "completed when the trainer exited 0, failed otherwise (with the exit code and the last lines, kept as error_message). Only a running job of this worker changes; its GPUs are released and the queue is processed at once.",
    request: {
      params: WorkerJobParam,
      body: { required: true, content: { "application/json": { schema: JobFinish } } },
    },
    responses: {
      200: json(JobFinished, "Recorded"),
      401: error("No valid worker token"),
      404: error("Not a job of this worker"),
      409: error("The job is not running"),
      422: error("Invalid body"),
    },
  }),
  async (c) => {
    const worker = workerOf(c);
    const { job_id } = c.req.valid("param");
    const report = c.req.valid("json");
    const change = await finishJob(c.get("db"), worker.id, job_id, report);
    c.get("log").info("job finished", { job_id, status: change.status, exit_code: report.exit_code ?? null, worker: worker.name });
    await applyEffects(effectsOf(c, "job finished"), change);
    return c.json({ job_id, status: change.status }, 200);
  },
);

workersRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/workers/jobs/{job_id}/events",
    tags,
    summary: "A runner sends a batch of its trainer's events (worker token)",
    description:
      "Stored in order with the job's next dense indexes; events already stored (same attempt and seq) are skipped, so resending a batch is safe. Past the job's event cap or its owner's quota (GET /api/admin/event-limits) the batch is still answered 200: lifecycle events are stored, the rest counted in `dropped`; do not send them again.",
    request: {
      params: WorkerJobParam,
      body: { required: true, content: { "application/json": { schema: EventBatch } } },
    },
    responses: {
      200: json(EventBatchStored, "Stored, or counted past the job's bounds"),
      401: error("No valid worker token"),
      404: error("Not a job of this worker"),
      413: error("An event is too large"),
      422: error("Invalid body"),
      503: error("The job's log kept changing while the batch was stored (events_busy): send it again"),
    },
  }),
  async (c) => {
    const jobId = c.req.valid("param").job_id;
    const ctx = { env: c.env, db: c.get("db"), log: c.get("log") };
    const { added, nextIndex, dropped } = await recordEvents(ctx, workerOf(c).id, jobId, c.req.valid("json"));
    return c.json({ stored: added, next_index: nextIndex, dropped }, 200);
  },
);

workersRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/workers/channel",
    tags,
    summary: "A runner's wake-up channel: a WebSocket (worker token)",
    description:
      'The runner keeps this WebSocket open; the edge sends the text message `wake` whenever an assignment or a trainer command is waiting for it, and the runner asks for work at once (POST /api/workers/heartbeat). A new trainer command also comes itself, right before its `wake`, as the JSON message `{"commands": [{"id", "job_id", "command"}]}` (the heartbeat answer\'s shape): the runner may hand it over at once, and acknowledges it with its next heartbeat as always. `ping` is answered `pong`. A runner without the channel still gets everything on its regular asks.',
    responses: { 101: { description: "WebSocket" }, 401: error("No valid worker token"), 426: error("Not a WebSocket upgrade") },
  }),
  async (c) => {
    if (c.req.header("upgrade")?.toLowerCase() !== "websocket")
      throw new ApiError(426, "upgrade_required", "This is a WebSocket endpoint: connect with Upgrade: websocket");
    return (await channelOf(c.env, workerOf(c).id).fetch(c.req.raw)) as never;
  },
);

const stripRoot = (path: string) => path.replace(/^datasets\//, "");

workersRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/workers/datasets/manifest",
    tags,
    summary: "Every file of a job's dataset with its size and SHA-256, for the runner's cache (worker token)",
    description:
      "Only for a job running on this worker whose dataloader names the dataset: another worker's job is 404, another dataset 403 `dataset_not_in_job`. The runner keeps a cached file whose SHA-256 matches and fetches the rest.",
    request: { query: DatasetPath },
    responses: {
      200: json(DatasetManifest, "Manifest (empty when there is no such dataset)"),
      401: error("No valid worker token"),
      403: error("The job's dataloader does not name this dataset"),
      404: error("Not a running job of this worker"),
      422: error("A bad path"),
    },
  }),
  async (c) => {
    const { job_id, path } = c.req.valid("query");
    const segments = targetSegments("path", stripRoot(path), false);
    checkDatasetPath(await datasetsOfAssignedJob(c.get("db"), workerOf(c).id, job_id), segments, true);
    return c.json(await datasetManifest(c.env.STORAGE, segments.join("/")), 200);
  },
);

workersRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/workers/datasets/file",
    tags,
    summary: "One file of a job's dataset (worker token)",
    description: "Streamed from R2. The same checks as the manifest: a job running on this worker whose dataloader names the dataset.",
    request: { query: DatasetPath },
    responses: {
      200: { description: "The file; X-Content-SHA256 carries its hash" },
      401: error("No valid worker token"),
      403: error("Not a file of a dataset the job's dataloader names"),
      404: error("No such file, or not a running job of this worker"),
      422: error("A bad path"),
    },
  }),
  async (c) => {
    const { job_id, path } = c.req.valid("query");
    const segments = targetSegments("path", stripRoot(path), false);
    checkDatasetPath(await datasetsOfAssignedJob(c.get("db"), workerOf(c).id, job_id), segments, false);
    const object = await c.env.STORAGE.get(keyOf(segments));
    if (!object) throw notFound(`Dataset file ${segments.join("/")}`);
    return c.body(object.body, 200, {
      "content-type": object.httpMetadata?.contentType ?? "application/octet-stream",
      "content-length": String(object.size),
      ...(object.customMetadata?.sha256 ? { "x-content-sha256": object.customMetadata.sha256 } : {}),
    }) as never;
  },
);
