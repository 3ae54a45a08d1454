// Faults injected from outside the service, for test/local/faults.test.ts and `npm run bench:faults`:
// another process holding the database's write lock, and a watch on which boxes run a job's trainer.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join, resolve } from "node:path";

const LIBSQL = resolve("node_modules/libsql");

/** Another process (what a backup or a migration tool is) holding the database's write lock with a change, for `ms`. */
export function holdWriteLock(database: string, ms: number): { locked: Promise<void>; released: Promise<void> } {
  const holder = spawn(
    process.execPath,
    [
      "-e",
      `const Database = require(${JSON.stringify(LIBSQL)}); const db = new Database(${JSON.stringify(database)});
       db.exec("PRAGMA busy_timeout = 10000; BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS lock_holder (at TEXT); INSERT INTO lock_holder VALUES (datetime())");
       console.log("locked");
       setTimeout(() => { db.exec("COMMIT"); db.close(); console.log("released"); }, ${ms});`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  const seen = (word: string) =>
    new Promise<void>((done) =>
      holder.stdout.on("data", (d: Buffer) => {
        out += d.toString();
        if (out.includes(word)) done();
      }),
    );
  return { locked: seen("locked"), released: seen("released") };
}

/** Processes working in `path` (a job's directory on one box) or naming it: its trainer's tree. */
export function processesUnder(path: string): number[] {
  return readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p) && Number(p) !== process.pid)
    .filter((p) => {
      try {
        return `${readlinkSync(`/proc/${p}/cwd`)}/`.startsWith(path) || readFileSync(`/proc/${p}/cmdline`, "utf8").includes(path);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/**
 * Watches, every `everyMs`, whether a job has a trainer alive on each box (by work directory);
 * `overlap` says whether two were ever alive at once, `overlapMs` for how long in all.
 */
export function watchTrainers(jobId: string, workDirs: Record<string, string>, everyMs = 50) {
  const seen: Record<string, boolean> = {};
  let overlap = false;
  let overlapMs = 0;
  let last = performance.now();
  let wasOverlapping = false;
  const timer = setInterval(() => {
    const alive = Object.entries(workDirs).filter(([, dir]) => processesUnder(join(dir, "jobs", jobId) + "/").length > 0);
    const now = performance.now();
    for (const [name] of alive) seen[name] = true;
    const overlapping = alive.length > 1;
    if (overlapping) overlap = true;
    // Counted from the sample before, when either this or that one saw two trainers.
    if (overlapping || wasOverlapping) overlapMs += (now - last) / (overlapping && wasOverlapping ? 1 : 2);
    wasOverlapping = overlapping;
    last = now;
  }, everyMs);
  return {
    seen,
    get overlap() {
      return overlap;
    },
    get overlapMs() {
      return overlapMs;
    },
    stop: () => clearInterval(timer),
  };
}
