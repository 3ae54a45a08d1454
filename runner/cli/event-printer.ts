import { MultiBar, type SingleBar } from "cli-progress";
import type { ServiceClient } from "../../shared/client/client";
import { eventLine, type Event } from "../../shared/event-line";
import { terminalJson } from "../../shared/terminal-text";
import { followEvents } from "./follow";
import type { Output } from "./output";

/**
 * Prints a job's events live from index `since` until the job ends (a progress bar on a
 * terminal) and returns its final status; the status is not printed, callers say it their way.
 * `printer` may already have printed earlier events (its bar then goes on).
 *
 * @example
 * const status = await printFollowed(new EventPrinter(out), client, "local-3f9c2a1b04de", 0);
 */
export async function printFollowed(printer: EventPrinter, client: ServiceClient, jobId: string, since: number): Promise<string> {
  try {
    return await followEvents({ client, jobId, since, onEvent: (e) => printer.event(e), onNote: (t) => printer.note(t) });
  } finally {
    printer.stop();
  }
}

/**
 * Prints events: JSON lines, or text lines. On a terminal, progress events drive a bar on stderr;
 * the other lines are written above it when stdout is that terminal too, and every line
 * (progress included) still goes to stdout when stdout is a file.
 */
export class EventPrinter {
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
