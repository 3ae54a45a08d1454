// `npm start`'s build (edge/local/build-local.ts: the service's host code and the Worker with its
// dashboard), kept under .build/local/<digest>/ and used again while nothing that went into it
// has changed. Plain JavaScript: it runs before anything is built, on plain Node.
//
// The digest is a SHA-256 over the content of every file the last build read (its sources, the
// packages bundled into the Worker, the embedded assets, the builder's own sources), the
// lockfiles, and the names in each source folder (a new file can change what an import
// resolves to). A file's time stamp is never trusted as its content.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";

/** What the build writes into its folder. */
export const BUILD_FILES = ["host.mjs", "demo-trainer.mjs", "sandbox-bridge.mjs", "worker.js"];

/** Read by every build besides what its bundles name: the lockfiles, the package list, esbuild's version and this file. */
const ALWAYS_READ = [
  "package.json",
  "package-lock.json",
  "node_modules/.package-lock.json",
  "node_modules/esbuild/package.json",
  "tsconfig.json",
  "edge/local/build-cache.mjs",
];

/** The build failed (a syntax error in a source, a missing package) or its folder cannot be written; the message says which. */
export class BuildError extends Error {}

// What an import could resolve to: a folder, or a file a bundle loads; not a hidden name (the
// data directory .data, .build itself) nor a log or a cookie jar a user leaves in the checkout.
const mayResolveTo = (entry) =>
  !entry.name.startsWith(".") && (entry.isDirectory() || entry.isSymbolicLink() || /\.(m?[jt]sx?|cjs|cts|json|md|css)$/.test(entry.name));

/**
 * The digest of these files' content, with the names (of folders and source files) in each folder
 * outside node_modules that holds one of them. A missing file or folder counts as such.
 */
export function digestOf(root, files) {
  const hash = createHash("sha256");
  const folders = new Set();
  for (const file of [...files].sort()) {
    const path = resolve(root, file);
    hash.update(`${file}\0`);
    try {
      hash.update(readFileSync(path));
    } catch {
      hash.update("\0missing\0");
    }
    hash.update("\0");
    if (!path.includes("/node_modules/")) folders.add(dirname(path));
  }
  for (const folder of [...folders].sort()) {
    let names;
    try {
      names = readdirSync(folder, { withFileTypes: true })
        .filter((entry) => mayResolveTo(entry))
        .map((entry) => entry.name)
        .sort()
        .join("/");
    } catch {
      names = "\0missing";
    }
    hash.update(`${relative(root, folder)}\0${names}\0`);
  }
  return hash.digest("hex");
}

function readCurrent(cacheDir) {
  try {
    const current = JSON.parse(readFileSync(join(cacheDir, "current.json"), "utf8"));
    if (typeof current.digest === "string" && Array.isArray(current.inputs)) return current;
  } catch {}
  return null;
}

const folderOf = (cacheDir, digest) => join(cacheDir, digest.slice(0, 16));

/**
 * The build for the sources under `root`: the one in `root`/.build/local when the content of
 * every file it was made from is unchanged, else a new one, made in a child process (which
 * takes its TypeScript loader and esbuild's service with it when it exits).
 *
 * @example
 * const build = localBuild("/srv/training-service"); // { dir: ".../.build/local/3f2a...", cached: true, ... }
 * await import(join(build.dir, "host.mjs"));
 */
export function localBuild(root) {
  const since = performance.now();
  const cacheDir = join(root, ".build", "local");
  const current = readCurrent(cacheDir);
  if (current) {
    const dir = folderOf(cacheDir, current.digest);
    if (BUILD_FILES.every((file) => existsSync(join(dir, file))) && digestOf(root, current.inputs) === current.digest) {
      markUsed(dir);
      return { dir, digest: current.digest, cached: true, inputs: current.inputs.length, ms: Math.round(performance.now() - since) };
    }
  }

  let building;
  try {
    mkdirSync(cacheDir, { recursive: true });
    building = mkdtempSync(join(cacheDir, "building-"));
    // Readable by all, as a checkout is: sandboxed trainers run the demo trainer and the bridge from here as another user.
    chmodSync(building, 0o755);
  } catch (error) {
    throw new BuildError(
      `cannot write the build folder ${cacheDir} (${error.code ?? error.message}); run from a checkout this user can write to`,
    );
  }
  const startedAt = Date.now();
  const child = spawnSync(process.execPath, ["--import", "tsx", join(root, "edge/local/build-local.ts"), building], {
    cwd: root,
    stdio: ["ignore", "ignore", "pipe"],
    encoding: "utf8",
  });
  if (child.status !== 0) {
    rmSync(building, { recursive: true, force: true });
    throw new BuildError(`the build failed: ${(child.stderr || child.error?.message || `exit ${child.status ?? child.signal}`).trim()}`);
  }
  const inputs = [
    ...new Set([...JSON.parse(readFileSync(join(building, "inputs.json"), "utf8")), ...ALWAYS_READ.map((file) => join(root, file))]),
  ]
    .map((path) => (isAbsolute(path) && !relative(root, path).startsWith("..") ? relative(root, path) : path))
    .sort();
  const digest = digestOf(root, inputs);
  const ms = () => Math.round(performance.now() - since);
  // A file written while it built may not be what it read: used this once, and built again next time.
  const changedSince = inputs.some((file) => {
    try {
      return statSync(resolve(root, file)).mtimeMs >= startedAt;
    } catch {
      return false;
    }
  });
  if (changedSince) {
    const once = building.replace(/building-([^/]*)$/, "once-$1");
    renameSync(building, once);
    return { dir: once, digest, cached: false, inputs: inputs.length, ms: ms() };
  }

  const dir = folderOf(cacheDir, digest);
  try {
    renameSync(building, dir);
  } catch {
    // Another start published the same build meanwhile.
    rmSync(building, { recursive: true, force: true });
  }
  const next = join(cacheDir, `current.json.${process.pid}`);
  writeFileSync(next, JSON.stringify({ digest, inputs }));
  renameSync(next, join(cacheDir, "current.json"));
  markUsed(dir);
  prune(cacheDir, [dir]);
  return { dir, digest, cached: false, inputs: inputs.length, ms: ms() };
}

// A build in use by a running service must stay: its runner starts the demo trainer and the
// sandbox bridge from it at each job. Each start marks its build as used (the folder's time).
const markUsed = (dir) => {
  try {
    const now = new Date();
    utimesSync(dir, now, now);
  } catch {}
};

/** Removes builds no start has used for a day (never `keep`), and builds left unfinished for an hour. */
function prune(cacheDir, keep) {
  const hour = 3600_000;
  for (const name of readdirSync(cacheDir)) {
    const path = join(cacheDir, name);
    if (keep.includes(path) || name.startsWith("current.json")) continue;
    try {
      const age = Date.now() - statSync(path).mtimeMs;
      if (age > (name.startsWith("building-") ? hour : 24 * hour)) rmSync(path, { recursive: true, force: true });
    } catch {}
  }
}
