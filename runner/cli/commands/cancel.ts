import type { Command } from "commander";
import { ServiceError, type ServiceClient } from "../../../shared/client/client";
import { endpoints } from "../../../shared/client/endpoints";
import { cli } from "../context";
import { UsageError } from "../output";
import { allEntries } from "../queue-pages";

interface CancelOptions {
  all?: boolean;
  user?: string;
}

/** One job's outcome, as `--format json` prints it. */
type Outcome = { job_id: string; cancelled: true; message: string } | { job_id: string; cancelled: false; error: string };

/** `jobs cancel`: ends jobs in any state (running ones too), or every job of yours that has not started. */
export function addCancel(program: Command): void {
  program
    .command("cancel")
    .description("Cancel jobs by id (pending, blocked or running, cloud jobs too), or with --all every job of yours that has not started.")
    .argument("[job_id...]", "the jobs to cancel")
    .option("--all", "every pending and blocked job of yours (running jobs are left alone)")
    .option("--user <name>", "with --all: that user's jobs instead (leads and admins)")
    .addHelpText(
      "after",
      `
Each job is cancelled on its own: when some fail, the others still are, and the exit code is 1.

Examples:
  $ jobs cancel local-3f9c2a1b04de cloud-0a1b2c3d4e5f
  $ jobs cancel --all
  $ jobs cancel --all --user bea`,
    )
    .action(async (jobIds: string[], options: CancelOptions, command: Command) => {
      if (options.all && jobIds.length) throw new UsageError("give job ids or --all, not both");
      if (!options.all && !jobIds.length)
        throw new UsageError("give the job ids to cancel, or --all for every job of yours that has not started");
      if (options.user !== undefined && !options.all) throw new UsageError("--user goes with --all");
      const { out, client } = cli(command);
      const ids = options.all ? await notStarted(client, options.user ?? (await client.call(endpoints.me, {})).username) : jobIds;

      const outcomes: Outcome[] = [];
      for (const jobId of ids) {
        try {
          const answer = await client.call(endpoints.trainingCancel, { body: { job_id: jobId } });
          outcomes.push({ job_id: jobId, cancelled: true, message: answer.message });
          if (!out.json) out.line(answer.message);
        } catch (error) {
          // A refusal of one job is that job's outcome; an unreachable service ends the command.
          if (!(error instanceof ServiceError) || error.status === 0) throw error;
          outcomes.push({ job_id: jobId, cancelled: false, error: error.detail });
          if (!out.json) out.note(`${out.c.red("error:")} ${jobId}: ${error.detail}`);
        }
      }
      if (out.json) out.printJson(outcomes);
      else if (ids.length === 0) out.note("Nothing to cancel.");
      const failed = outcomes.filter((o) => !o.cancelled).length;
      if (failed) throw new Error(`${failed} of ${outcomes.length} job(s) could not be cancelled`);
    });
}

/**
 * The ids of `username`'s pending and blocked jobs. The owner is checked here too, so a service
 * that ignored the user filter could never make `--all` reach someone else's jobs.
 */
async function notStarted(client: ServiceClient, username: string): Promise<string[]> {
  const [pending, blocked] = await Promise.all(
    (["pending", "blocked"] as const).map((status) => allEntries(client, { user: username, status, limit: 500 })),
  );
  return [...pending!, ...blocked!]
    .filter((entry) => entry.owner === username && (entry.status === "pending" || entry.status === "blocked"))
    .map((entry) => entry.job_id);
}
