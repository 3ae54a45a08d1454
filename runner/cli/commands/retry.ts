import type { Command } from "commander";
import { endpoints } from "../../../shared/client/endpoints";
import { cli } from "../context";
import { submitOnce } from "../submit-once";
import { describeLocal, followToEnd } from "./submit";

/** `jobs retry`: a failed, cancelled or stopped job again, as a new job resuming from its newest checkpoint. */
export function addRetry(program: Command): void {
  program
    .command("retry")
    .description("Retry a failed, cancelled or stopped job: a new job with the same configuration, resuming from its newest checkpoint.")
    .argument("<job_id>", "the job to retry")
    .option("-f, --follow", "then print the new job's events live until it ends, as `jobs submit --follow`; exit 0 only if it completed")
    .addHelpText(
      "after",
      `
The new job is linked to the old one (retry_of) and to its lineage (GET /api/queue/jobs/<id> totals its
GPU-hours and cost). Your own jobs; leads and admins any.
A job that is still waiting or running, or that completed, cannot be retried (exit 1, the reason on stderr).

Examples:
  $ jobs retry local-3f9c2a1b04de
  $ jobs retry local-3f9c2a1b04de --follow && echo trained`,
    )
    .action(async (jobId: string, options: { follow?: boolean }, command: Command) => {
      const { out, client } = cli(command);
      const answer = await submitOnce(client, endpoints.queueRetry, { params: { job_id: jobId } });
      const resume = answer.resume_from
        ? `resuming from ${answer.resume_from.checkpoint} of ${answer.resume_from.job_id}`
        : "from the start (no checkpoint recorded)";
      const said = `${describeLocal(answer)}; retry of ${answer.retry_of}, ${resume}`;
      if (answer.status === "rejected") throw new Error(said);
      if (options.follow) {
        out.note(said);
        return followToEnd(out, client, answer.job_id!);
      }
      if (out.json) out.printJson(answer);
      else out.line(said);
    });
}
