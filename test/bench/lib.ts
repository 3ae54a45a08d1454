// Shared by the benchmarks: a local stack in its own process (as `npm start` runs it) and a
// closed-loop load generator. Not a test; nothing here asserts.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

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
  /** The service's Node host process; workerd is its child. */
  pid: number;
  dataDir: string;
  adminKey: string;
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
      pid: service.pid!,
      dataDir,
      adminKey: key,
      post: (path, body, headers = {}) => post(path, body, { "x-api-key": key, ...headers }),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * CPU time used so far (user + system, ms) by a process and each of its children, by name: the
 * root as "host" (the stack's Node host), its children by command ("workerd"). Linux only (/proc);
 * empty elsewhere.
 */
export function processTreeCpuMs(rootPid: number): Map<string, number> {
  const used = new Map<string, number>();
  try {
    const rows = execFileSync("ps", ["-eo", "pid=,ppid=,comm="]).toString().trim().split("\n");
    const tree = rows.map((r) => r.trim().split(/\s+/)).filter(([pid, ppid]) => Number(pid) === rootPid || Number(ppid) === rootPid);
    const tick = 1000 / 100; // USER_HZ: 100 on Linux
    for (const [pid, , comm] of tree) {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      const name = Number(pid) === rootPid ? "host" : comm!;
      used.set(name, (used.get(name) ?? 0) + (Number(fields[11]) + Number(fields[12])) * tick);
    }
  } catch {
    // Not Linux, or a process ended meanwhile: no figure.
  }
  return used;
}
