import { FINISH_LIMITS } from "../../shared/schemas/workers";
import { plainText } from "../../shared/terminal-text";
import type { FinishBody } from "./edge-client";
import type { TrainerEvents } from "./trainer-events";

/*
 * The report a runner sends when a job has ended on its box (POST /api/workers/jobs/{id}/finish),
 * fitted to the schema the edge checks it against, for any trainer: a line of 1,241 characters
 * (accelerate's CalledProcessError names the whole command line) or a traceback of hundreds of
 * lines must never leave a job running. Lines keep their start and end, a traceback its end
 * (where it failed), and whatever was cut is said.
 */

/** A line shortened to `max` characters, keeping its start and its end. */
function cutLine(line: string, max: number): string {
  if (line.length <= max) return line;
  const note = (n: number) => ` … [${n} characters cut] … `;
  const room = max - note(line.length).length;
  const head = Math.ceil(room * 0.6);
  const tail = room - head;
  return `${line.slice(0, head)}${note(line.length - head - tail)}${line.slice(line.length - tail)}`;
}

/** Text shortened to `max` characters, keeping its start (the error's name and message). */
function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  const note = ` … [${text.length - max} characters cut]`;
  return text.slice(0, max - note.length - 20) + note + text.slice(-20);
}

/**
 * A report within FINISH_LIMITS: each line at most 1,000 characters, the last 50 lines (the first
 * of them saying how many earlier ones were cut), the error at most 2,000 characters.
 *
 * @example
 * fitReport({ status: "failed", error: "boom", last_lines: ["x".repeat(5000)] }).last_lines![0]!.length; // 1000
 */
export function fitReport(body: FinishBody): FinishBody {
  const fitted: FinishBody = { ...body };
  if (body.error !== undefined) fitted.error = cutText(body.error, FINISH_LIMITS.error);
  if (body.last_lines) {
    const lines = body.last_lines.map((line) => cutLine(line, FINISH_LIMITS.line));
    fitted.last_lines =
      lines.length <= FINISH_LIMITS.lines
        ? lines
        : [`[… ${lines.length - FINISH_LIMITS.lines + 1} earlier lines cut]`, ...lines.slice(-(FINISH_LIMITS.lines - 1))];
  }
  return fitted;
}

/** The same report without its lines and with a short error: what is sent when the edge refused the whole one. */
export function shortenedReport(body: FinishBody, refusal: string): FinishBody {
  const why = body.error ?? (body.status === "completed" ? undefined : `the trainer exited with code ${body.exit_code ?? "unknown"}`);
  return {
    status: body.status,
    ...(body.exit_code !== undefined ? { exit_code: body.exit_code } : {}),
    ...(why !== undefined || body.status !== "completed"
      ? { error: cutText(`${why ?? "ended"} (its full report was refused: ${refusal})`, 500) }
      : {}),
  };
}

/** The last resort after a shortened report was refused too: the job ends failed, the refusal its reason. */
export function refusalReport(refusal: string): FinishBody {
  return { status: "failed", error: cutText(`the edge refused this job's end report: ${refusal}`, 500) };
}

/**
 * The lines a failed job's report carries: the end of the traceback the trainer reported (the
 * Python error that stopped it), else the last lines it printed: plain text, without the colour
 * codes and other controls meant for its terminal (the edge strips them again).
 *
 * @example
 * reportLines("Traceback (most recent call last):\n  ...\nOSError: [Errno 30]", ["accelerate noise"]); // the traceback's lines
 */
export function reportLines(traceback: string | null, printed: string[]): string[] {
  const lines = traceback
    ?.split("\n")
    .map((l) => plainText(l).trimEnd())
    .filter(Boolean);
  return (lines?.length ? lines : printed.map(plainText)).slice(-FINISH_LIMITS.lines);
}

/**
 * Exit codes and signals of a trainer that ended because it was told to: 130, 137 and 143 are how
 * a process (Python on KeyboardInterrupt, a wrapper such as bwrap or a shell) reports SIGINT,
 * SIGKILL and SIGTERM.
 */
const STOP_EXIT_CODES = new Set([0, 130, 137, 143]);
const STOP_SIGNALS = new Set([2, 9, 15]);

/**
 * How a job ends after a requested stop (POST /api/training/stop): completed - the run ended as
 * its user asked - when the trainer exited cleanly or of the signals the runner sent it; failed
 * when it exited with an error of its own (it crashed while stopping: a final save failed).
 */
export function stoppedOutcome(exitCode: number | null, signal: number | null): "completed" | "failed" {
  return (signal !== null && STOP_SIGNALS.has(signal)) || (exitCode !== null && STOP_EXIT_CODES.has(exitCode)) ? "completed" : "failed";
}

/**
 * The report of a trainer that ended on its own or as asked. A requested stop ends completed
 * when the trainer exited cleanly or of the runner's signals; otherwise a run is completed only
 * when the trainer exited 0 without saying it failed or was interrupted (SimpleTuner exits 0 after
 * an interrupt nobody asked for). A failure names the error the trainer reported, with the end of
 * its traceback, else its last lines.
 */
export function endReport(
  job: { stopAsked: boolean; events: Pick<TrainerEvents, "end" | "error"> },
  exitCode: number | null,
  signal: number | null,
  lastLines: string[],
): FinishBody {
  const said = job.events.end;
  const completed = job.stopAsked
    ? stoppedOutcome(exitCode, signal) === "completed"
    : exitCode === 0 && said !== "failed" && said !== "interrupted";
  if (completed) return { status: "completed", exit_code: exitCode };
  const error = job.events.error;
  const why = error
    ? `${error.title}${error.message ? `: ${error.message}` : ""}`
    : signal
      ? `the trainer was killed by signal ${signal}${job.stopAsked ? " while stopping" : ""}`
      : job.stopAsked
        ? `the trainer failed while stopping (exit code ${exitCode})`
        : said === "interrupted"
          ? `the trainer was interrupted without a stop request (exit code ${exitCode})`
          : said === "failed"
            ? `the trainer reported that training failed (exit code ${exitCode})`
            : undefined;
  return { status: "failed", exit_code: exitCode, error: why, last_lines: reportLines(error?.traceback ?? null, lastLines).slice(-20) };
}
