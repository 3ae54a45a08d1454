#!/usr/bin/env node
// The `jobs` command (package.json bin). Runs the CLI bundled into plain JavaScript
// (.build/cli/jobs.mjs): loading TypeScript through tsx would cost every command ~200 ms. The
// bundle is rebuilt first whenever it is missing or one of its sources is newer, so a checkout
// after `git pull` never runs stale code; that takes well under a second.
import { readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { buildCli, BUNDLE, INPUTS } from "./build.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
if (stale()) await buildCli(root);
const { main } = await import(pathToFileURL(join(root, BUNDLE)).href);
process.exitCode = await main(process.argv.slice(2));

function stale() {
  try {
    const built = statSync(join(root, BUNDLE)).mtimeMs;
    const inputs = JSON.parse(readFileSync(join(root, INPUTS), "utf8"));
    return inputs.some((file) => statSync(join(root, file)).mtimeMs > built);
  } catch {
    return true; // no bundle yet, or a source was removed
  }
}
