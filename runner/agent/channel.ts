import WebSocket from "ws";
import type { ServiceClient } from "../../shared/client/client";
import { workerEndpoints } from "../../shared/client/endpoints-workers";
import { ChannelCommands } from "../../shared/schemas/workers";
import type { HeartbeatAnswer } from "./edge-client";

/**
 * The runner's end of the worker channel (GET /api/workers/channel): a WebSocket on which the
 * edge says `wake` when work is waiting, and hands over a new trainer command ahead of its wake.
 * Kept open for the runner's life: reconnected with backoff (1 s doubling to 30 s) whenever it
 * drops, pinged every 30 s so idle proxies keep it.
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
    private readonly onCommands: (commands: HeartbeatAnswer["commands"]) => void = () => {},
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
      const text = String(data);
      if (text === "wake") this.onWake();
      else if (text.startsWith("{")) this.takeCommands(text);
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

  /** New trainer commands, ahead of their `wake`; anything but ChannelCommands is ignored (the heartbeat brings them anyway). */
  private takeCommands(text: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return;
    }
    const message = ChannelCommands.safeParse(parsed);
    if (message.success && message.data.commands.length) this.onCommands(message.data.commands);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    this.socket?.terminate();
  }
}
