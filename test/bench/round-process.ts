// A benchmark's closed-loop clients (lib.ts round) in a process of their own, so that the times
// they measure are the service's and their own, not held up by other work of the benchmark's
// process: bench:followers parses 1,000 event streams and feeds 100 jobs in its own, and its
// submits' p99 counted that process's event-loop delays. Forked with an IPC channel
// (`roundProcess` below); each message runs one round and answers it.
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { round, type Round } from "./lib";

interface RoundMessage {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  concurrency: number;
  seconds: number;
}

/** The clients' process: `pid` (its CPU is read from /proc by the caller), `run` sends one round to it, `stop` ends it. */
export interface RoundProcess {
  pid: number;
  run(message: RoundMessage): Promise<Round>;
  stop(): void;
}

/**
 * Starts the clients' process (Node with tsx, as the benchmarks run).
 *
 * @example
 * const clients = roundProcess();
 * const idle = await clients.run({ url, method: "POST", headers, body, concurrency: 8, seconds: 15 });
 */
export function roundProcess(): RoundProcess {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [], { execArgv: ["--import", "tsx"], stdio: "inherit" });
  return {
    pid: child.pid!,
    run: (message) =>
      new Promise<Round>((resolve, reject) => {
        const failed = (code: number | null) => reject(new Error(`the clients' process exited (${code}) during a round`));
        child.once("exit", failed);
        child.once("message", (reply: Round | { error: string }) => {
          child.off("exit", failed);
          if ("error" in reply) reject(new Error(reply.error));
          else resolve(reply);
        });
        child.send(message);
      }),
    stop: () => child.kill(),
  };
}

// In the forked process: one round per message.
if (process.send && process.argv[1] === fileURLToPath(import.meta.url)) {
  process.on("message", (m: RoundMessage) => {
    const body = m.body;
    round({ url: m.url, method: m.method, headers: m.headers, body: body === undefined ? undefined : () => body }, m).then(
      (r) => process.send!(r),
      (e: Error) => process.send!({ error: String(e.message ?? e) }),
    );
  });
}
