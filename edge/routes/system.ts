import { createRoute } from "@hono/zod-openapi";
import { ErrorBody } from "../../shared/schemas/common";
import { SystemStatus, SystemStatusQuery } from "../../shared/schemas/system";
import { localView } from "../queue/stats";
import { createRouter } from "../router";

export const system = createRouter();

system.openapi(
  createRoute({
    method: "get",
    path: "/api/system/status",
    tags: ["System"],
    summary: "The local GPU box: devices, host figures and, with include_allocation, which job holds each GPU (spec 2.7)",
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
