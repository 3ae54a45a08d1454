import { KEEPALIVE_MS } from "../config";
import type { Database } from "../db/client";
import { boundedWriter, type BoundedWriter } from "./bounded-writer";
import { releaseWatcher, renewWatchers } from "./watchers";

/*
 * What every live stream's Durable Object shares (the per-job events hub, the queue hub): the set
 * of its watchers with their leases in event_watchers (watchers.ts), renewed by one keep-alive
 * while any watcher is connected and released when one goes; and a server-sent events stream per
 * watcher that gives up a reader that falls too far behind or stops reading.
 */

/** A connected watcher: its lease id and its keep-alive. */
export interface LeasedWatcher {
  id: string;
  ping(): void;
}

/**
 * The watchers of one object. `add` starts the keep-alive (ping each, renew their leases);
 * `drop` releases a watcher's lease and stops the keep-alive with the last one.
 *
 * @example
 * private readonly watchers = new LiveWatchers<Watcher>(() => this.db());
 */
export class LiveWatchers<W extends LeasedWatcher> implements Iterable<W> {
  private readonly watchers = new Set<W>();
  private keepalive: ReturnType<typeof setInterval> | null = null;

  constructor(
    private readonly db: () => Database,
    private readonly keepAliveMs: () => number = () => KEEPALIVE_MS,
  ) {}

  get size(): number {
    return this.watchers.size;
  }

  has(watcher: W): boolean {
    return this.watchers.has(watcher);
  }

  [Symbol.iterator](): Iterator<W> {
    return this.watchers[Symbol.iterator]();
  }

  add(watcher: W): void {
    this.watchers.add(watcher);
    this.keepalive ??= setInterval(() => {
      for (const w of this.watchers) w.ping();
      void renewWatchers(
        this.db(),
        [...this.watchers].map((w) => w.id),
      ).catch(() => {});
    }, this.keepAliveMs());
  }

  drop(watcher: W): void {
    if (this.watchers.delete(watcher)) void releaseWatcher(this.db(), watcher.id).catch(() => {});
    if (this.watchers.size === 0 && this.keepalive) {
      clearInterval(this.keepalive);
      this.keepalive = null;
    }
  }
}

const encoder = new TextEncoder();

/** One watcher's server-sent events stream. */
export interface SseStream {
  response: Response;
  writer: BoundedWriter;
  /** Writes text as it is (an event, a comment). */
  send(text: string): boolean;
  /** The keep-alive: a comment, or - for a reader that has taken nothing for two keep-alives - the end. */
  ping(): void;
}

/**
 * A server-sent events stream whose reader is given up (`gone`, then the stream aborted) when it
 * falls `maxUnread` bytes behind (`slowReason` tells it what to do) or stops reading (nothing taken
 * for two keep-alives of `keepAliveMs`); `gone` also runs when the client disconnects.
 *
 * @example
 * const stream = sseStream(1024 * 1024, "reconnect and reload", () => this.watchers.drop(watcher));
 */
export function sseStream(maxUnread: number, slowReason: string, gone: () => void, keepAliveMs = KEEPALIVE_MS): SseStream {
  const { readable, writable } = sseBody();
  const writer = boundedWriter(writable, maxUnread, () => {
    gone();
    void writer.abort(`the client read too slowly; ${slowReason}`);
  });
  // The stream ended or the runtime reported the client gone (it may not: then the keep-alive's
  // stall check notices).
  void writer.closed.then(gone);
  const send = (text: string) => writer.write(encoder.encode(text));
  return {
    writer,
    send,
    ping: () => {
      if (writer.stalledFor() > 2 * keepAliveMs) {
        gone();
        void writer.abort("the client stopped reading");
      } else send(": keep-alive\n\n");
    },
    response: new Response(readable, {
      headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", "x-accel-buffering": "no" },
    }),
  };
}

/**
 * A live stream's body: workerd's native byte stream (IdentityTransformStream), whose chunks the
 * runtime moves to the connection itself. A response body that is a JavaScript stream
 * (TransformStream, ReadableStream) is pumped through a chain of promises that grows by two with
 * every chunk and is freed only when the stream ends (workerd 1.20260426, measured with heap
 * snapshots through its inspector: 3,204 pending promises after 1,600 writes, about 4 objects
 * and 100 bytes a chunk; none with this body): a follower held for hours kept every event's
 * promises, and the garbage collector traced them all at each collection. Each write still
 * settles once the reader has taken it (bounded-writer.ts; test/jobs/event-watchers.test.ts).
 */
export function sseBody(): { readable: ReadableStream<Uint8Array>; writable: WritableStream<Uint8Array> } {
  // A workerd global (this module is also type-checked beside Node's modules, which lack it).
  const { IdentityTransformStream } = globalThis as unknown as {
    IdentityTransformStream: new () => { readable: ReadableStream<Uint8Array>; writable: WritableStream<Uint8Array> };
  };
  return new IdentityTransformStream();
}

/** 429 for a watcher over a limit, in the API's error shape. */
export function tooManyWatchers(detail: string): Response {
  return Response.json({ detail, code: "too_many_watchers" }, { status: 429, headers: { "retry-after": "15" } });
}
