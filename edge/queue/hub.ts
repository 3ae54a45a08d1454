import { DurableObject } from "cloudflare:workers";
import { readConfig } from "../config";
import { openDatabase, type Database } from "../db/client";
import type { Env } from "../env";
import { LiveWatchers, sseStream, tooManyWatchers, type LeasedWatcher } from "../jobs/live-watchers";
import { claimWatcher, tooManyStreamsDetail } from "../jobs/watchers";
import type { QueueChange } from "../jobs/objects";

/*
 * The queue hub: one Durable Object (named "main") that tells every watcher of the queue, as
 * server-sent events, that jobs changed status (GET /api/queue/changes), so the dashboard reloads
 * what it shows when something happened instead of polling. applyEffects calls `changed` for
 * every transition. Only ids and statuses travel: they are public in the queue listing, and a
 * watcher reads anything more through the API, with its own access. Nothing is replayed: a
 * watcher that reconnects reloads its view, which is the state all missed changes led to.
 * Each watcher holds a lease in event_watchers (job id "queue"), so these streams count toward
 * a user's LIVE_STREAMS_PER_USER live streams with the job event streams (edge/jobs/live-watchers.ts:
 * the same leases, keep-alive and stream as the per-job events hub).
 */

/** Unread bytes a watcher may hold before it is given up (thousands of changes; it reconnects and reloads). */
const MAX_UNREAD_BYTES = 1024 * 1024;
/** The lease's job id in event_watchers. */
const QUEUE_WATCH_ID = "queue";

interface Watcher extends LeasedWatcher {
  send(text: string): void;
}

export class QueueHub extends DurableObject<Env> {
  private readonly watchers = new LiveWatchers<Watcher>(
    () => this.db(),
    () => readConfig(this.env).keepAliveMs,
  );
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

  /** A new watcher (the route checked the caller): `ready`, then `change` events and keep-alive comments. */
  override async fetch(request: Request): Promise<Response> {
    const userId = Number(new URL(request.url).searchParams.get("user_id") ?? 0);
    const id = crypto.randomUUID();
    const perUser = readConfig(this.env).streamsPerUser;
    if (!(await claimWatcher(this.db(), { id, userId, jobId: QUEUE_WATCH_ID }, perUser)))
      return tooManyWatchers(tooManyStreamsDetail(perUser, "reload GET /api/queue"));
    const stream = sseStream(MAX_UNREAD_BYTES, "reconnect and reload", () => this.watchers.drop(watcher), readConfig(this.env).keepAliveMs);
    const watcher: Watcher = { id, send: (text) => void stream.send(text), ping: stream.ping };
    stream.send(`retry: 2000\n\nevent: ready\ndata: ${JSON.stringify({ at: new Date().toISOString() })}\n\n`);
    this.watchers.add(watcher);
    return stream.response;
  }
}
