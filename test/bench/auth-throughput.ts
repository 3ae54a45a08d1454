// `npm run bench`: requests/s of an API-key-authenticated GET (/api/users/me) against a trivial
// public route (/api/cloud/health/live) on the same local stack, measured in alternating rounds
// so both see the same machine state. Target: the authenticated route at >= 50 % of the trivial.
// The stack runs as `npm start` does, in its own process, so the load generator here does not
// share an event loop with the libSQL bridge it measures.
//
// Settings (environment): BENCH_CONCURRENCY (default 16), BENCH_SECONDS per round (default 5),
// BENCH_ROUNDS per route (default 3).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);

interface Round {
  requests: number;
  perSecond: number;
  p50: number;
  p99: number;
}

async function round(url: string, headers: Record<string, string>, expectStatus: number): Promise<Round> {
  const latencies: number[] = [];
  const deadline = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        const response = await fetch(url, { headers });
        await response.arrayBuffer();
        if (response.status !== expectStatus) throw new Error(`${url} answered ${response.status}, expected ${expectStatus}`);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
  return { requests: latencies.length, perSecond: latencies.length / elapsed, p50: at(0.5), p99: at(0.99) };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const fmt = (n: number, digits = 1) => n.toFixed(digits).padStart(8);

async function freePort(): Promise<number> {
  return new Promise((done) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

async function waitUntilLive(base: string): Promise<void> {
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 200))) {
    if (await fetch(`${base}/api/cloud/health/ready`).then((r) => r.ok, () => false)) return;
  }
  throw new Error("the stack did not become ready within 60 s");
}

const dataDir = mkdtempSync(join(tmpdir(), "training-service-bench-"));
const port = await freePort();
const service = spawn(process.execPath, ["--import", "tsx", "edge/local/main.ts"], {
  env: { ...process.env, SERVICE_HOST: "127.0.0.1", SERVICE_PORT: String(port), SERVICE_DATA_DIR: dataDir, SERVICE_LOG_LEVEL: "WARNING" },
  stdio: ["ignore", "ignore", "inherit"],
});
const exited = new Promise((done) => service.once("exit", done));
try {
  const base = `http://127.0.0.1:${port}`;
  await waitUntilLive(base);
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(base + path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  const admin = await post("/api/cloud/auth/setup/first-admin", { email: "bench@example.com", username: "bench", password: "bench-password-1" });
  const cookie = /(st_session=[^;]+)/.exec(admin.headers.get("set-cookie") ?? "")?.[1];
  if (admin.status !== 201 || !cookie) throw new Error(`first admin: ${admin.status} ${await admin.text()}`);
  const created = await post("/api/cloud/auth/api-keys", { name: "bench" }, { cookie });
  const { key } = (await created.json()) as { key: string };

  const routes: { name: string; url: string; headers: Record<string, string> }[] = [
    { name: "GET /api/cloud/health/live (public)", url: `${base}/api/cloud/health/live`, headers: {} },
    { name: "GET /api/users/me (X-API-Key)", url: `${base}/api/users/me`, headers: { "x-api-key": key } },
  ];
  process.stdout.write(`auth-throughput: ${concurrency} concurrent clients, ${rounds} rounds of ${seconds}s per route, alternating\n`);
  for (const route of routes) await round(route.url, route.headers, 200); // warm-up, not counted
  const results = routes.map(() => [] as Round[]);
  for (let r = 0; r < rounds; r++) {
    for (const [i, route] of routes.entries()) {
      const result = await round(route.url, route.headers, 200);
      results[i]!.push(result);
      process.stdout.write(`  round ${r + 1} ${route.name.padEnd(38)} ${fmt(result.perSecond)} req/s  p50 ${fmt(result.p50, 2)} ms  p99 ${fmt(result.p99, 2)} ms\n`);
    }
  }
  const perSecond = results.map((rs) => median(rs.map((x) => x.perSecond)));
  process.stdout.write("\nmedian of rounds:\n");
  for (const [i, route] of routes.entries()) {
    process.stdout.write(`  ${route.name.padEnd(38)} ${fmt(perSecond[i]!)} req/s  p50 ${fmt(median(results[i]!.map((x) => x.p50)), 2)} ms  p99 ${fmt(median(results[i]!.map((x) => x.p99)), 2)} ms\n`);
  }
  const ratio = perSecond[1]! / perSecond[0]!;
  process.stdout.write(`\nauthenticated / trivial: ${(ratio * 100).toFixed(1)} % (target >= 50 %): ${ratio >= 0.5 ? "met" : "NOT met"}\n`);
} finally {
  service.kill("SIGTERM");
  await exited;
  rmSync(dataDir, { recursive: true, force: true });
}
