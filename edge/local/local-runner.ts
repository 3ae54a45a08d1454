import type { Client } from "@libsql/client/web";
import { Runner } from "../../runner/agent/agent";
import { loadRunnerConfig } from "../../runner/agent/config";
import { ServiceError } from "../../shared/client/client";
import { newWorkerToken } from "../workers/workers";

/** The worker the local default's own runner registers as. */
export const LOCAL_RUNNER_NAME = "local-box";

/**
 * `npm start`'s runner for this machine (README "Quick start"): the worker
 * `local-box` gets a new token on every start (written straight into the database, kept only in
 * this process's memory), and a runner registers this machine's GPUs as the local box (none is
 * fine: CPU jobs still run). Its settings are the runner's own (runner/agent/config.ts) from the
 * config file `runnerConfig` (RUNNER_CONFIG); job directories go to its work_dir (default
 * ./.runner), never under the data directory, which its sandbox hides.
 */
export async function startLocalRunner(
  db: Client,
  options: {
    url: string;
    dataDir: string;
    runnerConfig?: string;
    runnerEnv?: Record<string, string | undefined>;
    log: (level: "info" | "warning", line: string) => void;
  },
): Promise<Runner | null> {
  const { token, prefix, hash } = await newWorkerToken();
  await db.execute({
    sql: `INSERT INTO workers (name, role, status, token_prefix, token_hash, created_at) VALUES (?1, 'local', 'connecting', ?2, ?3, ?4)
          ON CONFLICT (name) DO UPDATE SET token_prefix = excluded.token_prefix, token_hash = excluded.token_hash`,
    args: [LOCAL_RUNNER_NAME, prefix, hash, new Date().toISOString()],
  });
  let runner: Runner;
  try {
    const config = loadRunnerConfig(
      { url: options.url, token, local: true, config: options.runnerConfig },
      { ...options.runnerEnv, RUNNER_TOKEN: undefined },
    );
    runner = new Runner({
      ...config,
      hide: [...config.hide, options.dataDir],
      log: (line) => options.log(line.startsWith("WARNING: ") ? "warning" : "info", `runner: ${line}`),
    });
    await runner.start();
    return runner;
  } catch (error) {
    // A runner config this box cannot meet (run_as, a required sandbox), or another machine
    // registered as the local box: this one then runs nothing itself.
    const why = error instanceof ServiceError ? error.detail : (error as Error).message;
    options.log("warning", `the local runner did not start: ${why}`);
    return null;
  }
}
