import { join } from "node:path";
import type { Client } from "@libsql/client/web";
import { Runner } from "../../runner/agent";
import { EdgeError } from "../../runner/edge-client";
import { newWorkerToken } from "../workers/workers";

/** The worker the local default's own runner registers as. */
export const LOCAL_RUNNER_NAME = "local-box";

/**
 * `npm start`'s runner for this machine (ARCHITECTURE "One command each", step 4): the worker
 * `local-box` gets a new token on every start (written straight into the database, kept only in
 * this process's memory), and a runner registers this machine's GPUs as the local box (none is
 * fine: CPU jobs still run). Job directories go under `<data dir>/runner/`.
 */
export async function startLocalRunner(db: Client, options: { url: string; dataDir: string; log: (level: "info" | "warning", line: string) => void }): Promise<Runner | null> {
  const { token, prefix, hash } = await newWorkerToken();
  await db.execute({
    sql: `INSERT INTO workers (name, role, status, token_prefix, token_hash, created_at) VALUES (?1, 'local', 'connecting', ?2, ?3, ?4)
          ON CONFLICT (name) DO UPDATE SET token_prefix = excluded.token_prefix, token_hash = excluded.token_hash`,
    args: [LOCAL_RUNNER_NAME, prefix, hash, new Date().toISOString()],
  });
  const runner = new Runner({
    url: options.url,
    token,
    role: "local",
    labels: {},
    workDir: join(options.dataDir, "runner"),
    pollMs: 5000,
    stopGraceSeconds: 10,
    log: (line) => options.log("info", `runner: ${line}`),
  });
  try {
    await runner.start();
    return runner;
  } catch (error) {
    // Another machine registered as the local box: this one then runs nothing itself.
    const why = error instanceof EdgeError ? error.detail : (error as Error).message;
    options.log("warning", `the local runner did not start: ${why}`);
    return null;
  }
}
