import { DurableObject } from "cloudflare:workers";
import type { z } from "@hono/zod-openapi";
import type { ChannelCommands } from "../../shared/schemas/workers";
import type { Env } from "../env";

type ChannelCommandsBody = z.infer<typeof ChannelCommands>;

/*
 * The worker channel: one Durable Object per worker holding its runner's WebSocket, so the edge
 * can tell the runner "ask for work now" the moment a job is assigned to it or a command for its
 * trainer is waiting (no polling delay), and hand it that command. It carries no state of its own:
 * the runner then fetches assignments and commands as always, so a lost wake-up only costs the
 * runner's next regular ask. Hibernatable sockets: an idle channel costs nothing.
 */
export class WorkerChannel extends DurableObject<Env> {
  /**
   * Wakes every runner connected for this worker. `commands` (new trainer commands) go first, in a
   * message of their own (ChannelCommands): the runner hands them to its trainers at once instead
   * of after its heartbeat's round trip, and a runner that does not read them still wakes.
   */
  async notify(commands: ChannelCommandsBody["commands"] = []): Promise<number> {
    const sockets = this.ctx.getWebSockets();
    const message = commands.length ? JSON.stringify({ commands } satisfies ChannelCommandsBody) : null;
    for (const socket of sockets) {
      try {
        if (message) socket.send(message);
        socket.send("wake");
      } catch {
        // closing: it will reconnect and ask anyway
      }
    }
    return sockets.length;
  }

  /**
   * Closes every connected runner's socket (1008, policy violation): its worker was removed or
   * its token replaced, and a socket opened with the old token must not outlive it.
   */
  async disconnect(reason: string): Promise<number> {
    const sockets = this.ctx.getWebSockets();
    for (const socket of sockets) {
      try {
        socket.close(1008, reason);
      } catch {
        // already closed
      }
    }
    return sockets.length;
  }

  override async fetch(request: Request): Promise<Response> {
    if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") return new Response("expected a WebSocket upgrade", { status: 426 });
    const pair = new WebSocketPair();
    this.ctx.acceptWebSocket(pair[1]);
    return new Response(null, { status: 101, webSocket: pair[0] });
  }

  override async webSocketMessage(socket: WebSocket, message: string | ArrayBuffer): Promise<void> {
    if (message === "ping") socket.send("pong");
  }

  override async webSocketClose(socket: WebSocket, code: number): Promise<void> {
    try {
      socket.close(code === 1005 ? 1000 : code, "closing");
    } catch {
      // already closed
    }
  }
}
