// `npm run bench:scheduler`: the three scheduler figures on this machine.
//  1. A pass over 10,000 pending cloud jobs from 200 users in 20 teams with capacity for 500:
//     the pure planner alone, then the whole pass in the Scheduler DO (libSQL reads, planning,
//     the admission batch) through POST /api/queue/process. Target: 500 admitted in one pass,
//     the pass <= 100 ms.
//  2. Submit-to-running latency with free capacity (CPU jobs on the local box), p50 and p99
//     over 200 sequential submits. Target: p50 < 50 ms.
//  3. Sustained local submissions/s through HTTP next to the trivial-route ceiling measured in
//     the same run, in alternating rounds. Target: >= 60 % of the ceiling (issue 31). Then the CPU each request
//     cost workerd and the Node host, which a loaded machine moves far less than the rates.
// Settings: BENCH_CONCURRENCY (16), BENCH_SECONDS (5), BENCH_ROUNDS (5).
import { join } from "node:path";
import { createClient } from "@libsql/client";
import { CONCURRENCY_DEFAULTS } from "../../shared/schemas/queue";
import { planPass, type PendingJob } from "../../edge/scheduler/plan";
import { fmt, median, percentiles, processTreeCpuMs, round, startBenchStack, type Request } from "./lib";

const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const out = (line: string) => process.stdout.write(line + "\n");
const LIMITS = { max_concurrent: 500, user_max_concurrent: 5, team_max_concurrent: 100, enable_fair_share: true };

// --- 1a. the planner alone -----------------------------------------------------------------
const now = Date.now();
const pending: PendingJob[] = Array.from({ length: 10_000 }, (_, i) => ({
  id: i + 1,
  jobId: `job-${i}`,
  userId: i % 200,
  teamId: `team-${i % 20}`,
  priority: [0, 10, 20, 30][i % 4]!,
  priorityOverride: null,
  queuedAt: now - (10_000 - i) * 1000,
  jobType: "cloud",
  numProcesses: 1,
  target: "auto",
  workerLabels: null,
  deviceIds: null,
  anyGpu: false,
}));
const times: number[] = [];
let admitted = 0;
for (let i = 0; i < 20; i++) {
  const t0 = performance.now();
  admitted = planPass({ now, limits: { ...CONCURRENCY_DEFAULTS, ...LIMITS }, pending, running: [], localDevices: null, workers: [] })
    .admitted.length;
  times.push(performance.now() - t0);
}
const plannerTimes = percentiles(times.slice(5));
out(
  `1a. planner, 10,000 pending / 200 users / 20 teams, capacity 500: ${admitted} admitted; ${plannerTimes.p50.toFixed(1)} ms p50, ${plannerTimes.p99.toFixed(1)} ms max (15 runs)`,
);

const stack = await startBenchStack();
try {
  const auth = { "x-api-key": stack.adminKey };
  // --- 1b. the whole pass in the DO -----------------------------------------------------------
  // Pending rows written straight into the database, as a big backlog would have accumulated.
  const db = createClient({ url: `file:${join(stack.dataDir, "service.db")}` });
  const rows = pending.map((p) => ({
    sql: "INSERT INTO queue_entries (job_id, user_id, team_id, priority, status, queued_at, job_type) VALUES (?, ?, ?, ?, 'pending', ?, 'cloud')",
    args: [p.jobId, p.userId, p.teamId, p.priority, new Date(p.queuedAt).toISOString()],
  }));
  for (let i = 0; i < rows.length; i += 1000) await db.batch(rows.slice(i, i + 1000), "write");
  db.close();
  // Capacity 0 first: a manual pass re-reads all 10,000 entries (cold) and admits nothing.
  await stack.post("/api/queue/concurrency", { ...LIMITS, max_concurrent: 0 });
  let t0 = performance.now();
  await stack.post("/api/queue/process", {});
  const cold = performance.now() - t0;
  // Raising the limit is the timed pass: it runs on the Scheduler's in-memory entries.
  t0 = performance.now();
  await stack.post("/api/queue/concurrency", LIMITS);
  const warm = performance.now() - t0;
  const stats = (await (await fetch(`${stack.base}/api/queue/stats`, { headers: auth })).json()) as {
    running: number;
    queue_depth: number;
  };
  out(`1b. whole pass in the Scheduler DO over HTTP: cold re-read of 10,000 entries (POST /api/queue/process) ${cold.toFixed(0)} ms;`);
  out(
    `    limit raised to 500 (POST /api/queue/concurrency, settings write + pass + 500-row admission batch): ${warm.toFixed(0)} ms, ${stats.running} running, ${stats.queue_depth} still pending`,
  );
  out(
    `    target: 500 admitted in one pass (${stats.running === 500 ? "met" : "NOT met"}), pass <= 100 ms (${warm <= 100 ? "met" : "NOT met"})`,
  );

  // The backlog goes before the local measurements (it is cloud work and would only add planning time).
  const clear = createClient({ url: `file:${join(stack.dataDir, "service.db")}` });
  await clear.execute(
    "UPDATE queue_entries SET status = 'cancelled', completed_at = datetime('now') WHERE status IN ('pending', 'running')",
  );
  clear.close();
  await stack.post("/api/queue/process", {});

  // --- 2. submit-to-running latency ---------------------------------------------------------
  const created = (await (await stack.post("/api/admin/workers", { name: "bench-box" })).json()) as { token: string };
  await stack.post("/api/workers/register", { role: "local", gpus: [] }, { authorization: `Bearer ${created.token}` });
  await stack.post("/api/configs/environments", { name: "cpu" });
  await fetch(`${stack.base}/api/configs/cpu`, {
    method: "PUT",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ config: { "--num_processes": 0 } }),
  });
  await stack.post("/api/queue/concurrency", { local_job_max_concurrent: 1024 });
  const latencies: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t0 = performance.now();
    const answer = (await (await stack.post("/api/queue/submit", { config_name: "cpu", target: "local" })).json()) as { status: string };
    latencies.push(performance.now() - t0);
    if (answer.status !== "running") throw new Error(`submit ${i} answered ${answer.status}`);
  }
  const l = percentiles(latencies);
  out(
    `2.  submit-to-running, 200 sequential submits with free capacity: p50 ${l.p50.toFixed(1)} ms, p99 ${l.p99.toFixed(1)} ms (target p50 < 50 ms: ${l.p50 < 50 ? "met" : "NOT met"})`,
  );

  // --- 3. sustained submissions vs the trivial route -------------------------------------------
  // Alternating rounds, each pair compared, the median pair reported: this box's speed drifts
  // by tens of percent over a minute, and a single pair can land on either side of the target.
  const submitRequest = {
    url: `${stack.base}/api/queue/submit`,
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: () => JSON.stringify({ config_name: "cpu", target: "local" }),
  };
  const pairs: { trivial: number; submits: number; keyed: number; p50: number; p99: number }[] = [];
  // CPU per request of workerd and of the Node host (the client front and the libSQL bridge), summed
  // over the rounds: unlike a rate, it hardly moves with what else the machine runs.
  const cpu = new Map<string, { requests: number; used: Map<string, number> }>();
  const measured = async (name: string, request: Request) => {
    const before = processTreeCpuMs(stack.pid);
    const result = await round(request, { concurrency, seconds });
    const after = processTreeCpuMs(stack.pid);
    const entry = cpu.get(name) ?? { requests: 0, used: new Map<string, number>() };
    entry.requests += result.requests;
    for (const [process, ms] of after) entry.used.set(process, (entry.used.get(process) ?? 0) + ms - (before.get(process) ?? 0));
    cpu.set(name, entry);
    return result;
  };
  const finishAll = async () => {
    // Between rounds every submitted job "finishes" (the runner arrives with the next issue), so
    // each round starts from the same empty queue instead of one thousands of jobs deeper.
    const db = createClient({ url: `file:${join(stack.dataDir, "service.db")}` });
    await db.execute(
      "UPDATE queue_entries SET status = 'completed', completed_at = datetime('now') WHERE status IN ('pending', 'running')",
    );
    db.close();
    await stack.post("/api/queue/process", {});
  };
  // Warm-up, not reported: the first round of each route otherwise runs on a cold runtime.
  await round({ url: `${stack.base}/api/cloud/health/live` }, { concurrency, seconds: 2 });
  await round(submitRequest, { concurrency, seconds: 2 });
  for (let r = 0; r < rounds; r++) {
    await finishAll();
    const trivial = await measured("trivial route", { url: `${stack.base}/api/cloud/health/live` });
    const submits = await measured("submit", submitRequest);
    // For scale: the cheapest request that needs an API key (one key lookup, nothing else).
    const keyed = await measured("API-key GET", { url: `${stack.base}/api/users/me`, headers: auth });
    pairs.push({ trivial: trivial.perSecond, submits: submits.perSecond, keyed: keyed.perSecond, p50: submits.p50, p99: submits.p99 });
    out(
      `3.  round ${r + 1}: trivial route ${fmt(trivial.perSecond)} req/s; local submits ${fmt(submits.perSecond)} req/s (p50 ${submits.p50.toFixed(1)} ms, p99 ${submits.p99.toFixed(1)} ms) = ${((submits.perSecond / trivial.perSecond) * 100).toFixed(1)} %; GET /api/users/me ${fmt(keyed.perSecond)} req/s = ${((keyed.perSecond / trivial.perSecond) * 100).toFixed(1)} %`,
    );
  }
  const ratio = median(pairs.map((p) => p.submits / p.trivial));
  const keyedRatio = median(pairs.map((p) => p.keyed / p.trivial));
  out(
    `    ${concurrency} clients, ${rounds} alternating rounds of ${seconds}s: submits / trivial, median ${(ratio * 100).toFixed(1)} % (issue 31's target >= 60 %): ${ratio >= 0.6 ? "met" : "NOT met"}`,
  );
  out(`    for scale, an API-key GET that does nothing else: median ${(keyedRatio * 100).toFixed(1)} % of the trivial route`);
  const perRequest = [...cpu].map(([name, { requests, used }]) => {
    const each = [...used].map(([process, ms]) => `${process} ${(ms / requests).toFixed(2)}`).join(" + ");
    return `${name} ${each} ms`;
  });
  if (perRequest.length) out(`    CPU per request (the service's processes, all rounds): ${perRequest.join("; ")}`);
} finally {
  await stack.stop();
}
