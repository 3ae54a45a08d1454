// `npm start`'s build, run by edge/local/build-cache.mjs in a child process that exits when done,
// so neither this TypeScript loader nor esbuild's service stays in the service's memory.
// Writes into the folder given as its argument: host.mjs (edge/local/host.ts with the runner,
// beside the demo trainer and the sandbox bridge the runner starts from its own folder, as
// runner/agent/build.mjs lays them out), worker.js (the Worker with its dashboard) and
// inputs.json (the absolute path of every file either build, or this builder, read).
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import * as esbuild from "esbuild";
import { bundleWorkerWithInputs, REPO_ROOT } from "./bundle";

const outDir = process.argv[2];
if (!outDir) throw new Error("usage: build-local.ts <output folder>");

const metafileInputs = (result: esbuild.BuildResult) => Object.keys(result.metafile!.inputs).map((input) => resolve(REPO_ROOT, input));

try {
  const [host, worker, builder] = await Promise.all([
    esbuild.build({
      entryPoints: {
        host: "edge/local/host.ts",
        "demo-trainer": "runner/demo-trainer/main.ts",
        "sandbox-bridge": "runner/agent/sandbox-bridge.mjs",
      },
      absWorkingDir: REPO_ROOT,
      outdir: outDir,
      outExtension: { ".js": ".mjs" },
      bundle: true,
      platform: "node",
      target: "node20",
      format: "esm",
      // Resolved from node_modules at run time (miniflare finds its own files beside it; node-pty loads a native binary).
      packages: "external",
      metafile: true,
      logLevel: "silent",
    }),
    bundleWorkerWithInputs(),
    // This builder's own sources (the Worker's build rules, the dashboard's endpoint table): a
    // change to them is a change to the build.
    esbuild.build({
      entryPoints: ["edge/local/build-local.ts"],
      absWorkingDir: REPO_ROOT,
      bundle: true,
      platform: "node",
      format: "esm",
      packages: "external",
      write: false,
      outfile: "builder.mjs",
      metafile: true,
      logLevel: "silent",
    }),
  ]);
  writeFileSync(join(outDir, "worker.js"), worker.script);
  const inputs = new Set([...metafileInputs(host), ...worker.inputs, ...metafileInputs(builder)]);
  writeFileSync(join(outDir, "inputs.json"), JSON.stringify([...inputs].sort()));
} catch (error) {
  process.stderr.write(`${(error as Error).message}\n`);
  process.exitCode = 1;
} finally {
  await esbuild.stop();
}
