// Types of edge/local/build-cache.mjs (plain JavaScript: it runs before anything is built).

/** A build of the service's host code and the Worker: where it is, and whether it was used again. */
export interface LocalBuild {
  /** The folder holding host.mjs, demo-trainer.mjs, sandbox-bridge.mjs and worker.js. */
  dir: string;
  /** SHA-256 over the content of the files it was made from. */
  digest: string;
  /** True when nothing it was made from had changed, so it was used again. */
  cached: boolean;
  /** How many files it was made from. */
  inputs: number;
  /** Milliseconds spent checking (cached) or building. */
  ms: number;
}

export const BUILD_FILES: string[];
export class BuildError extends Error {}
export function digestOf(root: string, files: string[]): string;
export function localBuild(root: string): LocalBuild;
