import { refusedForGood, type EventBatchBody } from "./edge-client";
import { ServiceError, type ServiceClient } from "../shared/client/client";
import { endpoints } from "../shared/client/endpoints";
import { fitEvent } from "./event-size";

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

/**
 * Ships one job attempt's events to the edge in order. One batch is in flight at a time: an event
 * that arrives while none is goes out at once (after the lines printed in the same tick), and
 * whatever gathers meanwhile goes in the next batch (up to 200), so latency stays low at a few
 * events a second and batches grow by themselves at thousands. A failed batch is sent again after
 * `retryMs` (the edge skips events it already has). `drain` waits until all are delivered.
 */
export class EventShipper {
  private queue: EventBatchBody["events"] = [];
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly edge: ServiceClient,
    private readonly jobId: string,
    private readonly attempt: number,
    private readonly retryMs = 500,
    private readonly log: (line: string) => void = () => {},
  ) {}

  /** Queues an event, fitted to the size the edge stores (event-size.ts): a batch the edge refused would be lost. */
  push(event: EventBatchBody["events"][number]["event"]): void {
    this.queue.push({ seq: this.seq++, event: fitEvent(event) });
    this.kick(0);
  }

  private kick(delay: number): void {
    if (this.closed || this.sending || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      let delivered = false;
      this.sending = this.sendOnce()
        .then((ok) => void (delivered = ok))
        .finally(() => {
          this.sending = null;
          // More arrived while that batch was out: the next goes now; after a failure, a little later.
          if (this.queue.length) this.kick(delivered ? 0 : this.retryMs);
        });
    }, delay);
  }

  /** Sends the oldest batch; true when the queue moved on (delivered, or refused for good). */
  private async sendOnce(): Promise<boolean> {
    const batch = this.queue.slice(0, 200);
    if (!batch.length) return true;
    try {
      const body: EventBatchBody = { attempt: this.attempt, events: batch };
      await this.edge.call(endpoints.workerJobEvents, { params: { job_id: this.jobId }, body });
      this.queue.splice(0, batch.length);
      return true;
    } catch (error) {
      if (error instanceof ServiceError && refusedForGood(error.status)) {
        // Refused for good (the job is no longer this worker's, or an event is too large): drop it.
        this.log(`job ${this.jobId}: the edge refused ${batch.length} event(s): ${error.detail}`);
        this.queue.splice(0, batch.length);
        return true;
      }
      // Otherwise (network, 5xx) it stays queued and goes again on the next round.
      return false;
    }
  }

  /** Sends everything still queued; gives up after `timeoutMs`. */
  async drain(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    this.closed = true; // from here on only this loop sends
    clearTimeout(this.timer);
    this.timer = undefined;
    while (Date.now() < deadline) {
      if (this.sending) await this.sending;
      if (!this.queue.length) break;
      const ok = await this.sendOnce();
      if (!ok) await new Promise((r) => setTimeout(r, this.retryMs));
    }
  }
}
