import pc from "picocolors";
import { ServiceError } from "../../shared/client/client";
import { showControls, terminalJson } from "../../shared/terminal-text";

type Colors = ReturnType<typeof pc.createColors>;

/** `csv` only where a command says it prints CSV (`jobs cost`); others refuse it (cli() in context.ts). */
export const FORMATS = ["table", "json", "csv"] as const;
export type Format = (typeof FORMATS)[number];

/** A mistake in how the command was called: exit code 2, like commander's own. */
export class UsageError extends Error {}

/** A followed job that ended otherwise than completed: exit code 1, its status in the JSON error's code (`job_failed`). */
export class JobNotCompleted extends Error {
  constructor(
    readonly jobId: string,
    readonly status: string,
    reason: string | null,
  ) {
    super(`job ${jobId} ended: ${status}${reason ? `: ${reason}` : ""}`);
  }
}

/** Exit codes (README "Command line"): 0 success, 1 the service refused or failed, 2 usage. */
export const EXIT = { ok: 0, service: 1, usage: 2 } as const;

interface Streams {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

/**
 * Where a command writes. Data goes to stdout (a table, or JSON with --format json); notes,
 * progress and errors to stderr, so `jobs list --format json | jq` only ever sees JSON. Colour
 * only on a terminal and never with NO_COLOR or --format json; progress bars only when stderr is
 * a terminal.
 */
export class Output {
  readonly color: boolean;
  /** Colour functions that are the identity when colour is off. */
  readonly c: Colors;

  constructor(
    readonly format: Format,
    private readonly streams: Streams = { stdout: process.stdout, stderr: process.stderr },
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.color = format !== "json" && Boolean(streams.stdout.isTTY) && !env.NO_COLOR && env.TERM !== "dumb";
    this.c = pc.createColors(this.color);
  }

  get json(): boolean {
    return this.format === "json";
  }

  /** Whether progress bars and prompts may be drawn (stderr is a terminal). */
  get interactive(): boolean {
    return Boolean(this.streams.stderr.isTTY);
  }

  /** The terminal's width, or null when stdout is not a terminal (then nothing is cut). */
  get columns(): number | null {
    return this.streams.stdout.isTTY ? (this.streams.stdout.columns ?? 80) : null;
  }

  get stderr(): NodeJS.WriteStream {
    return this.streams.stderr;
  }

  /** A line of data on stdout. */
  line(text = ""): void {
    this.streams.stdout.write(text + "\n");
  }

  /** Data on stdout exactly as given (a CSV document with its own line ends). */
  write(text: string): void {
    this.streams.stdout.write(text);
  }

  /** A note for the person at the terminal, on stderr (never part of the data). */
  note(text: string): void {
    this.streams.stderr.write(text + "\n");
  }

  /** A value as JSON on stdout: two-space indented, one document per command, no raw control character. */
  printJson(value: unknown): void {
    this.streams.stdout.write(terminalJson(value, 2) + "\n");
  }

  /**
   * A table with a header row, sized to the terminal: when it is too wide, the widest columns
   * are cut (with …) until it fits. Not on a terminal, nothing is cut. Cells hold other users'
   * text (job metadata): their control characters are shown as escapes, never sent raw.
   *
   * @example
   * out.table(["JOB", "STATUS"], [["local-1", "running"]]);
   */
  table(headers: string[], cells: string[][]): void {
    const rows = cells.map((row) => row.map(showControls));
    const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
    const limit = this.columns;
    if (limit !== null) fitWidths(widths, headers, limit);
    const render = (cells: string[]) =>
      cells
        .map((cell, i) => cut(cell, widths[i]!).padEnd(i === cells.length - 1 ? 0 : widths[i]!))
        .join("  ")
        .trimEnd();
    this.line(this.c.bold(render(headers)));
    for (const row of rows) this.line(render(row));
  }
}

/** Shrinks the widest columns (never below their header or 6 characters) until the row fits. */
function fitWidths(widths: number[], headers: string[], limit: number): void {
  const total = () => widths.reduce((a, b) => a + b, 0) + 2 * (widths.length - 1);
  while (total() > limit) {
    const widest = widths.indexOf(Math.max(...widths));
    const floor = Math.max(6, headers[widest]!.length);
    if (widths[widest]! <= floor) return; // cannot shrink further: let the terminal wrap
    widths[widest] = Math.max(floor, widths[widest]! - (total() - limit));
  }
}

const cut = (text: string, width: number) => (text.length <= width ? text : text.slice(0, Math.max(0, width - 1)) + "…");

/**
 * Writes an error to stderr and returns the exit code: JSON (`{"error": {...}}`) with --format
 * json, else `error: <detail>` with the service's per-field messages.
 */
export function reportError(error: unknown, out: Output): number {
  const usage = error instanceof UsageError;
  const code = usage ? EXIT.usage : EXIT.service;
  if (out.json) {
    const body =
      error instanceof ServiceError
        ? { status: error.status, code: error.code, detail: error.detail, ...(error.fields ? { errors: error.fields } : {}) }
        : {
            code: usage ? "usage" : error instanceof JobNotCompleted ? `job_${error.status}` : "error",
            detail: (error as Error)?.message ?? String(error),
          };
    out.stderr.write(JSON.stringify({ error: body }) + "\n");
    return code;
  }
  const detail = error instanceof ServiceError ? error.detail : ((error as Error)?.message ?? String(error));
  out.note(`${out.c.red("error:")} ${detail}`);
  if (error instanceof ServiceError) for (const field of error.fields ?? []) out.note(`  ${field.path}: ${field.message}`);
  return code;
}
