// `npm run bench:faults`: the issue's fault figures on this machine, faults injected from outside
// the service (`npm start`'s process, its own data directory) as an operator meets them.
//  1. The database lock: another process holds service.db's write lock (BEGIN IMMEDIATE and a
//     write) for BENCH_LOCK_SECONDS (10). Meanwhile a client asks the liveness check every 50 ms
//     and another writes back to back; then 50 writes follow the release.
//     Figures: the longest liveness answer during the lock (target < 100 ms), writes answered
//     during it by status, writes failed after the release (target 0).
//  2. The partition: a runner reaches the edge through a TCP proxy (test/helpers/tcp-proxy.ts),
//     a second one directly; a job trains on the first, the proxy is cut for
//     BENCH_PARTITION_SECONDS (30) with a 12 s heartbeat timeout, then healed. Its trainer prints a
//     numbered event every 50 ms and writes how many it printed to its job directory.
//     Figures: the time the job ran in two places (target 0 s: both boxes' trainer processes
//     sampled every 20 ms), events lost (printed by either trainer but never stored; target 0),
//     events stored twice (target 0), gap notices.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { holdWriteLock, watchTrainers } from "../helpers/faults";
import { spawnRunner, stopRunners, type RunnerProcess } from "../helpers/runner-process";
import { tcpProxy } from "../helpers/tcp-proxy";
import { until } from "../helpers/wait";
import { fmt, startBenchStack, type BenchStack } from "./lib";

const lockSeconds = Number(process.env.BENCH_LOCK_SECONDS ?? 10);
const partitionSeconds = Number(process.env.BENCH_PARTITION_SECONDS ?? 30);
const out = (line: string) => process.stdout.write(line + "\n");

async function call(stack: BenchStack, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(stack.base + path, {
    method,
    headers: { authorization: `Bearer ${stack.adminKey}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function lock(): Promise<void> {
  const stack = await startBenchStack();
  try {
    const held = holdWriteLock(join(stack.dataDir, "service.db"), lockSeconds * 1000);
    await held.locked;
    let locked = true;
    void held.released.then(() => (locked = false));
    let longestLive = 0;
    let liveAsked = 0;
    const during = new Map<number, number>();
    let n = 0;
    const live = (async () => {
      while (locked) {
        const t0 = performance.now();
        const r = await fetch(`${stack.base}/api/cloud/health/live`);
        await r.text();
        if (locked) longestLive = Math.max(longestLive, performance.now() - t0);
        liveAsked++;
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const writer = (async () => {
      while (locked) {
        const r = await call(stack, "POST", "/api/configs/environments", { name: `during-${n++}` });
        during.set(r.status, (during.get(r.status) ?? 0) + 1);
      }
    })();
    await Promise.all([live, writer]);
    let failedAfter = 0;
    const t0 = performance.now();
    for (let i = 0; i < 50; i++)
      if ((await call(stack, "POST", "/api/configs/environments", { name: `after-${i}` })).status !== 201) failedAfter++;
    const afterMs = (performance.now() - t0) / 50;
    out(`database lock held by another process for ${lockSeconds} s`);
    out(`  longest liveness answer during the lock ${fmt(longestLive)} ms   (${liveAsked} asked; target < 100 ms)`);
    out(`  writes during the lock, by status        ${[...during].map(([s, c]) => `${s}: ${c}`).join(", ")}`);
    out(`  writes failed after the release          ${fmt(failedAfter, 0)}      (of 50, ${afterMs.toFixed(1)} ms each; target 0)`);
  } finally {
    await stack.stop();
  }
}

// The partition's trainer: a numbered event every 50 ms, and the count printed so far in ./printed.
const EMITTER = `
const { writeFileSync } = require("node:fs");
let n = 0;
const box = process.cwd();
setInterval(() => {
  process.stdout.write(JSON.stringify({ type: "bench.tick", data: { box, n } }) + "\\n");
  writeFileSync("printed", String(++n));
}, 50);
process.on("SIGTERM", () => process.exit(0));`;

async function partition(): Promise<void> {
  const stack = await startBenchStack();
  const host = mkdtempSync(join(tmpdir(), "bench-faults-"));
  const runners: RunnerProcess[] = [];
  const proxy = await tcpProxy(new URL(stack.base).port);
  try {
    const emitter = join(host, "emitter.cjs");
    writeFileSync(emitter, EMITTER);
    await call(stack, "POST", "/api/queue/concurrency", { worker_heartbeat_timeout_seconds: 12 });
    const workDirs = { a: join(host, "a"), b: join(host, "b") };
    const box = async (name: "a" | "b", url: string) => {
      const created = await call(stack, "POST", "/api/admin/workers", { name: `box-${name}` });
      const file = join(host, `${name}.json`);
      writeFileSync(file, JSON.stringify({ sandbox: "off", work_dir: workDirs[name], trainers: { emitter: [process.execPath, emitter] } }));
      const runner = spawnRunner(url, created.body.token, ["--config", file, "--label", "pool=p"]);
      runners.push(runner);
      await until(`box ${name} to register`, () => runner.output.includes("registered as worker"), { timeoutMs: 30_000 });
      return runner;
    };
    const a = await box("a", proxy.url);
    await call(stack, "POST", "/api/configs/environments", { name: "ticks" });
    await call(stack, "PUT", "/api/configs/ticks", { config: { "--trainer": "emitter", "--num_processes": 0 } });
    const job = (await call(stack, "POST", "/api/queue/submit", { config_name: "ticks", target: "worker", worker_labels: { pool: "p" } }))
      .body;
    const watch = watchTrainers(job.job_id, workDirs, 20);
    await until("box a to train", () => watch.seen.a, { timeoutMs: 30_000 });
    await box("b", stack.base);
    await new Promise((r) => setTimeout(r, 2000));
    proxy.cut();
    await new Promise((r) => setTimeout(r, partitionSeconds * 1000));
    proxy.heal();
    await until("box a to report its attempt", () => a.output.includes(`job ${job.job_id}: the edge did not take the report`), {
      timeoutMs: 60_000,
    });
    await new Promise((r) => setTimeout(r, 2000));
    await call(stack, "POST", "/api/training/cancel", { job_id: job.job_id });
    await until("the job to end", async () => (await call(stack, "GET", `/api/queue/jobs/${job.job_id}`)).body.status !== "running", {
      timeoutMs: 30_000,
    });
    watch.stop();
    // Let each runner deliver what it still holds.
    await new Promise((r) => setTimeout(r, 3000));
    const printed = (dir: string) => {
      try {
        return Number(readFileSync(join(dir, "jobs", job.job_id, "printed"), "utf8"));
      } catch {
        return 0;
      }
    };
    const events: any[] = [];
    for (let since = 0; ;) {
      const page = (await call(stack, "GET", `/api/training/events?job_id=${job.job_id}&since_index=${since}&limit=1000`)).body
        .events as any[];
      events.push(...page);
      if (page.length < 1000) break;
      since = page.at(-1).index + 1;
    }
    const ticks = events.filter((e) => e.type === "bench.tick");
    const distinct = new Set(ticks.map((e) => `${e.data.box}#${e.data.n}`));
    const total = printed(workDirs.a) + printed(workDirs.b);
    const entry = (await call(stack, "GET", `/api/queue/jobs/${job.job_id}`)).body;
    out(`partition of box a for ${partitionSeconds} s, heartbeat timeout 12 s (job ended ${entry.status}, attempt ${entry.attempt})`);
    out(`  time the job ran in two places           ${fmt(watch.overlapMs / 1000, 2)} s    (sampled every 20 ms; target 0)`);
    out(`  events printed by the trainers           ${fmt(total, 0)}      (box a ${printed(workDirs.a)}, box b ${printed(workDirs.b)})`);
    out(`  events lost                              ${fmt(total - distinct.size, 0)}      (target 0)`);
    out(`  events stored twice                      ${fmt(ticks.length - distinct.size, 0)}      (target 0)`);
    out(`  late events (box a's, after the heal)    ${fmt(events.filter((e) => e.late).length, 0)}`);
    out(`  gap notices                              ${fmt(events.filter((e) => e.type === "events.gap").length, 0)}`);
  } finally {
    await stopRunners(runners);
    await proxy.close();
    await stack.stop();
    rmSync(host, { recursive: true, force: true });
  }
}

await lock();
await partition();
