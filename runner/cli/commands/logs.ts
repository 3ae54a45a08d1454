import type { Command } from "commander";
import { eventLine } from "../../../shared/event-line";
import { terminalJson } from "../../../shared/terminal-text";
import { cli } from "../context";
import { EventPrinter, printFollowed } from "../event-printer";
import { parseSince, parseTail, readWindow } from "../log-window";

interface LogsOptions {
  follow?: boolean;
  since: string;
  tail?: string;
}

/** `jobs logs`: a job's events, from the log or live until the job ends. */
export function addLogs(program: Command): void {
  program
    .command("logs")
    .description(
      "Print a job's events (log lines, progress, checkpoints, validations). With --follow, keep printing them live until the job ends; on a terminal, progress shows as a bar.",
    )
    .argument("<job_id>", "the job, e.g. local-3f9c2a1b04de")
    .option("-f, --follow", "follow the job live until it ends, then print its final status on stderr")
    .option(
      "--since <index|duration>",
      "start at this event index (0 is the first), or at events stored within 30s, 10m, 2h, 1d of now",
      "0",
    )
    .option("--tail <n>", "only the last n events (of those --since selects); with --follow, the last n and then the live ones")
    .addHelpText(
      "after",
      `
Lines read \`<HH:MM:SS> <type> <text>\`: colour codes removed, any other control character a trainer printed (an escape, a bell, C1) shown as \\u001b and the like, never sent to your terminal. With --format json, each event is one JSON object per line, as the API gives it (controls escaped the JSON way).

--since takes an event index (a bare number) or a duration (a number and s, m, h or d), compared with each event's stored time. --tail N with --since keeps the last N of the events --since selects.

Examples:
  jobs logs local-3f9c2a1b04de
  jobs logs local-3f9c2a1b04de --tail 20 --follow
  jobs logs local-3f9c2a1b04de --since 10m
  jobs logs local-3f9c2a1b04de --format json | jq -c 'select(.type == "training.progress")'`,
    )
    .action(async (jobId: string, options: LogsOptions, command: Command) => {
      const since = parseSince(options.since, Date.now());
      const tail = options.tail === undefined ? null : parseTail(options.tail);
      const { out, client } = cli(command);
      if (!options.follow) {
        await readWindow(client, jobId, { since, tail }, (e) => out.line(out.json ? terminalJson(e) : eventLine(e)));
        return;
      }
      const printer = new EventPrinter(out);
      try {
        // A plain index needs no look at the stored log first: the stream replays it from there.
        const from =
          "index" in since && tail === null ? since.index : await readWindow(client, jobId, { since, tail }, (e) => printer.event(e));
        const status = await printFollowed(printer, client, jobId, from);
        out.note(`job ${jobId} ended: ${status}`);
      } finally {
        printer.stop();
      }
    });
}
