// Types of runner/agent/build.mjs (plain JavaScript: npm run runner runs it before anything is built).

import type { BuildOptions } from "esbuild";

/** The runner's build (runner/agent/build.mjs); test/bench/runner-modules.ts bundles other entries with it. */
export declare const runnerBuild: BuildOptions;
