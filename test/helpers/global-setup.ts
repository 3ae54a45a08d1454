// vitest's global setup (vitest.config.ts globalSetup): runs once per `vitest run`, before any file.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
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
  const dir = mkdtempSync(join(tmpdir(), "training-service-bundle-"));
  const file = join(dir, "worker.js");
  const build = async () => writeFileSync(file, await bundleWorker());
  await build();
  project.provide("workerBundle", file);
  // In watch mode the code may have changed between runs: bundle again.
  project.onTestsRerun(build);
  return () => rmSync(dir, { recursive: true, force: true });
}
