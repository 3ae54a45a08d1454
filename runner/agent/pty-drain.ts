import { closeSync, constants, openSync, readSync } from "node:fs";
import { StringDecoder } from "node:string_decoder";
import type { IPty } from "node-pty";

/*
 * A trainer's last lines must reach the runner: they are its final events. node-pty loses them in
 * two ways when the trainer exits right after printing (as the demo trainer and any stdout-JSON
 * trainer do) while the runner reads slowly (a busy box): Linux discards what is still buffered
 * in the PTY once the last slave descriptor closes, and node-pty destroys its reader 200 ms after
 * the process exits (DESTROY_SOCKET_TIMEOUT_MS in its unixTerminal.js) whatever is unread. No
 * option of node-pty covers this, so the runner holds a slave descriptor of its own for the life
 * of the trainer, and once the trainer has exited, reads what is left itself (non-blocking, until
 * EAGAIN: a read on the master first waits for the kernel's pending flip-buffer work, so what the
 * trainer wrote before it exited is all there) and only then lets go of the slave, so the reader
 * ends at EIO as usual.
 *
 * That drain happens the moment node-pty learns of the exit (its native waitpid calls `onexit`,
 * which sets `_boundClose` and arms the 200 ms timer), not when the timer fires: the timer only
 * covers a reader that never closes, and waiting it out made every job end 200 ms late (issue 31,
 * "Handover"). Once the slave is let go the reader ends at EIO at once, and node-pty's exit event
 * follows from that close, the timer cleared. It reaches into node-pty's private fields
 * (`_socket`, `_fd`, `_pty`, `_boundClose`); if they are missing (another node-pty version), it
 * does nothing and the old behaviour stays.
 */

interface PtyInternals {
  _socket?: { destroy: (...args: unknown[]) => unknown; once(event: "close", listener: () => void): unknown };
  _fd?: number;
  _pty?: string;
  _boundClose?: boolean;
}

/**
 * Makes sure `take` gets everything the process printed before its exit event, and that the exit
 * event comes as soon as that is read: call it right after `pty.spawn`, with the same function
 * given to `onData`.
 *
 * @example
 * const child = pty.spawn(file, args, options);
 * child.onData(take);
 * keepOutputUntilRead(child, take);
 */
export function keepOutputUntilRead(child: IPty, take: (data: string) => void): void {
  const internals = child as unknown as PtyInternals;
  const socket = internals._socket;
  if (!socket || typeof internals._fd !== "number" || typeof internals._pty !== "string") return;
  let slave: number | null;
  try {
    slave = openSync(internals._pty, constants.O_RDWR | constants.O_NOCTTY);
  } catch {
    return; // not reachable (a pty namespace of its own): the old behaviour
  }
  const destroy = socket.destroy.bind(socket);
  let drained = false;
  /** Reads what the PTY still holds, then lets go of the runner's slave so the reader ends at EIO. */
  const drain = () => {
    if (drained) return;
    drained = true;
    const decoder = new StringDecoder("utf8");
    const buffer = Buffer.alloc(64 * 1024);
    for (;;) {
      let n: number;
      try {
        n = readSync(internals._fd!, buffer, 0, buffer.length, null);
      } catch {
        break; // EAGAIN: nothing left (or the descriptor is gone)
      }
      if (n <= 0) break;
      take(decoder.write(buffer.subarray(0, n)));
    }
    const rest = decoder.end();
    if (rest) take(rest);
    closeSync(slave!);
    slave = null;
  };
  socket.destroy = (...args: unknown[]) => {
    if (drained) return destroy(...args);
    drain();
    // The reader now ends by itself (EIO); if it does not, node-pty's own destroy after 10 s.
    const timer = setTimeout(() => destroy(...args), 10_000);
    timer.unref();
    socket.once("close", () => clearTimeout(timer));
    return undefined;
  };
  // node-pty's onexit sets `_boundClose` when the process has exited and its reader is still open.
  if (typeof internals._boundClose !== "boolean") return;
  let boundClose = internals._boundClose;
  Object.defineProperty(child, "_boundClose", {
    configurable: true,
    enumerable: true,
    get: () => boundClose,
    set: (value: boolean) => {
      boundClose = value;
      // After onexit has armed its timer and listens for the reader's close: then drain.
      if (value) queueMicrotask(() => socket.destroy());
    },
  });
}
