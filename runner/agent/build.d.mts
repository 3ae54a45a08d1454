// Types of runner/agent/build.mjs (plain JavaScript: npm run runner runs it before anything is built).

import type { BuildOptions, Plugin } from "esbuild";

/** The runner's build (runner/agent/build.mjs); test/bench/runner-modules.ts bundles other entries with it. */
export declare const runnerBuild: BuildOptions;

/** zod's locales index as English only (zod's default): the other locales are about 360 kB of a bundle. */
export declare const englishZod: Plugin;
