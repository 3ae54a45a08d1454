// vitest's global setup (vitest.config.ts globalSetup): runs once per `vitest run`, before any file.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { bundleWorker } from "../../edge/local/bundle";

declare module "vitest" {
  export interface ProvidedContext {
    /** The Worker bundled once for the run's stacks (test/helpers/stack.ts), instead of once per stack. */
    workerBundle: string;
  }
}

export default async function setup(project: TestProject): Promise<() => void> {
  // Every temporary directory of the run (the tests' data and config directories, the stacks'
  // and runners' own, their children's) goes under one of the run's, removed at its end: a run
  // used to leave some 400 directories and 50 MB in /tmp. The test workers and what they start
  // inherit TMPDIR, which os.tmpdir() and mkdtemp follow. Readable and searchable by all, as
  // /tmp is to a sandboxed trainer's user (its network sockets live there).
  const runTmp = mkdtempSync(join(tmpdir(), "ts-run-"));
  chmodSync(runTmp, 0o755);
  process.env.TMPDIR = runTmp;
  const dir = mkdtempSync(join(tmpdir(), "training-service-bundle-"));
  const file = join(dir, "worker.js");
  const build = async () => writeFileSync(file, await bundleWorker());
  await build();
  project.provide("workerBundle", file);
  // In watch mode the code may have changed between runs: bundle again.
  project.onTestsRerun(build);
  return () => rmSync(runTmp, { recursive: true, force: true });
}
