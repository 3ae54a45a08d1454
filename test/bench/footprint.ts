// `npm run bench:footprint`: how soon `npm start` is live and how much memory its whole process
// tree holds (issue 31: live ≤ 2 s and ≤ 300 MB on a quiet machine, no build service left running).
//  1. cold: the build cache (.build/local) removed first, so the start builds the host and the Worker;
//  2. warm: `npm start` again, the build reused;
//  3. warm, the fastest documented form: `node edge/local/start.mjs` (no npm process above it).
// After the idle wait, GET /api/cloud/health/live from 16 clients for 3 s (requests/s): what a
// memory-saving setting would cost (Node's --optimize-for-size saved 15 to 40 MB here and slowed
// the start by about a second at load 5, so `npm start` does not use it).
// Each start is in a fresh data directory (so migrations run each time) on a free port, with the
// local runner as `npm start` has it. Live: from spawning the command until GET
// /api/cloud/health/live answers 200. Memory: VmRSS and PSS (shared pages split between the
// processes sharing them) summed over the tree, when live and after BENCH_IDLE_SECONDS idle,
// with every process listed. Also checks that no esbuild process is left in the tree and that
// stopping with SIGTERM exits 0 and leaves no process behind.
// Settings: BENCH_COLD_ROUNDS (2), BENCH_ROUNDS (3 per warm form), BENCH_IDLE_SECONDS (10).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../helpers/ports";
import { processTree, type TreeProcess } from "../helpers/process-tree";
import { median, round } from "./lib";

const coldRounds = Number(process.env.BENCH_COLD_ROUNDS ?? 2);
const warmRounds = Number(process.env.BENCH_ROUNDS ?? 3);
const idleSeconds = Number(process.env.BENCH_IDLE_SECONDS ?? 10);
const out = (line: string) => process.stdout.write(line + "\n");
const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

// Before this change there was no build cache and no plain-JavaScript entry: then the
// fastest form is the TypeScript entry (a run on the base commit for before/after figures).
const hasCache = existsSync("edge/local/start.mjs");
const npmStart: [string, string[]] = ["npm", ["start", "--silent"]];
const forms: { form: string; command: [string, string[]]; cold?: boolean }[] = hasCache
  ? [
      { form: "cold npm start", command: npmStart, cold: true },
      { form: "warm npm start", command: npmStart },
      { form: "warm node start.mjs", command: [process.execPath, ["edge/local/start.mjs"]] },
    ]
  : [
      { form: "npm start", command: npmStart },
      { form: "node tsx main.ts", command: [process.execPath, ["--import", "tsx", "edge/local/main.ts"]] },
    ];

interface Start {
  form: string;
  build: string;
  liveMs: number;
  live: TreeProcess[];
  idle: TreeProcess[] | null;
  /** GET /api/cloud/health/live from 16 clients for 3 s after the idle wait, requests/s. */
  perSecond: number | null;
  leftAfterStop: number;
}

const total = (tree: TreeProcess[]) => ({ rss: tree.reduce((n, p) => n + p.rssKb, 0), pss: tree.reduce((n, p) => n + p.pssKb, 0) });
const esbuilds = (tree: TreeProcess[]) => tree.filter((p) => /esbuild/.test(p.name) || /esbuild --service/.test(p.command)).length;

async function start(form: string, [command, args]: [string, string[]], idle: boolean): Promise<Start> {
  const dataDir = mkdtempSync(join(tmpdir(), "bench-footprint-"));
  // The runner's job folders go to the temp dir, not ./.runner.
  const runnerConfig = join(dataDir, "runner.json");
  writeFileSync(runnerConfig, JSON.stringify({ work_dir: join(dataDir, "runner") }));
  const port = await freePort();
  const logFile = join(dataDir, "service.log");
  const started = performance.now();
  const child = spawn(command, args, {
    env: {
      ...process.env,
      SERVICE_HOST: "127.0.0.1",
      SERVICE_PORT: String(port),
      SERVICE_DATA_DIR: join(dataDir, "data"),
      SERVICE_LOG_FILE: logFile,
      RUNNER_CONFIG: runnerConfig,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
  let liveMs = 0;
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/api/cloud/health/live`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) {
      liveMs = performance.now() - started;
      break;
    }
    if (child.exitCode !== null) throw new Error(`${form} exited with ${child.exitCode} before it was live: ${stderr}`);
    if (performance.now() - started > 120_000) throw new Error(`${form} was not live within 120 s`);
    await sleep(10);
  }
  // Until the start-up has finished (the banner printed, its signal handlers set): the tree then holds what it keeps.
  for (let i = 0; i < 600 && !stderr.includes("is up on"); i++) await sleep(50);
  const live = processTree(child.pid!);
  let idleTree: TreeProcess[] | null = null;
  let perSecond: number | null = null;
  if (idle) {
    await sleep(idleSeconds * 1000);
    idleTree = processTree(child.pid!);
    perSecond = (await round({ url: `http://127.0.0.1:${port}/api/cloud/health/live` }, { concurrency: 16, seconds: 3 })).perSecond;
  }
  const log = await readFile(logFile, "utf8").catch(() => "");
  const build = /bundle cached/.test(log) ? "cached" : /bundle built/.test(log) ? "built" : "-";
  child.kill("SIGTERM");
  const code = await exited;
  if (code !== 0) out(`  (${form} exited ${code} on SIGTERM)`);
  await sleep(200);
  const leftAfterStop = live.filter((p) => existsSync(`/proc/${p.pid}`)).length;
  rmSync(dataDir, { recursive: true, force: true });
  return { form, build, liveMs, live, idle: idleTree, perSecond, leftAfterStop };
}

function report(s: Start): void {
  const t = total(s.live);
  out(
    `${s.form.padEnd(26)} build ${s.build.padEnd(6)} live ${s.liveMs.toFixed(0).padStart(6)} ms   tree RSS ${mb(t.rss).padStart(7)} PSS ${mb(t.pss).padStart(7)}   esbuild processes ${esbuilds(s.live)}   left after stop ${s.leftAfterStop}`,
  );
}

function listTree(label: string, tree: TreeProcess[]): void {
  const t = total(tree);
  out(`  ${label}: RSS ${mb(t.rss)}, PSS ${mb(t.pss)}`);
  for (const p of tree)
    out(`    ${String(p.pid).padStart(7)} RSS ${mb(p.rssKb).padStart(7)} PSS ${mb(p.pssKb).padStart(7)}  ${p.command.slice(0, 90)}`);
}

async function main(): Promise<void> {
  out(`load ${(await readFile("/proc/loadavg", "utf8")).trim()}; ${hasCache ? "with" : "without"} the build cache`);
  const starts: Start[] = [];
  for (const { form, command, cold } of forms) {
    const rounds = cold ? coldRounds : warmRounds;
    for (let i = 0; i < rounds; i++) {
      if (cold) rmSync(".build/local", { recursive: true, force: true });
      starts.push(await start(form, command, !cold && i === rounds - 1));
      report(starts.at(-1)!);
    }
  }
  out("");
  for (const { form } of forms) {
    const of = starts.filter((s) => s.form === form);
    if (!of.length) continue;
    const totals = of.map((s) => total(s.live));
    out(
      `${form.padEnd(26)} live p50 ${median(of.map((s) => s.liveMs)).toFixed(0)} ms (of ${of.length}: ${of.map((s) => s.liveMs.toFixed(0)).join(", ")})` +
        `   tree when live: RSS p50 ${mb(median(totals.map((t) => t.rss)))}, PSS p50 ${mb(median(totals.map((t) => t.pss)))}`,
    );
    const idle = of.find((s) => s.idle);
    if (idle) {
      listTree(`after ${idleSeconds} s idle`, idle.idle!);
      out(`  then GET /api/cloud/health/live, 16 clients, 3 s: ${idle.perSecond!.toFixed(0)} requests/s`);
    }
  }
  out(`load ${(await readFile("/proc/loadavg", "utf8")).trim()}`);
}

await main();
