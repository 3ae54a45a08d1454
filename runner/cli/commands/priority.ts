import { InvalidArgumentError, type Command } from "commander";
import { endpoints } from "../../../shared/client/endpoints";
import { cli } from "../context";

/** `default` clears the override; otherwise a whole number from 0 to 100. */
function priorityValue(text: string): number | null {
  if (text === "default") return null;
  if (!/^\d+$/.test(text) || Number(text) > 100) throw new InvalidArgumentError("give a whole number from 0 to 100, or default");
  return Number(text);
}

/** `jobs priority`: overrides a waiting job's priority (leads and admins). */
export function addPriority(program: Command): void {
  program
    .command("priority")
    .description("Override a waiting job's priority, 0 to 100 (admin is 30), or `default` for its level's (leads and admins).")
    .argument("<job_id>", "the pending or blocked job")
    .argument("<priority>", "0 to 100, or default", priorityValue)
    .addHelpText("after", "\nExamples:\n  $ jobs priority local-3f9c2a1b04de 50\n  $ jobs priority local-3f9c2a1b04de default")
    .action(async (jobId: string, priority: number | null, _options: object, command: Command) => {
      const { out, client } = cli(command);
      const answer = await client.call(endpoints.queuePriority, { params: { job_id: jobId }, body: { priority } });
      if (out.json) out.printJson(answer);
      else
        out.line(
          `Priority of ${answer.job.job_id}: ${priority === null ? "its level's" : priority} (effective ${answer.job.effective_priority ?? "?"}).`,
        );
    });
}
