import { DurableObject } from "cloudflare:workers";
import { readConfig } from "../config";
import { openDatabase, type Database } from "../db/client";
import type { Env } from "../env";
import { readEvents } from "./events";
import type { HubEvent } from "./hub-types";

/*
 * The events hub: one Durable Object per job that pushes the job's events live to every
 * watcher, as server-sent events or over a WebSocket (ARCHITECTURE "Events"). libSQL holds the
 * log; the hub only fans out. A watcher first gets the log from its starting index, then what
 * arrives live: it subscribes before reading, holds live events back while the log is replayed,
 * and then sends only those past the replay, so nothing is missed or sent twice.
 */

const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const KEEPALIVE_MS = 15_000;
const encoder = new TextEncoder();

interface Watcher {
  /** Next index this watcher needs. */
  next: number;
  /** Live events that arrived while the log was being replayed; null once live. */
  held: HubEvent[] | null;
  write(event: HubEvent): void;
  end(status: string): void;
  ping(): void;
}

export class EventsHub extends DurableObject<Env> {
  private readonly watchers = new Set<Watcher>();
  private keepalive: ReturnType<typeof setInterval> | null = null;
  private database: Database | null = null;

  private db(): Database {
    return (this.database ??= openDatabase(readConfig(this.env)));
  }

  /** New events of the job, in index order (from the route that stored them). */
  async publish(events: HubEvent[]): Promise<void> {
    for (const w of this.watchers) {
      if (w.held) w.held.push(...events);
      else for (const e of events) this.deliver(w, e);
    }
  }

  /** The job has ended: watchers get an `end` with its status and are closed. */
  async finish(status: string): Promise<void> {
    for (const w of [...this.watchers]) {
      if (w.held) continue; // still replaying: it reads the status itself when done
      w.end(status);
      this.drop(w);
    }
  }

  private deliver(w: Watcher, e: HubEvent): void {
    if (e.index < w.next) return;
    w.write(e);
    w.next = e.index + 1;
  }

  private drop(w: Watcher): void {
    this.watchers.delete(w);
    if (this.watchers.size === 0 && this.keepalive) {
      clearInterval(this.keepalive);
      this.keepalive = null;
    }
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const jobId = url.searchParams.get("job_id") ?? "";
    const since = Number(url.searchParams.get("since") ?? 0);
    let watcher: Watcher;
    let response: Response;
    if (request.headers.get("upgrade")?.toLowerCase() === "websocket") {
      const pair = new WebSocketPair();
      const socket = pair[1];
      socket.accept();
      watcher = {
        next: since,
        held: [],
        write: (e) => socket.send(JSON.stringify(e)),
        end: (status) => {
          socket.send(JSON.stringify({ type: "end", status }));
          socket.close(1000, `job ${status}`);
        },
        ping: () => {},
      };
      socket.addEventListener("close", () => this.drop(watcher));
      socket.addEventListener("error", () => this.drop(watcher));
      response = new Response(null, { status: 101, webSocket: pair[0] });
    } else {
      const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
      const writer = writable.getWriter();
      const send = (text: string) => writer.write(encoder.encode(text)).catch(() => this.drop(watcher));
      watcher = {
        next: since,
        held: [],
        write: (e) => void send(`id: ${e.index}\ndata: ${JSON.stringify(e)}\n\n`),
        end: (status) => {
          void send(`event: end\ndata: ${JSON.stringify({ status })}\n\n`);
          void writer.close().catch(() => {});
        },
        ping: () => void send(": keep-alive\n\n"),
      };
      void send("retry: 2000\n\n");
      response = new Response(readable, { headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", "x-accel-buffering": "no" } });
    }
    this.watchers.add(watcher);
    this.keepalive ??= setInterval(() => {
      for (const w of this.watchers) w.ping();
    }, KEEPALIVE_MS);
    void this.replay(watcher, jobId);
    return response;
  }

  private async replay(w: Watcher, jobId: string): Promise<void> {
    try {
      let status = "";
      for (;;) {
        const page = await readEvents(this.db(), jobId, w.next, 1000);
        status = page.status;
        for (const e of page.events) this.deliver(w, e as HubEvent);
        if (page.events.length < 1000) break;
      }
      for (const e of w.held ?? []) this.deliver(w, e);
      w.held = null;
      if (TERMINAL.has(status)) {
        w.end(status);
        this.drop(w);
      }
    } catch {
      w.end("unknown");
      this.drop(w);
    }
  }
}
