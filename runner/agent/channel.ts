import WebSocket from "ws";
import type { ServiceClient } from "../../shared/client/client";
import { workerEndpoints } from "../../shared/client/endpoints-workers";

/**
 * The runner's end of the worker channel (GET /api/workers/channel): a WebSocket on which the
 * edge says `wake` when work is waiting. Kept open for the runner's life: reconnected with
 * backoff (1 s doubling to 30 s) whenever it drops, pinged every 30 s so idle proxies keep it.
 * Each (re)connection also counts as a wake-up, to pick up anything sent while it was down.
 */
export class WakeChannel {
  private socket: WebSocket | null = null;
  private retryMs = 1000;
  private timer: NodeJS.Timeout | undefined;
  private pinger: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly edge: ServiceClient,
    private readonly onWake: () => void,
    private readonly log: (line: string) => void,
  ) {}

  open(): void {
    if (this.closed) return;
    const target = this.edge.url(workerEndpoints.workerChannel, {});
    target.protocol = target.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(target, { headers: this.edge.authHeaders() });
    this.socket = socket;
    socket.on("open", () => {
      this.retryMs = 1000;
      this.pinger = setInterval(() => socket.readyState === WebSocket.OPEN && socket.send("ping"), 30_000);
      this.pinger.unref();
      this.onWake();
    });
    socket.on("message", (data) => {
      if (String(data) === "wake") this.onWake();
    });
    socket.on("unexpected-response", (_req, res) => {
      this.log(`wake channel refused (${res.statusCode}); asking for work on the regular schedule`);
    });
    socket.on("error", () => {}); // "close" follows and handles it
    socket.on("close", () => {
      clearInterval(this.pinger);
      if (this.closed) return;
      this.timer = setTimeout(() => this.open(), this.retryMs);
      this.timer.unref();
      this.retryMs = Math.min(30_000, this.retryMs * 2);
    });
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    this.socket?.terminate();
  }
}
