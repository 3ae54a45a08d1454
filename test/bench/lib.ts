// Shared by the benchmarks: a local stack in its own process (as `npm start` runs it) and a
// closed-loop load generator. Not a test; nothing here asserts.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { below } from "../helpers/process-tree";

export interface Round {
  requests: number;
  perSecond: number;
  p50: number;
  p99: number;
}

export interface Request {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: () => string;
}

/** `concurrency` clients send `request` back to back for `seconds`; every answer must be `expectStatus`. */
export async function round(request: Request, options: { concurrency: number; seconds: number; expectStatus?: number }): Promise<Round> {
  const latencies: number[] = [];
  const deadline = performance.now() + options.seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: options.concurrency }, async () => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        const response = await fetch(request.url, { method: request.method ?? "GET", headers: request.headers, body: request.body?.() });
        const text = await response.text();
        if (response.status !== (options.expectStatus ?? 200))
          throw new Error(`${request.url} answered ${response.status}: ${text.slice(0, 200)}`);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  return { requests: latencies.length, perSecond: latencies.length / elapsed, ...percentiles(latencies) };
}

export function percentiles(values: number[]): { p50: number; p99: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50: at(0.5), p99: at(0.99) };
}

export const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
export const fmt = (n: number, digits = 1) => n.toFixed(digits).padStart(8);

async function freePort(): Promise<number> {
  return new Promise((done) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

export interface BenchStack {
  base: string;
  dataDir: string;
  adminKey: string;
  /** The stack's own process (its children: workerd, the local runner's trainers). */
  pid: number;
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
  stop(): Promise<void>;
}

/**
 * Starts `npm start`'s entry point on a free port in a temporary data directory, with an admin
 * and its API key. `localRunner`: also this machine's runner (off unless a benchmark runs jobs:
 * a runner executing every submitted job would be part of what is measured). `env`: more
 * environment variables for it (README "Configuration").
 */
export async function startBenchStack(options: { localRunner?: boolean; env?: Record<string, string> } = {}): Promise<BenchStack> {
  const dataDir = mkdtempSync(join(tmpdir(), "training-service-bench-"));
  const port = await freePort();
  const service = spawn(process.execPath, ["--import", "tsx", "edge/local/main.ts"], {
    env: {
      ...process.env,
      SERVICE_HOST: "127.0.0.1",
      SERVICE_PORT: String(port),
      SERVICE_DATA_DIR: dataDir,
      SERVICE_LOG_LEVEL: "WARNING",
      SERVICE_LOCAL_RUNNER: options.localRunner ? "1" : "0",
      ...options.env,
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const exited = new Promise((done) => service.once("exit", done));
  const base = `http://127.0.0.1:${port}`;
  const stop = async () => {
    service.kill("SIGTERM");
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    for (const deadline = Date.now() + 60_000; ; await new Promise((r) => setTimeout(r, 200))) {
      if (
        await fetch(`${base}/api/cloud/health/ready`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      if (Date.now() > deadline) throw new Error("the stack did not become ready within 60 s");
    }
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(base + path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
    const admin = await post("/api/cloud/auth/setup/first-admin", {
      email: "bench@example.com",
      username: "bench",
      password: "bench-password-1",
    });
    const cookie = /(st_session=[^;]+)/.exec(admin.headers.get("set-cookie") ?? "")?.[1];
    if (admin.status !== 201 || !cookie) throw new Error(`first admin: ${admin.status} ${await admin.text()}`);
    const { key } = (await (await post("/api/cloud/auth/api-keys", { name: "bench" }, { cookie })).json()) as { key: string };
    return {
      base,
      dataDir,
      adminKey: key,
      pid: service.pid!,
      post: (path, body, headers = {}) => post(path, body, { "x-api-key": key, ...headers }),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** One process of a tree and the CPU seconds (user + system) it has used so far. */
export interface ProcessCpu {
  pid: number;
  name: string;
  cpu: number;
}

/** A process as /proc/<pid>/stat gives it: its parent, command name, CPU seconds so far and RSS bytes. */
export interface ProcessStat extends ProcessCpu {
  ppid: number;
  rss: number;
}

/** Every process on the machine, from /proc (Linux only). */
export function readProcesses(): ProcessStat[] {
  const tick = 100; // USER_HZ: 100 on every Linux this runs on
  const procs: ProcessStat[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // The name is in parentheses and may hold spaces; the fields after it are fixed: state ppid
      // ... utime (the 14th field of the line) stime, rss (the 24th) in pages.
      const close = stat.lastIndexOf(")");
      const fields = stat.slice(close + 2).split(" ");
      const name = stat.slice(stat.indexOf("(") + 1, close);
      procs.push({
        pid: Number(entry),
        ppid: Number(fields[1]),
        name,
        cpu: (Number(fields[11]) + Number(fields[12])) / tick,
        rss: Number(fields[21]) * 4096,
      });
    } catch {
      // gone meanwhile
    }
  }
  return procs;
}

/** Every process under `rootPid` (itself included) with its CPU so far, from /proc. */
export function processTreeCpu(rootPid: number): ProcessCpu[] {
  const procs = readProcesses();
  const tree = new Set([rootPid, ...below(procs, rootPid)]);
  return procs.filter((p) => tree.has(p.pid)).map(({ pid, name, cpu }) => ({ pid, name, cpu }));
}

/**
 * Samples the CPU of a process tree (and of this process) every 200 ms until `stop`, which
 * answers the CPU seconds each command name used meanwhile (processes born meanwhile from 0;
 * one that ended: up to its last sample) and the wall seconds: what a benchmark prints to show
 * which process a load saturates.
 */
export function watchCpu(
  rootPid: number,
  label: (p: ProcessCpu) => string = (p) => p.name,
): { stop(): { wall: number; byName: Map<string, number> } } {
  const started = performance.now();
  const self0 = process.cpuUsage();
  const first = new Map(processTreeCpu(rootPid).map((p) => [p.pid, p.cpu]));
  const last = new Map<number, ProcessCpu>();
  const sample = () => {
    for (const p of processTreeCpu(rootPid)) last.set(p.pid, p);
  };
  sample();
  const timer = setInterval(sample, 200);
  return {
    stop() {
      clearInterval(timer);
      sample();
      const byName = new Map<string, number>();
      for (const p of last.values()) byName.set(label(p), (byName.get(label(p)) ?? 0) + p.cpu - (first.get(p.pid) ?? 0));
      const self = process.cpuUsage(self0);
      byName.set("benchmark client", (self.user + self.system) / 1e6);
      return { wall: (performance.now() - started) / 1000, byName };
    },
  };
}

/**
 * CPU time used so far (user + system, ms) by a process tree, by name: the root as "host" (the
 * stack's Node host), the others by command ("workerd"). Linux only (/proc); empty elsewhere.
 */
export function processTreeCpuMs(rootPid: number): Map<string, number> {
  const used = new Map<string, number>();
  for (const p of processTreeCpu(rootPid)) {
    const name = p.pid === rootPid ? "host" : p.name;
    used.set(name, (used.get(name) ?? 0) + p.cpu * 1000);
  }
  return used;
}
