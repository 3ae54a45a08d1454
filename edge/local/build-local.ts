// `npm start`'s build, run by edge/local/build-cache.mjs in a child process that exits when done,
// so neither this TypeScript loader nor esbuild's service stays in the service's memory.
// Writes into the folder given as its argument: host.mjs (edge/local/host.ts with the runner,
// beside the demo trainer and the sandbox bridge the runner starts from its own folder, as
// runner/agent/build.mjs lays them out), worker.js (the Worker with its dashboard) and
// inputs.json (the absolute path of every file either build, or this builder, read).
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import * as esbuild from "esbuild";
import { runnerBuild } from "../../runner/agent/build.mjs";
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
      // Packages bundled too, with the runner's build options (runner/agent/build.mjs): loaded
      // from node_modules, the host's hundreds of package files were resolved and read at every
      // start (issue 31: importing the host took about 1 s, bundled about 0.6 s). Also left in
      // node_modules: miniflare (it finds its workers and workerd beside it), undici (Miniflare's;
      // one copy for both) and the native libsql.
      bundle: true,
      platform: runnerBuild.platform,
      target: runnerBuild.target,
      format: runnerBuild.format,
      external: [...(runnerBuild.external ?? []), "miniflare", "undici", "libsql"],
      alias: runnerBuild.alias,
      banner: runnerBuild.banner,
      plugins: runnerBuild.plugins,
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
