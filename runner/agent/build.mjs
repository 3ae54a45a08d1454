// Builds the runner (and the demo trainer it launches) into plain JavaScript under .build/runner/,
// so a GPU box runs them with plain `node`: the TypeScript loader alone (tsx) costs ~38 MB of
// memory in every process. Packages are bundled too: loaded from node_modules, each package's files
// are separate modules and a CommonJS one (ws, ipaddr.js) imported from ESM is scanned by Node's
// WebAssembly export lexer, about 15 MB more in the idle runner (issue 31; `npm run
// bench:runner-modules`). node-pty (a native addon) and pngjs stay in node_modules, loaded with
// createRequire when first needed. `npm run runner` runs this first; it takes well under a second.
import { dirname } from "node:path";
import * as esbuild from "esbuild";

// zod's namespace carries all its locales (about 360 kB of the bundle, kept in memory as source);
// the runner's messages are zod's default English, so the locales index is only English here.
const englishZod = {
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

await esbuild.build({
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
  // The bundled CommonJS packages require Node's own modules.
  banner: { js: 'import { createRequire as __createRequire } from "node:module"; const require = __createRequire(import.meta.url);' },
  // --enable-source-maps keeps the map in memory: the mappings are what a stack trace needs.
  sourcemap: "linked",
  sourcesContent: false,
  // Whitespace only: names stay as written (stack traces map back through the source map); the
  // bundle's source stays in memory, a third smaller.
  minifyWhitespace: true,
  plugins: [englishZod],
  logLevel: "warning",
});
