import { spawn, type ChildProcess } from "node:child_process";

/** A runner started as its own process (runner/main.ts), and everything it has printed so far. */
export interface RunnerProcess {
  child: ChildProcess;
  output: string;
}

/**
 * Starts `runner start` against a test stack, as an operator would: the token in RUNNER_TOKEN,
 * work asked for rarely (the edge wakes it), a short stop grace; `args` adds its own flags
 * (--local, --config, --label, --work-dir ...). `onOutput` also gets each chunk it prints.
 *
 * @example
 * const runner = spawnRunner(t.base, token, ["--config", file, "--label", "box=a"]);
 * await until("it registers", async () => runner.output.includes("registered as worker"));
 */
export function spawnRunner(
  base: string,
  token: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; onOutput?: (text: string) => void } = {},
): RunnerProcess {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "runner/main.ts", "start", "--url", base, ...args, "--poll-ms", "60000", "--stop-grace-seconds", "2"],
    { env: { ...process.env, RUNNER_TOKEN: token, ...options.env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  const runner: RunnerProcess = { child, output: "" };
  const collect = (d: Buffer) => {
    runner.output += d.toString();
    options.onOutput?.(d.toString());
  };
  child.stdout!.on("data", collect);
  child.stderr!.on("data", collect);
  return runner;
}
