import { appendFileSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { refusedForGood, type EventBatchBody } from "./edge-client";
import { ServiceError, type ServiceClient } from "../../shared/client/client";
import { workerEndpoints } from "../../shared/client/endpoints-workers";
import { fitEvent } from "./event-size";
import { MAX_BATCH_EVENTS } from "../../shared/schemas/events";

// Terminal colour and cursor sequences, which trainers under a PTY like to print.
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g;

// A Python log record's level where a line says it: SimpleTuner's `[RANK 0] 2026-11-27 05:37:33,064 [WARNING] ...`,
// a bare `[ERROR] ...`, or logging's default `WARNING:name:...`.
const LOG_LEVEL =
  /^(?:\[RANK \d+\] )?(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+ )?(?:\[(WARNING|ERROR|CRITICAL)\]|(WARNING|ERROR|CRITICAL):)/;

/** The level a trainer's output line has, if it says one (info is the default, left out). */
function lineLevel(text: string): { level?: "warning" | "error" } {
  const match = LOG_LEVEL.exec(text);
  const name = match?.[1] ?? match?.[2];
  if (!name) return text.startsWith("Traceback (most recent call last)") ? { level: "error" } : {};
  return { level: name === "WARNING" ? "warning" : "error" };
}

/**
 * A trainer output line as an event (trainer protocol): a JSON object with a string `type` is
 * an event as it is; any other non-empty line is a `log` event, with the level it says it has.
 */
export function lineToEvent(line: string): ({ type: string } & Record<string, unknown>) | null {
  const text = line.replace(ANSI, "").trimEnd();
  if (!text.trim()) return null;
  if (text.startsWith("{")) {
    try {
      const parsed = JSON.parse(text) as unknown;
      if (
        parsed &&
        typeof parsed === "object" &&
        !Array.isArray(parsed) &&
        typeof (parsed as { type?: unknown }).type === "string" &&
        (parsed as { type: string }).type
      ) {
        return parsed as { type: string } & Record<string, unknown>;
      }
    } catch {
      // not an event: a log line that happens to start with a brace
    }
  }
  return { type: "log", message: text.slice(0, 4000), ...lineLevel(text) };
}

/** At most this many events wait in memory (and on disk) for one job attempt; past it they are counted as dropped, and said so. */
export const MAX_QUEUED_EVENTS = 50_000;
/** At most this many bytes of one attempt's events are kept on disk. */
export const MAX_OUTBOX_BYTES = 64 * 1024 * 1024;

/**
 * Ships one job attempt's events to the edge in order. One batch is in flight at a time: an event
 * that arrives while none is goes out at once (setImmediate: after the lines of the same chunk of
 * output, with no timer's millisecond), and whatever gathers meanwhile goes in the next batch (up
 * to MAX_BATCH_EVENTS, the most the edge takes), so latency stays low at a few events a second
 * and batches grow by themselves at thousands: at 10,000 a second a batch's round trip may take
 * 50 ms before the queue falls behind. Not two batches at once: the edge gives a batch's events
 * the next indexes of the job's log as it stores them, and takes a seq above the attempt's
 * highest as a gap (events.gap), so a second batch stored before the first would reorder the log
 * and report a false gap. A failed batch is sent again after `retryMs` (the edge skips events it
 * already has). `drain` waits until all are delivered.
 *
 * With an `outbox` file, every event is also appended there before it is sent (the file is the
 * runner's, outside any trainer's sight), in one write per turn of the event loop rather than
 * one per event: an edge away for an hour or a runner restarted in
 * between loses nothing - `replayOutbox` sends a file again, and the edge takes an attempt's late
 * events. The queue is bounded (MAX_QUEUED_EVENTS, MAX_OUTBOX_BYTES); what goes past it is
 * counted, its sequence numbers skipped (the edge sees the gap) and an `events.dropped` event
 * says how many, never silently.
 */
export class EventShipper {
  private queue: EventBatchBody["events"] = [];
  private seq = 0;
  private timer: { kind: "now"; handle: NodeJS.Immediate } | { kind: "retry"; handle: NodeJS.Timeout } | undefined;
  private sending: Promise<void> | null = null;
  private closed = false;
  private outboxBytes = 0;
  /** Outbox lines not written yet (they are, at the end of this turn of the event loop or before a send). */
  private unwritten: string[] = [];
  private writeSoon: NodeJS.Immediate | undefined;
  private dropped = 0;
  private unreachableSince: number | null = null;

  constructor(
    private readonly edge: ServiceClient,
    private readonly jobId: string,
    private readonly attempt: number,
    private readonly retryMs = 500,
    private readonly log: (line: string) => void = () => {},
    private readonly outbox: string | null = null,
  ) {
    if (outbox) {
      mkdirSync(dirname(outbox), { recursive: true });
      rmSync(outbox, { force: true });
    }
  }

  /** Queues an event, fitted to the size the edge stores (event-size.ts): a batch the edge refused would be lost. */
  push(event: EventBatchBody["events"][number]["event"]): void {
    const item = { seq: this.seq++, event: fitEvent(event) };
    const line = this.outbox ? JSON.stringify(item) + "\n" : "";
    if (this.queue.length >= MAX_QUEUED_EVENTS || this.outboxBytes + line.length > MAX_OUTBOX_BYTES) {
      if (this.dropped++ === 0)
        this.log(`job ${this.jobId}: more than ${MAX_QUEUED_EVENTS} events wait for the edge; dropping new ones (counted)`);
      return;
    }
    this.dropNotice();
    if (this.outbox) {
      this.unwritten.push(line);
      this.writeSoon ??= setImmediate(() => this.writeOutbox());
      this.outboxBytes += line.length;
    }
    this.queue.push(item);
    this.kick(0);
  }

  /** Appends the lines pushed since the last write to the outbox, in one write. */
  private writeOutbox(): void {
    clearImmediate(this.writeSoon);
    this.writeSoon = undefined;
    if (!this.outbox || !this.unwritten.length) return;
    const text = this.unwritten.join("");
    this.unwritten = [];
    appendFileSync(this.outbox, text);
  }

  /** Once there is room again, the events that found none are said to be lost. */
  private dropNotice(): void {
    if (!this.dropped || this.queue.length >= MAX_QUEUED_EVENTS) return;
    const count = this.dropped;
    this.dropped = 0;
    this.push({
      type: "events.dropped",
      level: "warning",
      title: `${count} event(s) of this attempt were dropped: the edge could not be reached while they came in, and the runner keeps at most ${MAX_QUEUED_EVENTS}`,
      data: { count },
    });
  }

  private kick(delay: number): void {
    if (this.closed || this.sending || this.timer) return;
    const send = () => {
      this.timer = undefined;
      let delivered = false;
      this.sending = this.sendOnce()
        .then((ok) => void (delivered = ok))
        .finally(() => {
          this.sending = null;
          // More arrived while that batch was out: the next goes now; after a failure, a little later.
          if (this.queue.length) this.kick(delivered ? 0 : this.retryMs);
        });
    };
    this.timer = delay ? { kind: "retry", handle: setTimeout(send, delay) } : { kind: "now", handle: setImmediate(send) };
  }

  private cancelKick(): void {
    if (this.timer?.kind === "now") clearImmediate(this.timer.handle);
    else clearTimeout(this.timer?.handle);
    this.timer = undefined;
  }

  /** Sends the oldest batch; true when the queue moved on (delivered, or refused for good). */
  private async sendOnce(): Promise<boolean> {
    const batch = this.queue.slice(0, MAX_BATCH_EVENTS);
    if (!batch.length) return true;
    this.writeOutbox(); // nothing goes out that the outbox does not hold
    const outcome = await sendBatch(this.edge, this.jobId, this.attempt, batch);
    if (outcome === "unreachable") {
      this.unreachableSince ??= Date.now();
      return false;
    }
    if (this.unreachableSince !== null) {
      this.log(`job ${this.jobId}: the edge takes events again after ${Math.round((Date.now() - this.unreachableSince) / 1000)} s`);
      this.unreachableSince = null;
    }
    if (outcome !== "delivered") this.log(`job ${this.jobId}: the edge refused ${batch.length} event(s): ${outcome.refused}`);
    this.queue.splice(0, batch.length);
    this.dropNotice();
    return true;
  }

  /** Events still waiting for the edge. */
  get pending(): number {
    return this.queue.length;
  }

  /**
   * Sends everything still queued, trying again until `timeoutMs` (default: until it is done) or
   * until `giveUp` says so (the runner is stopping); true when nothing is left. The outbox file goes once all is delivered; otherwise it stays for
   * `replayOutbox` (the next start).
   */
  async drain(timeoutMs = Infinity, giveUp: () => boolean = () => false): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    this.closed = true; // from here on only this loop sends
    this.cancelKick();
    while (Date.now() < deadline && !giveUp()) {
      if (this.sending) await this.sending;
      if (!this.queue.length) break;
      const ok = await this.sendOnce();
      if (!ok) await new Promise((r) => setTimeout(r, this.retryMs));
    }
    const done = this.queue.length === 0;
    this.writeOutbox();
    if (done && this.outbox) rmSync(this.outbox, { force: true });
    else if (this.outbox)
      this.log(`job ${this.jobId}: ${this.queue.length} event(s) not delivered yet; kept in ${this.outbox} for the next start`);
    return done;
  }
}

/** One batch to the edge: delivered, refused for good (its reason), or the edge could not be reached (try again). */
async function sendBatch(
  edge: ServiceClient,
  jobId: string,
  attempt: number,
  events: EventBatchBody["events"],
): Promise<"delivered" | "unreachable" | { refused: string }> {
  try {
    await edge.call(workerEndpoints.workerJobEvents, { params: { job_id: jobId }, body: { attempt, events } });
    return "delivered";
  } catch (error) {
    if (error instanceof ServiceError && refusedForGood(error.status)) return { refused: `${error.status} ${error.detail}` };
    return "unreachable";
  }
}

/** Where a job attempt's outbox lives under a runner's work directory. */
export function outboxPath(workDir: string, jobId: string, attempt: number): string {
  return join(workDir, "outbox", `${jobId}.attempt-${attempt}.jsonl`);
}

/**
 * Sends the outboxes a previous run of the runner left (events its jobs printed while the edge was
 * away), each a job attempt's events in order; a file goes once delivered, or refused for good.
 * The edge stores an event once, so events delivered before are skipped there. Answers how many
 * files are left for a later try (the edge still away).
 */
export async function replayOutbox(
  edge: ServiceClient,
  workDir: string,
  log: (line: string) => void,
  skip: ReadonlySet<string> = new Set(),
): Promise<number> {
  const dir = join(workDir, "outbox");
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => /^.+\.attempt-\d+\.jsonl$/.test(n));
  } catch {
    return 0;
  }
  let left = 0;
  for (const name of names) {
    const match = /^(.+)\.attempt-(\d+)\.jsonl$/.exec(name)!;
    const [jobId, attempt] = [match[1]!, Number(match[2])];
    if (skip.has(`${jobId}#${attempt}`)) continue; // its shipper is still running
    const file = join(dir, name);
    const events = readFileSync(file, "utf8")
      .split("\n")
      .filter(Boolean)
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as EventBatchBody["events"][number]];
        } catch {
          return []; // a line cut by a crash mid-write
        }
      });
    let outcome: Awaited<ReturnType<typeof sendBatch>> = "delivered";
    for (let i = 0; i < events.length && outcome !== "unreachable"; i += MAX_BATCH_EVENTS) {
      outcome = await sendBatch(edge, jobId, attempt, events.slice(i, i + MAX_BATCH_EVENTS));
      if (typeof outcome === "object")
        log(`job ${jobId}: the edge refused events of attempt ${attempt} from the outbox: ${outcome.refused}`);
    }
    if (outcome === "unreachable") left++;
    else {
      rmSync(file, { force: true });
      log(`job ${jobId}: ${events.length} event(s) of attempt ${attempt} kept from before the runner's restart sent`);
    }
  }
  return left;
}
