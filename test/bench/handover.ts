// `npm run bench:handover`: how fast a freed GPU takes its next job (issue 31, "Handover"), through
// the real stack (`npm start`'s process with its local runner) on a box of BENCH_GPUS (4) GPUs as a
// fake nvidia-smi reports them (test/fakes/nvidia-smi), every one busy with short jobs and
// BENCH_JOBS (8 per GPU) queued in all. Each job's trainer stamps the wall-clock time its process
// started, runs BENCH_RUN_MS (300), prints a final burst of BENCH_TAIL (50) numbered lines and
// exits at once, stamping the moment before it exits. Per freed GPU (a job that started on a GPU
// another job had just left):
//   - exit -> running: the previous trainer's exit to the next job's `started_at` (the edge
//     marks it running when it assigns it: the runner's end report, the Scheduler's pass);
//   - exit -> trainer: to the next trainer process's start (the runner's wake-up, its ask for
//     work, its launch).
// p50/p90/p99 of each, and whether every job's final lines reached its events, whole and in order
// (nothing lost, nothing twice). Target: exit -> running p50 <= 120 ms.
// Settings: BENCH_GPUS, BENCH_JOBS, BENCH_RUN_MS, BENCH_TAIL.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startBenchStack } from "./lib";

const gpus = Number(process.env.BENCH_GPUS ?? 4);
const jobs = Number(process.env.BENCH_JOBS ?? gpus * 8);
const runMs = Number(process.env.BENCH_RUN_MS ?? 300);
const tail = Number(process.env.BENCH_TAIL ?? 50);
const out = (line: string) => process.stdout.write(line + "\n");
const loadavg = () => readFileSync("/proc/loadavg", "utf8").trim();

// The trainer: its start (its process's time origin), a short run, then its last lines and its
// exit stamp in one burst, and process.exit at once (a TTY's stdout is written synchronously).
const TRAINER = `
const arg = (n) => process.argv[process.argv.indexOf(n) + 1];
const stamp = () => performance.timeOrigin + performance.now();
process.stdout.write(JSON.stringify({ type: "bench.start", data: { t: performance.timeOrigin } }) + "\\n");
setTimeout(() => {
  let burst = "";
  for (let i = 0; i < Number(arg("--bench_tail")); i++) burst += "final line " + i + " of this trainer\\n";
  process.stdout.write(burst + JSON.stringify({ type: "bench.exit", data: { t: stamp() } }) + "\\n");
  process.exit(0);
}, Number(arg("--bench_run_ms")));`;

/** p-th percentile (nearest rank) of `values`. */
function quantile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}
const summary = (values: number[]) => {
  if (!values.length) return "no samples";
  const at = (p: number) => `p${p * 100} ${quantile(values, p).toFixed(1)} ms`;
  return `${at(0.5)}, ${at(0.9)}, ${at(0.99)} (n=${values.length})`;
};

const runnerDir = mkdtempSync(join(tmpdir(), "bench-handover-"));
const runnerConfig = join(runnerDir, "runner.json");
// The trainer is an admin's command (--trainer_command), which a box runs only when its config
// allows raw commands; sandboxed by bubblewrap where it is installed, as bench:training's.
writeFileSync(runnerConfig, JSON.stringify({ allow_raw_commands: true, work_dir: join(runnerDir, "work") }));
const stack = await startBenchStack({
  localRunner: true,
  env: { RUNNER_CONFIG: runnerConfig, PATH: `${resolve("test/fakes")}:${process.env.PATH}`, FAKE_NVIDIA_GPUS: String(gpus) },
});
try {
  const auth = { "x-api-key": stack.adminKey };
  const get = async (path: string) => {
    const response = await fetch(stack.base + path, { headers: auth });
    if (!response.ok) throw new Error(`GET ${path} answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as any;
  };
  await stack.post("/api/queue/concurrency", { local_job_max_concurrent: gpus });
  await stack.post("/api/configs/environments", { name: "handover" });
  const put = await fetch(`${stack.base}/api/configs/handover`, {
    method: "PUT",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({
      config: {
        "--num_processes": 1,
        "--trainer_command": JSON.stringify([process.execPath, "-e", TRAINER, "--"]),
        "--bench_run_ms": runMs,
        "--bench_tail": tail,
      },
    }),
  });
  if (!put.ok) throw new Error(`PUT the environment: ${put.status} ${await put.text()}`);
  out(`box: ${gpus} GPU(s) (fake nvidia-smi), ${jobs} jobs of ${runMs} ms with ${tail} final lines each; load ${loadavg()}`);

  const ids: string[] = [];
  for (let i = 0; i < jobs; i++) {
    const reply = await stack.post("/api/queue/submit", { config_name: "handover", target: "local" });
    const body = (await reply.json()) as { job_id: string };
    if (!reply.ok) throw new Error(`submit answered ${reply.status}: ${JSON.stringify(body)}`);
    ids.push(body.job_id);
  }
  const entries = new Map<string, any>();
  for (const deadline = Date.now() + 60_000 + jobs * runMs * 4; ; await new Promise((r) => setTimeout(r, 250))) {
    const list = await get("/api/queue?include_completed=true&limit=1000");
    for (const job of list.jobs) if (ids.includes(job.job_id)) entries.set(job.job_id, job);
    const ended = ids.filter((id) => ["completed", "failed", "cancelled"].includes(entries.get(id)?.status));
    if (ended.length === ids.length) break;
    if (Date.now() > deadline) throw new Error(`only ${ended.length} of ${jobs} jobs ended in time`);
  }

  // Each job's events: its start and exit stamps, and its final lines.
  interface Run {
    id: string;
    gpu: number;
    runningAt: number;
    start: number;
    exit: number;
    status: string;
  }
  const runs: Run[] = [];
  let whole = 0;
  const problems: string[] = [];
  for (const id of ids) {
    const events: any[] = [];
    for (let since = 0; ;) {
      const page = await get(`/api/training/events?job_id=${id}&since_index=${since}&limit=1000`);
      events.push(...page.events);
      if (!page.events.length || page.next_cursor === null) break;
      since = page.next_index;
    }
    const start = events.find((e) => e.type === "bench.start")?.data?.t;
    const exit = events.find((e) => e.type === "bench.exit")?.data?.t;
    const lines = events.filter((e) => e.type === "log" && /^final line \d+ of this trainer$/.test(e.message ?? e.title ?? ""));
    const numbers = lines.map((e) => Number(/\d+/.exec(e.message ?? e.title)![0]));
    if (numbers.length === tail && numbers.every((n, i) => n === i)) whole++;
    else problems.push(`${id}: ${numbers.length} of ${tail} final lines${numbers.some((n, i) => n !== i) ? ", out of order" : ""}`);
    const entry = entries.get(id);
    if (typeof start !== "number" || typeof exit !== "number") {
      problems.push(`${id}: ${entry.status}, no ${typeof start === "number" ? "exit" : "start"} stamp (${entry.error_message ?? ""})`);
      continue;
    }
    runs.push({ id, gpu: entry.allocated_gpus?.[0] ?? -1, runningAt: Date.parse(entry.started_at), start, exit, status: entry.status });
  }

  const toRunning: number[] = [];
  const toTrainer: number[] = [];
  for (let g = 0; g < gpus; g++) {
    const on = runs.filter((r) => r.gpu === g).sort((a, b) => a.runningAt - b.runningAt);
    for (let i = 1; i < on.length; i++) {
      toRunning.push(on[i]!.runningAt - on[i - 1]!.exit);
      toTrainer.push(on[i]!.start - on[i - 1]!.exit);
    }
  }
  const completed = runs.filter((r) => r.status === "completed").length;
  out(`jobs: ${completed} of ${jobs} completed; final lines whole and in order in ${whole} of ${jobs} jobs${problems.length ? ":" : ""}`);
  for (const problem of problems.slice(0, 10)) out(`    ${problem}`);
  out(`exit -> next job running (edge's started_at):   ${summary(toRunning)}`);
  out(`exit -> next trainer process started:           ${summary(toTrainer)}`);
  const p50 = toRunning.length ? quantile(toRunning, 0.5) : Infinity;
  out(`load at the end: ${loadavg()}`);
  out(`target exit -> running p50 <= 120 ms: ${p50 <= 120 ? "met" : "NOT met"}; nothing lost: ${whole === jobs ? "met" : "NOT met"}`);
} finally {
  await stack.stop();
  rmSync(runnerDir, { recursive: true, force: true });
}
