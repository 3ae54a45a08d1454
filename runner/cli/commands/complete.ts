import { Argument, type Command } from "commander";
import { endpoints } from "../../../shared/client/endpoints";
import { cli } from "../context";

/** What the shell completion asks the service for (runner/cli/completion.ts). */
export const COMPLETION_KINDS = ["jobs", "environments"] as const;
export type CompletionKind = (typeof COMPLETION_KINDS)[number];

/** The most job ids offered: the newest of the queue's listing. */
const JOB_IDS = 200;

/**
 * `jobs __complete <kind>` (hidden): the job ids or environment names the service has, one a
 * line, for the shell completion. Prints nothing and exits 0 when the service cannot be reached
 * or no key is configured: a completion never shows an error.
 */
export function addComplete(program: Command): void {
  program
    .command("__complete", { hidden: true })
    .addArgument(new Argument("<kind>").choices(COMPLETION_KINDS))
    .action(async (kind: CompletionKind, _options: object, command: Command) => {
      try {
        const { out, client } = cli(command);
        const words =
          kind === "environments"
            ? (await client.call(endpoints.configList, { query: {} }, { timeoutMs: 3000 })).environments.map((e) => e.name)
            : (
                await client.call(endpoints.queueList, { query: { include_completed: true, limit: JOB_IDS } }, { timeoutMs: 3000 })
              ).jobs.map((j) => j.job_id);
        // Names are the API's: only plain words reach the shell's word list.
        for (const word of words) if (/^[\w.:@+-]+$/.test(word)) out.line(word);
      } catch {
        // unreachable, logged out, refused: nothing to offer
      }
    });
}
