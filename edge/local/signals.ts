/**
 * Makes `handler` the only listener of each of `signals`, in place of whatever listened before
 * (Miniflare's exit hooks, which end the process at once). Ours goes on before the others come
 * off: with no listener left for a moment, Node closes the signal's watcher, and a signal it had
 * already caught but not yet dispatched is lost with it (a SIGTERM that came as `npm start`
 * finished starting left the service running; test/local/signals.test.ts).
 *
 * @example
 * takeSignals(["SIGINT", "SIGTERM"], (signal) => void stop(signal));
 */
export function takeSignals<S extends NodeJS.Signals>(signals: readonly S[], handler: (signal: S) => void): void {
  for (const signal of signals) {
    const ours = () => handler(signal);
    process.on(signal, ours);
    for (const other of process.listeners(signal)) if (other !== ours) process.removeListener(signal, other);
  }
}
