import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** What a `jobs` run printed and how it exited. */
export interface JobsRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON (throws with the output when it is not). */
  json: () => any;
  /** stdout as JSON lines (NDJSON, what `logs --format json` prints), one value per line. */
  jsonLines: () => any[];
}

export interface JobsOptions {
  /** Added to a clean environment: PATH and HOME, a config directory of its own, no colour settings. */
  env?: NodeJS.ProcessEnv;
  /** Written to its stdin, then closed (stdin is closed at once without it). */
  input?: string;
  /** Kill it after this long (it then exits with null); default 30 s. */
  timeoutMs?: number;
  /** Called with each chunk of stdout as it arrives (to act while a command follows a stream). */
  onStdout?: (text: string) => void;
}

/** A fresh config directory (XDG_CONFIG_HOME) for a test's `jobs` runs. */
export const tempConfigHome = () => mkdtempSync(join(tmpdir(), "jobs-cli-config-"));

/**
 * Runs the `jobs` binary (runner/cli/bin.mjs, what package.json `bin` and `npx` run) as a
 * subprocess, with no terminal: stdout and stderr are pipes. The environment is clean (no
 * SERVICE_URL or SERVICE_API_KEY unless given) and the config directory is a fresh temporary
 * one unless `env.XDG_CONFIG_HOME` names another.
 *
 * @example
 * const run = await jobs(["list", "--format", "json"], { env: { SERVICE_URL: t.base, SERVICE_API_KEY: key } });
 * expect(run.code).toBe(0);
 */
export function jobs(args: string[], options: JobsOptions = {}): Promise<JobsRun> {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    XDG_CONFIG_HOME: tempConfigHome(),
    ...options.env,
  };
  const child = spawn(process.execPath, ["runner/cli/bin.mjs", ...args], { env, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => {
    stdout += d.toString();
    options.onStdout?.(d.toString());
  });
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdin.end(options.input ?? "");
  const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 30_000);
  return new Promise((resolve) => {
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({
        code,
        stdout,
        stderr,
        json: () => {
          try {
            return JSON.parse(stdout);
          } catch {
            throw new Error(`jobs ${args.join(" ")} printed no JSON:\n${stdout}\n--- stderr:\n${stderr}`);
          }
        },
        jsonLines: () =>
          stdout
            .split("\n")
            .filter(Boolean)
            .map((line) => JSON.parse(line)),
      });
    });
  });
}
