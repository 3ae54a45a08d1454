/*
 * A stream writer that knows how much its reader has not taken yet. The events hub writes each
 * event to every watcher as it arrives; a watcher that reads slowly (or not at all) would make
 * the hub hold every event for it. Past `maxPending` unread bytes the watcher is given up
 * (`onOverflow`): it reconnects and resumes from its Last-Event-ID, reading the log from libSQL.
 */

export interface BoundedWriter {
  /** Writes `bytes` unless that would pass the cap: then calls onOverflow (once) and returns false. */
  write(bytes: Uint8Array): boolean;
  /** Resolves once at most half the cap is unread (a replay waits on it between pages). */
  drained(): Promise<void>;
  close(): Promise<void>;
  /** Ends the stream at once, dropping what is unread. */
  abort(reason: string): Promise<void>;
  /** Milliseconds the oldest unread write has waited (0: the reader has taken everything). */
  stalledFor(now?: number): number;
  /** Settles when the stream is closed or errored: the reader went away (the client disconnected) or it was ended here. */
  closed: Promise<void>;
}

/**
 * Wraps `writable` (whose write promises settle as the reader takes the bytes, as a
 * TransformStream's writable side does) with a cap on unread bytes.
 *
 * @example
 * const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
 * const out = boundedWriter(writable, 1024 * 1024, () => drop(watcher));
 * out.write(new TextEncoder().encode("data: {}\n\n"));
 */
export function boundedWriter(writable: WritableStream<Uint8Array>, maxPending: number, onOverflow: () => void): BoundedWriter {
  const writer = writable.getWriter();
  let pending = 0;
  // When each write still unread was made, oldest first (writes are taken in order).
  const since: number[] = [];
  let overflowed = false;
  let waiting: (() => void)[] = [];
  const overflow = () => {
    if (overflowed) return;
    overflowed = true;
    onOverflow();
  };
  const release = () => {
    if (pending > maxPending / 2) return;
    const ready = waiting;
    waiting = [];
    for (const resolve of ready) resolve();
  };
  return {
    write(bytes) {
      if (overflowed) return false;
      if (pending + bytes.byteLength > maxPending) {
        overflow();
        return false;
      }
      pending += bytes.byteLength;
      since.push(Date.now());
      writer.write(bytes).then(() => {
        since.shift();
        pending -= bytes.byteLength;
        release();
      }, overflow);
      return true;
    },
    drained() {
      if (overflowed || pending <= maxPending / 2) return Promise.resolve();
      return new Promise((resolve) => waiting.push(resolve));
    },
    stalledFor: (now = Date.now()) => (since.length ? now - since[0]! : 0),
    close: () => writer.close().catch(() => {}),
    closed: writer.closed.catch(() => {}),
    abort: async (reason) => {
      overflowed = true;
      release();
      for (const resolve of waiting.splice(0)) resolve();
      await writer.abort(new Error(reason)).catch(() => {});
    },
  };
}
