/*
 * A trainer's terminal output as the lines a person would see. Under the PTY a progress bar
 * (tqdm: SimpleTuner's steps, model loading, captions) redraws itself with a carriage return
 * hundreds of times before its line ends; only what the line shows last is a line of the log.
 * A line that never ends is cut at MAX_LINE (1 MiB), so memory stays bounded whatever a trainer prints.
 */

/**
 * The longest line kept whole; a longer one goes out in pieces of this size. Above the largest event
 * the edge takes (512 KiB): a trainer's JSON event line with its images must stay one line.
 */
export const MAX_LINE = 1024 * 1024;

/** What a terminal shows of a line written with carriage returns: the last non-empty redraw. */
function shown(line: string): string {
  if (!line.includes("\r")) return line;
  const redraws = line.split("\r");
  for (let i = redraws.length - 1; i >= 0; i--) if (redraws[i]!.trim()) return redraws[i]!;
  return "";
}

/**
 * Splits chunks of output into lines.
 *
 * @example
 * const lines = new OutputLines((line) => console.log(line));
 * lines.push("Steps: 10%\rSteps: 20%\rSteps: 30%\r\nloss 0.4\n"); // "Steps: 30%", then "loss 0.4"
 */
export class OutputLines {
  private partial = "";

  constructor(private readonly onLine: (line: string) => void) {}

  push(chunk: string): void {
    const parts = (this.partial + chunk).split("\n");
    this.partial = parts.pop() ?? "";
    for (const part of parts) this.onLine(shown(part.endsWith("\r") ? part.slice(0, -1) : part));
    // A bar still redrawing keeps only its latest state; a line without end is cut.
    const cr = this.partial.lastIndexOf("\r", this.partial.length - 2);
    if (cr > 0 && this.partial.slice(cr + 1).trim()) this.partial = this.partial.slice(cr);
    while (this.partial.length > MAX_LINE) {
      this.onLine(shown(this.partial.slice(0, MAX_LINE)));
      this.partial = this.partial.slice(MAX_LINE);
    }
  }

  /** The unfinished last line, at the end of the output. */
  end(): void {
    const rest = shown(this.partial);
    this.partial = "";
    if (rest) this.onLine(rest);
  }
}
