import { DurableObject } from "cloudflare:workers";
import { readConfig } from "../config";
import { openDatabase, type Database } from "../db/client";
import type { Env } from "../env";
import { boundedWriter } from "../jobs/bounded-writer";
import { claimWatcher, MAX_WATCHERS_PER_USER, releaseWatcher, renewWatchers } from "../jobs/watchers";
import type { QueueChange } from "./hub-types";

/*
 * The queue hub: one Durable Object (named "main") that tells every watcher of the queue, as
 * server-sent events, that jobs changed status (GET /api/queue/changes), so the dashboard reloads
 * what it shows when something happened instead of polling. applyEffects calls `changed` for
 * every transition. Only ids and statuses travel: they are public in the queue listing, and a
 * watcher reads anything more through the API, with its own access. Nothing is replayed: a
 * watcher that reconnects reloads its view, which is the state all missed changes led to.
 * Each watcher holds a lease in event_watchers (job id "queue"), so these streams count toward
 * a user's MAX_WATCHERS_PER_USER live streams with the job event streams.
 */

const KEEPALIVE_MS = 15_000;
/** Unread bytes a watcher may hold before it is given up (thousands of changes; it reconnects and reloads). */
const MAX_UNREAD_BYTES = 1024 * 1024;
/** The lease's job id in event_watchers. */
const QUEUE_WATCH_ID = "queue";
const encoder = new TextEncoder();

interface Watcher {
  /** Its lease in event_watchers. */
  id: string;
  send(text: string): void;
  ping(): void;
}

export class QueueHub extends DurableObject<Env> {
  private readonly watchers = new Set<Watcher>();
  private keepalive: ReturnType<typeof setInterval> | null = null;
  private database: Database | null = null;

  private db(): Database {
    return (this.database ??= openDatabase(readConfig(this.env)));
  }

  /** Jobs changed status: one `change` event to every watcher. */
  async changed(jobs: QueueChange[]): Promise<void> {
    if (!jobs.length || !this.watchers.size) return;
    const data = { jobs: jobs.map((j) => ({ job_id: j.job_id, from: j.from, to: j.to })), at: new Date().toISOString() };
    const text = `event: change\ndata: ${JSON.stringify(data)}\n\n`;
    for (const w of this.watchers) w.send(text);
  }

  private drop(w: Watcher): void {
    if (this.watchers.delete(w)) void releaseWatcher(this.db(), w.id).catch(() => {});
    if (this.watchers.size === 0 && this.keepalive) {
      clearInterval(this.keepalive);
      this.keepalive = null;
    }
  }

  /** A new watcher (the route checked the caller): `ready`, then `change` events and keep-alive comments. */
  override async fetch(request: Request): Promise<Response> {
    const userId = Number(new URL(request.url).searchParams.get("user_id") ?? 0);
    const id = crypto.randomUUID();
    if (!(await claimWatcher(this.db(), { id, userId, jobId: QUEUE_WATCH_ID })))
      return Response.json(
        {
          detail: `You already have ${MAX_WATCHERS_PER_USER} live event streams, the most one user has: close one, or reload GET /api/queue`,
          code: "too_many_watchers",
        },
        { status: 429, headers: { "retry-after": "15" } },
      );
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const writer = boundedWriter(writable, MAX_UNREAD_BYTES, () => {
      this.drop(watcher);
      void writer.abort("the client read too slowly; reconnect and reload");
    });
    void writer.closed.then(() => this.drop(watcher));
    const send = (text: string) => void writer.write(encoder.encode(text));
    const watcher: Watcher = {
      id,
      send,
      ping: () => {
        // A reader that has taken nothing for two keep-alives is gone (or too slow to keep).
        if (writer.stalledFor() > 2 * KEEPALIVE_MS) {
          this.drop(watcher);
          void writer.abort("the client stopped reading");
        } else send(": keep-alive\n\n");
      },
    };
    send(`retry: 2000\n\nevent: ready\ndata: ${JSON.stringify({ at: new Date().toISOString() })}\n\n`);
    this.watchers.add(watcher);
    this.keepalive ??= setInterval(() => {
      for (const w of this.watchers) w.ping();
      void renewWatchers(
        this.db(),
        [...this.watchers].map((w) => w.id),
      ).catch(() => {});
    }, KEEPALIVE_MS);
    return new Response(readable, {
      headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", "x-accel-buffering": "no" },
    });
  }
}
