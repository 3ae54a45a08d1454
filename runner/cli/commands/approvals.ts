import type { Command } from "commander";
import { endpoints } from "../../../shared/client/endpoints";
import { cli } from "../context";

interface RejectOptions {
  reason: string;
}

/** `jobs approve` and `jobs reject`: decide a job an approval rule holds `blocked` (admins). */
export function addApprovals(program: Command): void {
  program
    .command("approve")
    .description("Approve a blocked job: it becomes pending and starts when it fits (admins).")
    .argument("<job_id>", "the blocked job")
    .addHelpText("after", "\nExample:\n  $ jobs approve local-3f9c2a1b04de")
    .action(async (jobId: string, _options: object, command: Command) => {
      const { out, client } = cli(command);
      const answer = await client.call(endpoints.queueApprove, { params: { job_id: jobId } });
      if (out.json) out.printJson(answer);
      else out.line(`Approved ${answer.job.job_id}: now ${answer.job.status}.`);
    });

  program
    .command("reject")
    .description("Reject a blocked job: it ends cancelled with the reason recorded (admins).")
    .argument("<job_id>", "the blocked job")
    .option("--reason <text>", "why, recorded on the job and its approval request", "no reason given")
    .addHelpText("after", '\nExample:\n  $ jobs reject local-3f9c2a1b04de --reason "8 GPUs for a smoke test"')
    .action(async (jobId: string, options: RejectOptions, command: Command) => {
      const { out, client } = cli(command);
      const answer = await client.call(endpoints.queueReject, { params: { job_id: jobId }, query: { reason: options.reason } });
      if (out.json) out.printJson(answer);
      else out.line(`Rejected ${answer.job.job_id}: now ${answer.job.status}.`);
    });
}
