import type { EdgeClient } from "./edge-client";
import { EdgeError } from "./edge-client";

// Terminal colour and cursor sequences, which trainers under a PTY like to print.
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g;

/**
 * A trainer output line as an event (trainer protocol): a JSON object with a string `type` is
 * an event as it is; any other non-empty line is a `log` event.
 */
export function lineToEvent(line: string): ({ type: string } & Record<string, unknown>) | null {
  const text = line.replace(ANSI, "").trimEnd();
  if (!text.trim()) return null;
  if (text.startsWith("{")) {
    try {
      const parsed = JSON.parse(text) as unknown;
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed) && typeof (parsed as { type?: unknown }).type === "string" && (parsed as { type: string }).type) {
        return parsed as { type: string } & Record<string, unknown>;
      }
    } catch {
      // not an event: a log line that happens to start with a brace
    }
  }
  return { type: "log", message: text.slice(0, 4000) };
}

/**
 * Ships one job attempt's events to the edge in order, in batches: whatever has gathered is sent
 * at most every `intervalMs`, up to 200 at a time, one batch in flight; a failed batch is sent
 * again (the edge skips events it already has). `drain` waits until everything is delivered.
 */
export class EventShipper {
  private queue: { seq: number; event: Record<string, unknown> }[] = [];
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly edge: EdgeClient,
    private readonly jobId: string,
    private readonly attempt: number,
    private readonly intervalMs = 100,
    private readonly log: (line: string) => void = () => {},
  ) {}

  push(event: Record<string, unknown>): void {
    this.queue.push({ seq: this.seq++, event });
    if (this.queue.length >= 200) this.kick(0);
    else this.kick(this.intervalMs);
  }

  private kick(delay: number): void {
    if (this.closed || this.sending || (this.timer && delay > 0)) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.sending = this.sendOnce().finally(() => {
        this.sending = null;
        if (this.queue.length) this.kick(this.intervalMs);
      });
    }, delay);
  }

  private async sendOnce(): Promise<void> {
    const batch = this.queue.slice(0, 200);
    if (!batch.length) return;
    try {
      await this.edge.post(`/api/workers/jobs/${encodeURIComponent(this.jobId)}/events`, { attempt: this.attempt, events: batch });
      this.queue.splice(0, batch.length);
    } catch (error) {
      if (error instanceof EdgeError && error.status >= 400 && error.status < 500) {
        // Refused for good (the job is no longer this worker's, or an event is too large): drop it.
        this.log(`job ${this.jobId}: the edge refused ${batch.length} event(s): ${error.detail}`);
        this.queue.splice(0, batch.length);
      }
      // Otherwise (network, 5xx) it stays queued and goes again on the next round.
    }
  }

  /** Sends everything still queued; gives up after `timeoutMs`. */
  async drain(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    clearTimeout(this.timer);
    this.timer = undefined;
    while (Date.now() < deadline) {
      if (this.sending) await this.sending;
      if (!this.queue.length) break;
      this.sending = this.sendOnce();
      await this.sending;
      this.sending = null;
      if (this.queue.length) await new Promise((r) => setTimeout(r, 200));
    }
    this.closed = true;
  }
}
