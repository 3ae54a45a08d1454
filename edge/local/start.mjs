// `npm start` (README "Quick start"): builds the service's host code and the Worker once per
// content of their sources (edge/local/build-cache.mjs), then runs that build on plain Node: no
// TypeScript loader and no esbuild service stay in the service's memory.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { BuildError, localBuild } from "./build-cache.mjs";

let build;
try {
  build = localBuild(fileURLToPath(new URL("../../", import.meta.url)));
} catch (error) {
  if (!(error instanceof BuildError)) throw error;
  process.stderr.write(`error: ${error.message}\n`);
  process.exit(1);
}
const { runLocalService } = await import(pathToFileURL(join(build.dir, "host.mjs")).href);
await runLocalService(readFileSync(join(build.dir, "worker.js"), "utf8"), build);
