// Bundles the `jobs` CLI (runner/cli/main.ts) into .build/cli/jobs.mjs, and records the sources
// it was built from (.build/cli/inputs.json) so bin.mjs can tell when it is stale. Packages stay
// external, resolved from node_modules. The bundle is written under a temporary name and renamed,
// so two commands starting at once never run a half-written file.
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as esbuild from "esbuild";

export const BUNDLE = ".build/cli/jobs.mjs";
export const INPUTS = ".build/cli/inputs.json";

/** Builds the bundle under `root` (the repository). */
export async function buildCli(root) {
  mkdirSync(join(root, ".build/cli"), { recursive: true });
  const temporary = `${BUNDLE}.${process.pid}.tmp.mjs`;
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: ["runner/cli/main.ts"],
    outfile: temporary,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    packages: "external",
    metafile: true,
    logLevel: "warning",
  });
  const inputs = Object.keys(result.metafile.inputs).filter((file) => !file.includes("node_modules"));
  writeFileSync(join(root, `${INPUTS}.${process.pid}`), JSON.stringify(inputs));
  renameSync(join(root, `${INPUTS}.${process.pid}`), join(root, INPUTS));
  renameSync(join(root, temporary), join(root, BUNDLE));
}

if (import.meta.url === `file://${process.argv[1]}`) await buildCli(process.cwd());
