import { KEEPALIVE_MS } from "../config";
import type { Database } from "../db/client";
import { ApiError } from "../errors";
import { findActiveJob } from "./active-job";
import { sseBody } from "./live-watchers";
import { claimWatcher, releaseWatcher, renewWatchers, tooManyStreamsDetail } from "./watchers";

/*
 * An event stream opened before the caller has a job (GET /api/training/events/stream without
 * job_id, no job started yet). It answers at once and waits: it looks for the caller's active
 * job for events about once a second (one indexed read), and when one has started it hands over
 * to that job's events hub, so the client gets the job's events and its end exactly as if it had
 * connected after the start. Nothing starts within `waitMs` (at most shared/schemas/events.ts
 * MAX_WAIT_SECONDS): it ends, saying so.
 *
 * A waiting stream holds a watcher lease like a hub's watcher (edge/jobs/watchers.ts), so it
 * counts against the user's LIVE_STREAMS_PER_USER: waiting streams cannot be used to hold
 * unlimited connections. The lease is given back just before the hub takes its own.
 */

const POLL_MS = 1000;
/** The job_id of a waiting stream's lease: it watches no job yet. */
const WAITING = "(waiting for a job)";
const encoder = new TextEncoder();

// workerd's WebSocket API, declared for what is used here: the app is also type-checked
// without workerd's types (test/api/openapi.test.ts builds it under Node).
interface EdgeSocket {
  accept(): void;
  send(data: string | ArrayBuffer): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "message", listener: (event: { data: string | ArrayBuffer }) => void): void;
  addEventListener(type: "close", listener: (event: { code: number; reason: string }) => void): void;
  addEventListener(type: "error", listener: () => void): void;
}
const socketPair = () => new (globalThis as unknown as { WebSocketPair: new () => { 0: EdgeSocket; 1: EdgeSocket } }).WebSocketPair();
const socketOf = (response: Response | null) => (response as { webSocket?: EdgeSocket | null } | null)?.webSocket ?? null;

export interface WaitingStream {
  db: Database;
  /** The watcher's user (counted against `streamsPerUser`). */
  userId: number;
  /** The most live streams the user may hold (LIVE_STREAMS_PER_USER). */
  streamsPerUser: number;
  /** ownerScope of the caller: which jobs it may watch (null: anyone's). */
  scope: number | null;
  websocket: boolean;
  waitMs: number;
  /** The keep-alive period (LIVE_KEEPALIVE_SECONDS; default 15 s). */
  keepAliveMs?: number;
  /** Opens the job's events hub stream, as the route does for a job named or found. */
  open(jobId: string): Promise<Response>;
}

/**
 * Answers a stream request that found no job: an SSE stream or a WebSocket that waits for the
 * caller's next job to start and then carries its events. 429 `too_many_watchers` when the user
 * already holds `streamsPerUser` streams.
 *
 * @example
 * return waitForJob({ db, userId: 7, streamsPerUser: 10, scope: 7, websocket: false, waitMs: 300_000, open: (id) => hubOf(env, id).fetch(request(id)) });
 */
export async function waitForJob(w: WaitingStream): Promise<Response> {
  const lease = crypto.randomUUID();
  if (!(await claimWatcher(w.db, { id: lease, userId: w.userId, jobId: WAITING }, w.streamsPerUser))) {
    const detail = tooManyStreamsDetail(w.streamsPerUser, "poll GET /api/training/events");
    throw new ApiError(429, "too_many_watchers", detail, undefined, { "retry-after": "15" });
  }
  const release = () => releaseWatcher(w.db, lease).catch(() => {});
  return w.websocket ? waitOverWebSocket(w, lease, release) : waitOverSse(w, lease, release);
}

/** Polls until the caller's job has started (its id), the time is up or `gone()` (null). */
async function jobStarted(w: WaitingStream, lease: string, gone: () => boolean, keepAlive: () => void): Promise<string | null> {
  const deadline = Date.now() + w.waitMs;
  const keepAliveMs = w.keepAliveMs ?? KEEPALIVE_MS;
  let nextKeepAlive = Date.now() + keepAliveMs;
  while (!gone()) {
    const job = await findActiveJob(w.db, w.scope, "events").catch(() => null);
    if (job) return job.jobId;
    const now = Date.now();
    if (now >= deadline) return null;
    if (now >= nextKeepAlive) {
      nextKeepAlive = now + keepAliveMs;
      keepAlive();
      void renewWatchers(w.db, [lease]).catch(() => {});
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(POLL_MS, deadline - now)));
  }
  return null;
}

const endReason = (w: WaitingStream) =>
  `${w.scope === null ? "no job" : "no job of yours"} started within ${Math.round(w.waitMs / 1000)} s; connect again to go on waiting`;

function waitOverSse(w: WaitingStream, lease: string, release: () => Promise<void>): Response {
  const { readable, writable } = sseBody();
  const writer = writable.getWriter();
  let gone = false;
  // The reader went away (the client disconnected): writes fail and closed rejects.
  writer.closed.catch(() => (gone = true));
  let unread: Promise<unknown> = Promise.resolve();
  let taken = true;
  const send = (text: string) => {
    unread = writer.write(encoder.encode(text)).then(
      () => (taken = true),
      () => (gone = true),
    );
  };
  const keepAlive = () => {
    // A keep-alive still unread a whole period later: the reader is gone or not reading.
    if (!taken) gone = true;
    taken = false;
    send(": keep-alive\n\n");
  };
  send("retry: 2000\n\n: waiting for your next job to start\n\n");
  void (async () => {
    const jobId = await jobStarted(w, lease, () => gone, keepAlive);
    await release();
    if (gone) return void writer.abort("the client went away").catch(() => {});
    if (jobId === null) {
      send(`: ${endReason(w)}\n\n`);
      await unread;
      return void writer.close().catch(() => {});
    }
    const hub = await w.open(jobId).catch((error: unknown) => new Response(JSON.stringify({ detail: String(error) }), { status: 500 }));
    if (!hub.ok || !hub.body) {
      // The hub refused (a watcher limit reached while this stream waited): say why, and end.
      const detail = ((await hub.json().catch(() => ({}))) as { detail?: string }).detail ?? `status ${hub.status}`;
      send(`: job ${jobId} started, but its stream could not be opened: ${detail}\n\n`);
      await unread;
      return void writer.close().catch(() => {});
    }
    await unread;
    const reader = hub.body.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        await writer.write(value);
      }
      await writer.close();
    } catch {
      // The client went away: the hub's stream is cancelled, which frees its watcher's place.
      await reader.cancel().catch(() => {});
      await writer.abort("the client went away").catch(() => {});
    }
  })();
  return new Response(readable, {
    headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", "x-accel-buffering": "no" },
  });
}

function waitOverWebSocket(w: WaitingStream, lease: string, release: () => Promise<void>): Response {
  const pair = socketPair();
  const client = pair[0];
  const socket = pair[1];
  socket.accept();
  let gone = false;
  let hubSocket: EdgeSocket | null = null;
  socket.addEventListener("close", () => {
    gone = true;
    hubSocket?.close(1000, "the watcher went away");
  });
  socket.addEventListener("error", () => (gone = true));
  void (async () => {
    const jobId = await jobStarted(
      w,
      lease,
      () => gone,
      () => {},
    );
    await release();
    if (gone) return;
    if (jobId === null) return socket.close(1000, endReason(w).slice(0, 120));
    const hub = await w.open(jobId).catch(() => null);
    const remote = socketOf(hub);
    if (!remote) {
      const detail =
        ((await hub?.json().catch(() => ({}))) as { detail?: string } | undefined)?.detail ?? "the job's stream could not be opened";
      // 1013: try again later (a watcher limit was reached while this stream waited).
      return socket.close(1013, `job ${jobId}: ${detail}`.slice(0, 120));
    }
    remote.accept();
    hubSocket = remote;
    remote.addEventListener("message", (event) => socket.send(event.data));
    remote.addEventListener("close", (event) => socket.close(event.code === 1005 || event.code === 1006 ? 1000 : event.code, event.reason));
    remote.addEventListener("error", () => socket.close(1011, "the job's stream failed"));
    if (gone) remote.close(1000, "the watcher went away");
  })();
  return new Response(null, { status: 101, webSocket: client } as ResponseInit);
}
