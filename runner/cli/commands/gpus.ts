import type { Command } from "commander";
import type { z } from "zod";
import type { SystemWorkerGpu } from "../../../shared/schemas/system";
import { endpoints } from "../../../shared/client/endpoints";
import { cli } from "../context";
import { cell } from "../format-job";

type Gpu = z.infer<typeof SystemWorkerGpu>;

/** A GPU's health in a cell: out of allocation and why, else its latest sample's temperature and use; `-` without one. */
export function healthCell(gpu: Pick<Gpu, "quarantine" | "health">): string {
  if (gpu.quarantine) return cell(`QUARANTINED: ${gpu.quarantine.reason}`);
  const h = gpu.health;
  if (!h) return "-";
  const parts = [
    h.temperature_c === null ? null : `${Math.round(h.temperature_c)}°C`,
    h.utilization_percent === null ? null : `${Math.round(h.utilization_percent)}% use`,
    h.memory_used_mb === null || h.memory_total_mb === null
      ? null
      : `${(h.memory_used_mb / 1024).toFixed(1)}/${(h.memory_total_mb / 1024).toFixed(1)} GiB`,
  ].filter((p) => p !== null);
  return cell(parts.length ? `ok ${parts.join(" ")}` : "ok");
}

/** `jobs gpus`: every box, each of its GPUs, its health and the job that holds it. */
export function addGpus(program: Command): void {
  program
    .command("gpus")
    .description("The boxes, their GPUs, each GPU's health and which job holds it.")
    .addHelpText(
      "after",
      "\nA box with no GPUs is one row with GPU `-`. HEALTH is `QUARANTINED: <fault>` for a GPU out of allocation\n(an admin clears it in #/system), else its latest sample (temperature, use, memory), `-` when its runner sent none.\n\nExample:\n  $ jobs gpus",
    )
    .action(async (_options: object, command: Command) => {
      const { out, client } = cli(command);
      const answer = await client.call(endpoints.systemWorkers, {});
      if (out.json) return out.printJson(answer);
      const rows = answer.workers.flatMap((worker) => {
        const box = [worker.name, worker.role, worker.status];
        if (!worker.gpus.length) return [[...box, "-", "-", "-", "-", "-"]];
        return worker.gpus.map((gpu) => [
          ...box,
          String(gpu.index),
          gpu.name,
          `${Math.round(gpu.memory_mb / 1024)} GiB`,
          healthCell(gpu),
          cell(gpu.job_id ?? "free"),
        ]);
      });
      if (!rows.length) return out.note("No boxes are registered.");
      out.table(["BOX", "ROLE", "STATUS", "GPU", "NAME", "MEMORY", "HEALTH", "JOB"], rows);
    });
}
