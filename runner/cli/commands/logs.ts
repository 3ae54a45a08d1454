import { MultiBar, type SingleBar } from "cli-progress";
import type { Command } from "commander";
import type { ServiceClient } from "../../../shared/client/client";
import type { EndpointOutput } from "../../../shared/client/endpoint";
import { endpoints } from "../../../shared/client/endpoints";
import { cli } from "../context";
import { eventLine, type Event } from "../../../shared/event-line";
import { terminalJson } from "../../../shared/terminal-text";
import { followEvents } from "../follow";
import { UsageError, type Output } from "../output";

interface LogsOptions {
  follow?: boolean;
  since?: string;
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
    .option("--since <index>", "start at this event index (0 is the first event)", "0")
    .addHelpText(
      "after",
      "\nLines read `<HH:MM:SS> <type> <text>`: colour codes removed, any other control character a trainer printed (an escape, a bell, C1) shown as \\u001b and the like, never sent to your terminal. With --format json, each event is one JSON object per line, as the API gives it (controls escaped the JSON way).\n\nExamples:\n  jobs logs local-3f9c2a1b04de\n  jobs logs local-3f9c2a1b04de --follow\n  jobs logs local-3f9c2a1b04de --format json | jq -c 'select(.type == \"training.progress\")'",
    )
    .action(async (jobId: string, options: LogsOptions, command: Command) => {
      const since = Number(options.since);
      if (!/^\d+$/.test(options.since ?? "") || !Number.isSafeInteger(since))
        throw new UsageError(`--since must be an event index (0 or more), not ${JSON.stringify(options.since)}`);
      const { out, client } = cli(command);
      if (!options.follow) return printLog(client, out, jobId, since);
      const printer = new EventPrinter(out);
      try {
        const status = await followEvents({ client, jobId, since, onEvent: (e) => printer.event(e), onNote: (t) => printer.note(t) });
        printer.stop();
        out.note(`job ${jobId} ended: ${status}`);
      } finally {
        printer.stop();
      }
    });
}

/** Pages through the job's stored events (GET /api/training/events) until a page is empty or the last. */
async function printLog(client: ServiceClient, out: Output, jobId: string, since: number): Promise<void> {
  let cursor: string | null = null;
  for (;;) {
    const query: { cursor: string } | { job_id: string; since_index: number } = cursor ? { cursor } : { job_id: jobId, since_index: since };
    const page: EndpointOutput<typeof endpoints.trainingEvents> = await client.call(endpoints.trainingEvents, { query });
    for (const event of page.events) out.line(out.json ? terminalJson(event) : eventLine(event));
    if (!page.events.length || page.next_cursor === null) return;
    cursor = page.next_cursor;
  }
}

/**
 * Prints followed events: JSON lines, or text lines. On a terminal, progress events drive a bar
 * on stderr; the other lines are written above it when stdout is that terminal too, and every
 * line (progress included) still goes to stdout when stdout is a file.
 */
class EventPrinter {
  private bars: MultiBar | null = null;
  private bar: SingleBar | null = null;

  constructor(private readonly out: Output) {}

  private get withBar(): boolean {
    return !this.out.json && this.out.interactive;
  }

  /** stdout is the terminal the bar is drawn on: lines must go through the bar's own log. */
  private get sharesTerminal(): boolean {
    return this.out.columns !== null;
  }

  event(event: Event): void {
    if (this.out.json) return this.out.line(terminalJson(event));
    const data = (event.data ?? {}) as { step?: unknown; total_steps?: unknown; loss?: unknown };
    const progress = event.type === "training.progress" && typeof data.step === "number" && typeof data.total_steps === "number";
    if (this.withBar && progress) {
      this.progress(data.step as number, data.total_steps as number, typeof data.loss === "number" ? data.loss.toFixed(4) : "-");
      if (this.sharesTerminal) return;
    }
    this.write(eventLine(event));
  }

  note(text: string): void {
    if (this.bars) this.bars.log(`${text}\n`);
    else this.out.note(text);
  }

  stop(): void {
    this.bars?.stop();
    this.bars = null;
    this.bar = null;
  }

  private write(line: string): void {
    if (this.bars && this.sharesTerminal) this.bars.log(`${line}\n`);
    else this.out.line(line);
  }

  private progress(step: number, total: number, loss: string): void {
    if (!this.bars) {
      this.bars = new MultiBar({
        stream: this.out.stderr,
        format: " {bar} {percentage}% | step {value}/{total} | loss {loss}",
        barCompleteChar: "█",
        barIncompleteChar: "░",
        hideCursor: false,
        clearOnComplete: false,
      });
    }
    if (!this.bar) this.bar = this.bars.create(total, step, { loss });
    else {
      if (this.bar.getTotal() !== total) this.bar.setTotal(total);
      this.bar.update(step, { loss });
    }
  }
}
