// Builds the runner (and the demo trainer it launches) into plain JavaScript under .build/runner/,
// so a GPU box runs them with plain `node`: the TypeScript loader alone (tsx) costs ~38 MB of
// memory in every process. Packages stay external (node-pty loads a native binary), resolved
// from node_modules. `npm run runner` runs this first; it takes well under a second.
import * as esbuild from "esbuild";

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
  packages: "external",
  sourcemap: "linked",
  logLevel: "warning",
});
