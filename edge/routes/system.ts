import { createRoute } from "@hono/zod-openapi";
import { ErrorBody } from "../../shared/schemas/common";
import { SystemStatus, SystemStatusQuery, SystemWorkerList } from "../../shared/schemas/system";
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
      "What the dashboard's \"GPUs and workers\" view shows to every user: name, role (`local`: this service's own box), status (`connecting`, `IDLE`, `busy`, `draining`, `offline`), labels, `last_seen` (last heartbeat) and per GPU its index, name, memory and the running job that holds it (a job on a remote worker holds all its GPUs). Never a token or its hash, nor the host's name: those are in the admin's `GET /api/admin/workers` (tokens never).",
    responses: { 200: json(SystemWorkerList, "Workers, the local box first"), 401: error("No valid credential") },
  }),
  async (c) => c.json({ workers: await publicWorkers(c.get("db")) }, 200),
);
