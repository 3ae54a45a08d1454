import { createRoute } from "@hono/zod-openapi";
import { ErrorBody } from "../../shared/schemas/common";
import {
  GpuCleared,
  GpuHealthHistory,
  GpuHealthQuery,
  GpuParam,
  SystemStatus,
  SystemStatusQuery,
  SystemWorkerList,
} from "../../shared/schemas/system";
import { applyEffects } from "../jobs/lifecycle/effects";
import { schedulerOf } from "../jobs/objects";
import { principalOf } from "../middleware/authorize";
import { clearGpu, gpuHistory } from "../workers/gpu-health";
import { effectsOf } from "./effects-context";
import { localView } from "../queue/stats";
import { createRouter } from "../router";
import { publicWorkers } from "../workers/public-view";
import { error, json } from "./openapi";

export const system = createRouter();

system.openapi(
  createRoute({
    method: "get",
    path: "/api/system/status",
    tags: ["System"],
    summary: "The local GPU box: devices, host figures and, with include_allocation, which job holds each GPU",
    description:
      "The box's figures come from its runner's last heartbeat (`load_avg_5min` and `memory_percent` null until it sends them); `gpu_inventory.capabilities` names the local box and whether it is online.",
    request: { query: SystemStatusQuery },
    responses: {
      200: { description: "Status", content: { "application/json": { schema: SystemStatus } } },
      401: { description: "No valid credential", content: { "application/json": { schema: ErrorBody } } },
    },
  }),
  async (c) => {
    const view = await localView(c.get("db"));
    const inventory = view.inventory;
    const holder = new Map(view.devices.map((d) => [d.index, d.job_id]));
    return c.json(
      {
        timestamp: Math.floor(Date.now() / 1000),
        load_avg_5min: view.hostStats?.load_avg_5min ?? null,
        memory_percent: view.hostStats?.memory_percent ?? null,
        gpus: inventory.map((g) => ({ ...g, allocated: holder.get(g.index) != null, job_id: holder.get(g.index) ?? null })),
        gpu_inventory: {
          backend: inventory.length ? ("cuda" as const) : ("none" as const),
          count: inventory.length,
          capabilities: {
            local_box: view.name,
            online: view.online,
            total_memory_gb: view.devices.reduce((sum, d) => sum + d.memory_gb, 0),
          },
        },
        ...(c.req.valid("query").include_allocation
          ? {
              gpu_allocation: {
                allocated_gpus: view.allocated,
                available_gpus: view.available,
                running_local_jobs: view.runningJobs,
                devices: view.devices,
              },
            }
          : {}),
      },
      200,
    );
  },
);

system.openapi(
  createRoute({
    method: "get",
    path: "/api/system/workers",
    tags: ["System"],
    summary: "Every GPU box and worker with its labels, status, GPUs and which job holds each (any level)",
    description:
      "What the dashboard's \"GPUs and workers\" view shows to every user: name, role (`local`: this service's own box), status (`connecting`, `IDLE`, `busy`, `draining`, `offline`), labels, `last_seen` (last heartbeat) and per GPU its index, name, memory, the running job that holds it (a job on a remote worker holds all its GPUs), its latest health sample (`health`) and its `quarantine` (why and since when it is out of allocation; null: allocatable); `xid_readable` says whether its runner can read the kernel log for Xid errors. Never a token or its hash, nor the host's name: those are in the admin's `GET /api/admin/workers` (tokens never).",
    responses: { 200: json(SystemWorkerList, "Workers, the local box first"), 401: error("No valid credential") },
  }),
  async (c) => c.json({ workers: await publicWorkers(c.get("db")) }, 200),
);

system.openapi(
  createRoute({
    method: "get",
    path: "/api/system/workers/{id}/gpus/{index}/health",
    tags: ["System"],
    summary: "One GPU's health over the last hours (any level)",
    description:
      "Its samples of the last `hours` (1 to 24, default 24), oldest first: one per minute at most (the latest of that minute, a fault seen in it kept), with utilisation, memory used and total, temperature, uncorrected volatile ECC errors, retired pages pending, a failed probe's words, Xid codes and the fault the rule found. Samples older than 24 h are swept. `quarantine` is its open quarantine, or null.",
    request: { params: GpuParam, query: GpuHealthQuery },
    responses: {
      200: json(GpuHealthHistory, "Its samples"),
      401: error("No valid credential"),
      404: error("No such worker, or no such GPU on it"),
      422: error("A bad id, index or hours"),
    },
  }),
  async (c) => {
    const { id, index } = c.req.valid("param");
    return c.json(await gpuHistory(c.get("db"), id, index, c.req.valid("query").hours, new Date()), 200);
  },
);

system.openapi(
  createRoute({
    method: "post",
    path: "/api/system/workers/{id}/gpus/{index}/clear",
    tags: ["System"],
    summary: "Put a quarantined GPU back into allocation (admin)",
    description:
      "A GPU with a fatal fault (uncorrected ECC errors, pages pending retirement, a failed device probe, a fatal Xid) is quarantined by the heartbeat that reports it and stays out until an admin clears it here. The ECC count and retired-pages flag of its latest sample are accepted: only a fault past them quarantines it again. Audited `gpu_cleared`. 409 `not_quarantined` when it is not quarantined.",
    request: { params: GpuParam },
    responses: {
      200: json(GpuCleared, "Cleared: it may be allocated again"),
      401: error("No valid credential"),
      403: error("Not an admin"),
      404: error("No such worker"),
      409: error("The GPU is not quarantined"),
      422: error("A bad id or index"),
    },
  }),
  async (c) => {
    const { id, index } = c.req.valid("param");
    const change = await clearGpu(c.get("db"), id, index, principalOf(c).user.username);
    c.get("log").info("GPU cleared", { worker_id: id, gpu: index, by: principalOf(c).user.id });
    await applyEffects(effectsOf(c, "GPU cleared"), change);
    await schedulerOf(c.env).pass("GPU cleared");
    return c.json({ worker_id: id, index, cleared: change.cleared }, 200);
  },
);
