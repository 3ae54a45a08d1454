import { DurableObject } from "cloudflare:workers";
import { readConfig } from "../config";
import { openDatabase, type Database } from "../db/client";
import type { Env } from "../env";
import { readEvents, summariseDroppedEvents } from "./events";
import { LiveWatchers, sseStream, tooManyWatchers } from "./live-watchers";
import { claimWatcher, MAX_WATCHERS_PER_JOB, tooManyStreamsDetail } from "./watchers";
import type { DeliveryPage, HubEvent, RetryDetail } from "./hub-types";
import type { WebhookDelivery } from "../../shared/schemas/deliveries";
import { getSetting } from "../settings-store";
import { abortEndedUploads } from "../storage/sweep";
import { RETRY_DELAYS_SECONDS, sendWebhook, signingSecret } from "../webhooks/delivery";
import { lifecycleOf, webhookConfig, type WebhookConfig } from "../webhooks/lifecycle";

/*
 * The events hub: one Durable Object per job that pushes the job's events live to every
 * watcher, as server-sent events or over a WebSocket. libSQL holds the
 * log; the hub only fans out. A watcher first gets the log from its starting index, then what
 * arrives live: it subscribes before reading, holds live events back while the log is replayed,
 * and then sends only those past the replay, so nothing is missed or sent twice.
 */

const TERMINAL = new Set(["completed", "failed", "cancelled"]);

interface Watcher {
  /** Its lease in event_watchers (watchers.ts). */
  id: string;
  /** Next index this watcher needs. */
  next: number;
  /** Live events that arrived while the log was being replayed; null once live. */
  held: HubEvent[] | null;
  /** The job ended while this watcher was still replaying: end it when the replay is done. */
  endedWhileReplaying?: string;
  /** Sends events, in index order, that the watcher has not had yet. */
  write(events: HubEvent[]): void;
  end(status: string): void;
  ping(): void;
  /** Resolves when the watcher has read enough of what was sent (a replay waits between pages). */
  drained(): Promise<void>;
}

/**
 * An event's server-sent events frame, made once however many watchers it goes to (a job's
 * watchers all get the same text) rather than once per watcher.
 */
const frames = new WeakMap<HubEvent, string>();
function sseFrame(e: HubEvent): string {
  let frame = frames.get(e);
  if (frame === undefined) frames.set(e, (frame = `id: ${e.index}\ndata: ${JSON.stringify(e)}\n\n`));
  return frame;
}

/** Frames are joined into writes of about this many bytes (and one event's more at most). */
const WRITE_BYTES = 64 * 1024;

/**
 * Events as server-sent events text, in writes of about WRITE_BYTES: a batch of a thousand
 * events is a handful of stream chunks instead of a thousand, each of which every layer between
 * here and the reader (workerd's stream, the HTTP connection, the reader's parser) handles on
 * its own.
 */
function sseWrites(events: HubEvent[]): string[] {
  const writes: string[] = [];
  let text = "";
  for (const e of events) {
    text += sseFrame(e);
    if (text.length >= WRITE_BYTES) (writes.push(text), (text = ""));
  }
  if (text) writes.push(text);
  return writes;
}

/** Unread bytes a server-sent events watcher may hold (a full event page and then some) before it is given up; it resumes with Last-Event-ID. */
export const MAX_UNREAD_BYTES = 4 * 1024 * 1024;

export class EventsHub extends DurableObject<Env> {
  private readonly watchers = new LiveWatchers<Watcher>(
    () => this.db(),
    () => readConfig(this.env).keepAliveMs,
  );
  /** Watchers whose lease is being taken (fetch awaits libSQL before adding them). */
  private connecting = 0;
  private database: Database | null = null;
  /** The job's webhook receivers, read once from its environment. */
  private hooks: Promise<WebhookConfig> | null = null;
  private lastProgressAt = 0;
  /** Progress not yet sent to receivers (throttled), and the last progress seen at all. */
  private latestProgress: Record<string, unknown> | null = null;
  private lastSeenProgress: Record<string, unknown> | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // The outbound webhook queue lives in this object's own storage: it survives restarts, and
    // the alarm works through it with backoff.
    ctx.storage.sql.exec(`CREATE TABLE IF NOT EXISTS deliveries (
      id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL, url TEXT NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL,
      secret TEXT, attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
      last_error TEXT, created_at TEXT NOT NULL, delivered_at TEXT)`);
  }

  private db(): Database {
    return (this.database ??= openDatabase(readConfig(this.env)));
  }

  /** New events of the job, in index order (from the route that stored them). */
  async publish(jobId: string, events: HubEvent[]): Promise<void> {
    for (const w of this.watchers) {
      if (w.held) w.held.push(...events);
      else this.deliver(w, events);
    }
    const messages: { type: string; data: Record<string, unknown> }[] = [];
    for (const e of events) {
      const message = lifecycleOf(e);
      if (!message) continue;
      if (message.type !== "job.progress") messages.push(message);
      else this.latestProgress = this.lastSeenProgress = message.data;
    }
    const config = await this.webhooks(jobId);
    if (!config.targets.length) return;
    // Progress at most once per reporting interval: the latest one when the interval has passed.
    if (this.latestProgress && Date.now() - this.lastProgressAt >= config.intervalSeconds * 1000) {
      messages.push({ type: "job.progress", data: this.latestProgress });
      this.latestProgress = null;
      this.lastProgressAt = Date.now();
    }
    await this.enqueue(jobId, config, messages);
  }

  /**
   * The job has ended: watchers get an `end` with its status and are closed; receivers are told
   * (`job.<status>`, with why when it failed or was cancelled).
   */
  async finish(jobId: string, status: string, detail: { error_message?: string | null } = {}): Promise<void> {
    // A log past its bounds says, last, how much it dropped (its watchers see that before `end`).
    const summary = await summariseDroppedEvents(this.db(), jobId).catch(() => null);
    if (summary) await this.publish(jobId, [summary]);
    for (const w of [...this.watchers]) {
      if (w.held) {
        w.endedWhileReplaying = status; // still replaying: ended right after it
        continue;
      }
      w.end(status);
      this.watchers.drop(w);
    }
    // Its storage credentials died with it: nobody can finish its open multipart uploads.
    await abortEndedUploads(this.db(), this.env.STORAGE, jobId).catch(() => {});
    const config = await this.webhooks(jobId);
    const data = { status, error_message: detail.error_message ?? null, last_progress: this.lastSeenProgress };
    await this.enqueue(jobId, config, [{ type: `job.${status}`, data }]);
  }

  /** The job's runner died and the job went back to the queue: receivers are told; watchers stay (the next attempt's events follow). */
  async retrying(jobId: string, retry: RetryDetail): Promise<void> {
    const data = { status: "pending", ...retry, last_progress: this.lastSeenProgress };
    await this.enqueue(jobId, await this.webhooks(jobId), [{ type: "job.retrying", data }]);
  }

  /** The job's outbound webhook deliveries with ids above `afterId`, oldest first, at most `limit` (GET /api/training/webhooks). */
  async deliveries(afterId: number, limit: number): Promise<DeliveryPage> {
    const rows = this.ctx.storage.sql
      .exec(
        "SELECT id, url, type, status, attempts, last_error, created_at, delivered_at FROM deliveries WHERE id > ? ORDER BY id LIMIT ?",
        afterId,
        limit + 1,
      )
      .toArray();
    const deliveries = rows.slice(0, limit).map((r) => ({
      id: Number(r.id),
      url: String(r.url),
      type: String(r.type),
      status: String(r.status) as WebhookDelivery["status"],
      attempts: Number(r.attempts),
      last_error: r.last_error === null ? null : String(r.last_error),
      created_at: String(r.created_at),
      delivered_at: r.delivered_at === null ? null : String(r.delivered_at),
    }));
    return { deliveries, more: rows.length > limit };
  }

  private webhooks(jobId: string): Promise<WebhookConfig> {
    this.hooks ??= this.db()
      // The job's own snapshot, as the runner gets it: later edits of the environment do not apply.
      .$client.execute({ sql: "SELECT config_snapshot AS config FROM queue_entries WHERE job_id = ?", args: [jobId] })
      .then((r) => webhookConfig(r.rows[0]?.config ? (JSON.parse(String(r.rows[0].config)) as Record<string, unknown>) : {}))
      .catch((error: unknown) => {
        this.hooks = null; // read again next time
        throw error;
      });
    return this.hooks;
  }

  private async enqueue(jobId: string, config: WebhookConfig, messages: { type: string; data: Record<string, unknown> }[]): Promise<void> {
    if (!config.targets.length || !messages.length) return;
    const now = new Date();
    for (const message of messages) {
      for (const target of config.targets) {
        const id = `msg_${crypto.randomUUID().replace(/-/g, "")}`;
        const body = JSON.stringify({ type: message.type, job_id: jobId, timestamp: now.toISOString(), data: message.data });
        this.ctx.storage.sql.exec(
          "INSERT INTO deliveries (message_id, url, type, body, secret, next_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
          id,
          target.url,
          message.type,
          body,
          target.secret,
          now.getTime(),
          now.toISOString(),
        );
      }
    }
    const alarm = await this.ctx.storage.getAlarm();
    if (alarm === null || alarm > now.getTime()) await this.ctx.storage.setAlarm(now.getTime());
  }

  /** Sends what is due, in order; failures come back after RETRY_DELAYS_SECONDS, then are given up. */
  override async alarm(): Promise<void> {
    const db = this.db();
    const [settings, serviceSecret] = await Promise.all([getSetting(db, "webhooks"), signingSecret(db)]);
    const due = this.ctx.storage.sql
      .exec(
        "SELECT id, message_id, url, body, secret, attempts FROM deliveries WHERE status = 'pending' AND next_at <= ? ORDER BY id LIMIT 100",
        Date.now(),
      )
      .toArray();
    for (const d of due) {
      const result = await sendWebhook(
        String(d.url),
        String(d.message_id),
        String(d.body),
        d.secret === null ? serviceSecret : String(d.secret),
        settings.allow_private_targets,
        this.env.WEBHOOK_OUTBOUND,
      );
      const attempts = Number(d.attempts) + 1;
      if (result.ok) {
        this.ctx.storage.sql.exec(
          "UPDATE deliveries SET status = 'delivered', attempts = ?, last_error = NULL, delivered_at = ? WHERE id = ?",
          attempts,
          new Date().toISOString(),
          d.id,
        );
      } else if (result.retry && attempts <= RETRY_DELAYS_SECONDS.length) {
        this.ctx.storage.sql.exec(
          "UPDATE deliveries SET attempts = ?, last_error = ?, next_at = ? WHERE id = ?",
          attempts,
          result.error,
          Date.now() + RETRY_DELAYS_SECONDS[attempts - 1]! * 1000,
          d.id,
        );
      } else {
        this.ctx.storage.sql.exec(
          "UPDATE deliveries SET status = ?, attempts = ?, last_error = ? WHERE id = ?",
          result.error.startsWith("refused:") ? "refused" : "failed",
          attempts,
          result.error,
          d.id,
        );
      }
    }
    const next = this.ctx.storage.sql.exec("SELECT MIN(next_at) AS at FROM deliveries WHERE status = 'pending'").one().at;
    if (next !== null) await this.ctx.storage.setAlarm(Math.max(Number(next), Date.now() + 10));
  }

  /** Sends a watcher those of `events` past what it has had, all in one write. */
  private deliver(w: Watcher, events: HubEvent[]): void {
    const fresh: HubEvent[] = [];
    for (const e of events) {
      if (e.index < w.next) continue;
      fresh.push(e);
      w.next = e.index + 1;
    }
    if (fresh.length) w.write(fresh);
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const jobId = url.searchParams.get("job_id") ?? "";
    const since = Number(url.searchParams.get("since") ?? 0);
    const userId = Number(url.searchParams.get("user_id") ?? 0);
    // Counted with the connects still taking their lease, so parallel ones cannot pass the limit.
    if (this.watchers.size + this.connecting >= MAX_WATCHERS_PER_JOB)
      return tooManyWatchers(
        `Job ${jobId} already has ${MAX_WATCHERS_PER_JOB} live watchers, the most one job has: close one, or poll GET /api/training/events`,
      );
    const id = crypto.randomUUID();
    this.connecting++;
    const perUser = readConfig(this.env).streamsPerUser;
    const leased = await claimWatcher(this.db(), { id, userId, jobId }, perUser).finally(() => this.connecting--);
    if (!leased) return tooManyWatchers(tooManyStreamsDetail(perUser, "poll GET /api/training/events"));
    let watcher: Watcher;
    let response: Response;
    if (request.headers.get("upgrade")?.toLowerCase() === "websocket") {
      const pair = new WebSocketPair();
      const socket = pair[1];
      socket.accept();
      // workerd's WebSocket shows no bufferedAmount: its watchers are bounded by count only.
      watcher = {
        id,
        next: since,
        held: [],
        drained: () => Promise.resolve(),
        write: (events) => {
          for (const e of events) socket.send(JSON.stringify(e));
        },
        end: (status) => {
          socket.send(JSON.stringify({ type: "end", status }));
          socket.close(1000, `job ${status}`);
        },
        ping: () => {},
      };
      socket.addEventListener("close", () => this.watchers.drop(watcher));
      socket.addEventListener("error", () => this.watchers.drop(watcher));
      response = new Response(null, { status: 101, webSocket: pair[0] });
    } else {
      // A reader that falls MAX_UNREAD_BYTES behind is given up rather than buffered for.
      const stream = sseStream(
        MAX_UNREAD_BYTES,
        "reconnect with Last-Event-ID",
        () => this.watchers.drop(watcher),
        readConfig(this.env).keepAliveMs,
      );
      watcher = {
        id,
        next: since,
        held: [],
        drained: () => stream.writer.drained(),
        write: (events) => {
          for (const text of sseWrites(events)) if (!stream.send(text)) return; // given up: it resumes from the log
        },
        end: (status) => {
          stream.send(`event: end\ndata: ${JSON.stringify({ status })}\n\n`);
          void stream.writer.close();
        },
        ping: stream.ping,
      };
      void stream.send("retry: 2000\n\n");
      response = stream.response;
    }
    this.watchers.add(watcher);
    void this.replay(watcher, jobId);
    return response;
  }

  private async replay(w: Watcher, jobId: string): Promise<void> {
    try {
      let status = "";
      for (;;) {
        const page = await readEvents(this.db(), jobId, w.next, 1000);
        status = page.status;
        this.deliver(w, page.events as HubEvent[]);
        if (!this.watchers.has(w)) return; // given up while replaying
        await w.drained();
        // A page may stop early at its byte cap: the log is replayed when a page comes back empty.
        if (page.events.length === 0) break;
      }
      this.deliver(w, w.held ?? []);
      w.held = null;
      const ended = w.endedWhileReplaying ?? (TERMINAL.has(status) ? status : null);
      if (ended) {
        w.end(ended);
        this.watchers.drop(w);
      }
    } catch {
      w.end("unknown");
      this.watchers.drop(w);
    }
  }
}
