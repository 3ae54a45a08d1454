// Builds the runner (and the demo trainer it launches) into plain JavaScript under .build/runner/,
// so a GPU box runs them with plain `node`: the TypeScript loader alone (tsx) costs ~38 MB of
// memory in every process. Packages are bundled too: loaded from node_modules, each package's files
// are separate modules and a CommonJS one (ws, ipaddr.js) imported from ESM is scanned by Node's
// WebAssembly export lexer, about 15 MB more in the idle runner (issue 31; `npm run
// bench:runner-modules`). node-pty (a native addon) and pngjs stay in node_modules, loaded with
// createRequire when first needed. `npm run runner` runs this first; it takes well under a second.
import { dirname } from "node:path";
import { pathToFileURL } from "node:url";
import * as esbuild from "esbuild";

// zod's namespace carries all its locales (about 360 kB of the bundle, kept in memory as source);
// the runner's messages are zod's default English, so the locales index is only English here.
// The Worker's bundle uses it too (edge/local/bundle.ts).
export const englishZod = {
  name: "english-zod",
  setup(build) {
    build.onResolve({ filter: /\/locales\/index\.js$/ }, (args) =>
      /[\\/]zod[\\/]v4[\\/]/.test(args.importer) ? { path: args.importer, namespace: "english-zod" } : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: "english-zod" }, (args) => ({
      contents: `export { default as en } from "../locales/en.js";`,
      resolveDir: dirname(args.path),
    }));
  },
};

/** The runner's build; test/bench/runner-modules.ts bundles other entries with the same options. */
export const runnerBuild = {
  entryPoints: {
    main: "runner/agent/main.ts",
    "demo-trainer": "runner/demo-trainer/main.ts",
    "sandbox-bridge": "runner/agent/sandbox-bridge.mjs",
  },
  outdir: ".build/runner",
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  external: ["node-pty", "pngjs"],
  // The shared schemas' zod, without the OpenAPI metadata only the edge's document reads.
  alias: { "@hono/zod-openapi": "./runner/agent/zod-openapi-free.ts" },
  // The bundled CommonJS packages require Node's own modules.
  banner: { js: 'import { createRequire as __createRequire } from "node:module"; const require = __createRequire(import.meta.url);' },
  // For `NODE_OPTIONS=--enable-source-maps npm run runner`, stack traces in the TypeScript sources.
  // Not on by default: Node then reads the map into memory and measures every line of the bundle
  // at load, which gets that loop optimized by TurboFan, about 5 MB of an idle runner; the bundle
  // itself is unminified and says which source file each part comes from.
  sourcemap: "linked",
  sourcesContent: false,
  plugins: [englishZod],
  logLevel: "warning",
};

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await esbuild.build(runnerBuild);
