import type { Command } from "commander";
import { endpoints } from "../../../shared/client/endpoints";
import { cli } from "../context";
import { cell } from "../format-job";

/** `jobs gpus`: every box, each of its GPUs and the job that holds it. */
export function addGpus(program: Command): void {
  program
    .command("gpus")
    .description("The boxes, their GPUs and which job holds each.")
    .addHelpText("after", "\nA box with no GPUs is one row with GPU `-`.\n\nExample:\n  $ jobs gpus")
    .action(async (_options: object, command: Command) => {
      const { out, client } = cli(command);
      const answer = await client.call(endpoints.systemWorkers, {});
      if (out.json) return out.printJson(answer);
      const rows = answer.workers.flatMap((worker) => {
        const box = [worker.name, worker.role, worker.status];
        if (!worker.gpus.length) return [[...box, "-", "-", "-", "-"]];
        return worker.gpus.map((gpu) => [
          ...box,
          String(gpu.index),
          gpu.name,
          `${Math.round(gpu.memory_mb / 1024)} GiB`,
          cell(gpu.job_id ?? "free"),
        ]);
      });
      if (!rows.length) return out.note("No boxes are registered.");
      out.table(["BOX", "ROLE", "STATUS", "GPU", "NAME", "MEMORY", "JOB"], rows);
    });
}
