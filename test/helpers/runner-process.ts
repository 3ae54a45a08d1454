import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { endWhenDone } from "./cleanup";
import type { Credentials, TestStack } from "./stack";

/** A runner started as its own process (runner/agent/main.ts), and everything it has printed so far. */
export interface RunnerProcess {
  child: ChildProcess;
  output: string;
}

/**
 * Starts `runner start` against a test stack, as an operator would: the token in RUNNER_TOKEN,
 * work asked for rarely (the edge wakes it), a short stop grace; `args` adds its own flags
 * (--local, --config, --label, --work-dir ...); `pollMs` makes it heartbeat more often. `onOutput` also gets each chunk it prints. It is
 * stopped at the end of the file if the test has not stopped it (test/helpers/cleanup.ts).
 *
 * @example
 * const runner = spawnRunner(t.base, token, ["--config", file, "--label", "box=a"]);
 * await until("it registers", async () => runner.output.includes("registered as worker"));
 */
export function spawnRunner(
  base: string,
  token: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; onOutput?: (text: string) => void; pollMs?: number } = {},
): RunnerProcess {
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      "runner/agent/main.ts",
      "start",
      "--url",
      base,
      ...args,
      "--poll-ms",
      String(options.pollMs ?? 60_000),
      "--stop-grace-seconds",
      "2",
    ],
    { env: { ...process.env, RUNNER_TOKEN: token, ...options.env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  // A runner the test did not stop (it failed first) is stopped at the end of the file.
  endWhenDone(child);
  const runner: RunnerProcess = { child, output: "" };
  const collect = (d: Buffer) => {
    runner.output += d.toString();
    options.onOutput?.(d.toString());
  };
  child.stdout!.on("data", collect);
  child.stderr!.on("data", collect);
  return runner;
}

/** Stops a runner started by spawnRunner (SIGTERM, as systemd would) and waits for it to exit; nothing if it already has. */
export async function stopRunner(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

/**
 * A remote box as an operator sets one up: an admin creates worker `box-<name>` (its token comes
 * back once), its runner config goes to `<dir>/<name>.json`, and its runner starts taking the jobs
 * labelled `box=<name>`.
 *
 * @example
 * const box = await startRemoteRunner(t, { key: admin.key }, "plain", { sandbox: "off" }, dir);
 */
export async function startRemoteRunner(
  t: TestStack,
  auth: Credentials,
  name: string,
  config: Record<string, unknown>,
  dir: string,
): Promise<RunnerProcess & { name: string; token: string }> {
  const created = await t.call("POST", "/api/admin/workers", { json: { name: `box-${name}` }, auth });
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(config));
  const token = String(created.body.token);
  return Object.assign(spawnRunner(t.base, token, ["--config", file, "--label", `box=${name}`]), { name, token });
}

/** Stops runner processes (SIGTERM) and waits until each has exited. */
export async function stopRunners(runners: readonly RunnerProcess[]): Promise<void> {
  for (const { child } of runners) {
    if (child.exitCode !== null) continue;
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  }
}
