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
 * of the trainer, and when node-pty moves to destroy the reader after the exit, reads what is
 * left itself (non-blocking, until EAGAIN) and only then lets go of the slave, so the reader ends
 * at EIO as usual. It reaches into node-pty's private fields (`_socket`, `_fd`, `_pty`); if they
 * are missing (another node-pty version), it does nothing and the old behaviour stays.
 */

interface PtyInternals {
  _socket?: { destroy: (...args: unknown[]) => unknown; once(event: "close", listener: () => void): unknown };
  _fd?: number;
  _pty?: string;
}

/**
 * Makes sure `take` gets everything the process printed before its exit event: call it right
 * after `pty.spawn`, with the same function given to `onData`.
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
  socket.destroy = (...args: unknown[]) => {
    if (drained) return destroy(...args);
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
    // The reader now ends by itself (EIO); if it does not, node-pty's own destroy after 10 s.
    const timer = setTimeout(() => destroy(...args), 10_000);
    timer.unref();
    socket.once("close", () => clearTimeout(timer));
    return undefined;
  };
}
