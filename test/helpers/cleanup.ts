import type { ChildProcess } from "node:child_process";

/*
 * What a test file started and must stop whatever its outcome: a stack (workerd, libSQL, its
 * runner), a runner process, a migrated database. The helper that starts one registers its stop
 * here (`stopWhenDone`); test/helpers/setup.ts, vitest's setup file, stops whatever is still
 * running once the file's own hooks are done, so a test or a beforeAll that failed (or timed out
 * while a stack was starting) leaves nothing behind.
 */

const running = new Set<() => Promise<void>>();
const starting = new Set<Promise<unknown>>();

/**
 * Registers `stop` to run at the end of the file if nobody ran it before; returns the stop to
 * call instead, which runs once however often it is called and then forgets the registration.
 *
 * @example
 * const stop = stopWhenDone(() => server.close());
 */
export function stopWhenDone(stop: () => void | Promise<void>): () => Promise<void> {
  let stopped: Promise<void> | null = null;
  const once = () => {
    running.delete(once);
    // Called now (a synchronous stop has happened when this returns), awaited by whoever wants.
    return (stopped ??= (async () => void (await stop()))());
  };
  running.add(once);
  return once;
}

/** Follows a start still under way, so that the end of the file waits for it (and then stops what it started). */
export function tracked<T>(start: Promise<T>): Promise<T> {
  starting.add(start);
  const forget = () => void starting.delete(start);
  start.then(forget, forget);
  return start;
}

/** Waits for the starts under way, then stops everything still registered (each failure reported, none skipped). */
export async function stopLeftRunning(): Promise<void> {
  await Promise.allSettled([...starting]);
  const failures: unknown[] = [];
  for (const stop of [...running].reverse()) await stop().catch((error: unknown) => failures.push(error));
  if (failures.length) throw new AggregateError(failures, `${failures.length} thing(s) left running failed to stop`);
}

/** How many things are registered and not stopped (for the test of this helper). */
export const leftRunning = (): number => running.size;

/**
 * Registers a child process (`npm start`, a runner build) to be ended at the end of the file if it
 * is still running then: SIGTERM, and SIGKILL after `graceMs`. Returns the child.
 *
 * @example
 * const service = endWhenDone(spawn(process.execPath, ["--import", "tsx", "edge/local/main.ts"], options));
 */
export function endWhenDone<C extends ChildProcess>(child: C, graceMs = 10_000): C {
  stopWhenDone(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    const killed = setTimeout(() => child.kill("SIGKILL"), graceMs);
    await exited;
    clearTimeout(killed);
  });
  return child;
}
