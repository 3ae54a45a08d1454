// `npm run bench:training`: the issue's runner and event figures on this machine, through the
// real stack (`npm start`'s process, with its local runner) and a real SSE client.
//  1. Event latency trainer -> runner -> edge -> events hub -> SSE client, p50/p99, at 100 and at
//     1,000 and 10,000 events/s, and the throughput of BENCH_BURST (5,000) events emitted at once;
//     every event must arrive (dense indexes, nothing dropped). Each printed on stdout and POSTed to
//     the runner's callback (the way SimpleTuner's webhooks come), in the sandbox the box gives
//     trainers. Targets: p50 < 20 ms, nothing dropped at 1,000/s; p50 < 5 ms with nothing dropped
//     at 10,000/s (issue 31, item 7).
//  2. Command latency: POST /api/training/validation/run -> the trainer sees the request in its
//     signal file. Target: p50 < 10 ms (issue 31, item 7).
//  3. Runner idle memory (RSS) of a separate runner process started as `npm run runner` starts
//     it (built to plain JavaScript, see runner/agent/build.mjs). Target: at most 60 MB (issue 31,
//     item 6; what each module costs: `npm run bench:runner-modules`).
// Settings: BENCH_SECONDS (5 per rate), BENCH_COMMANDS (20), BENCH_VIA (stdout,callback), BENCH_RATES
// (100,1000,10000,0; 0 is the burst).
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sseEvents } from "../helpers/sse";
import { fmt, percentiles, startBenchStack, watchCpu } from "./lib";

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const commands = Number(process.env.BENCH_COMMANDS ?? 20);
const list = (name: string, all: string) => (process.env[name] ?? all).split(",").filter(Boolean);
const vias = list("BENCH_VIA", "stdout,callback") as ("stdout" | "callback")[];
const rates = list("BENCH_RATES", "100,1000,10000,0").map(Number);
const out = (line: string) => process.stdout.write(line + "\n");
const now = () => performance.timeOrigin + performance.now();

// A trainer that waits 2 s (for the watcher to connect), then emits `rate` events a second for
// `seconds` (rate 0: `--bench_count` events as fast as it can), each stamped with the wall-clock
// time it was emitted: printed on stdout, or POSTed to its runner's callback (TRAINER_CALLBACK_URL,
// as SimpleTuner's webhooks are; at most 16 requests in flight).
const EMITTER = `
const arg = (n) => process.argv[process.argv.indexOf(n) + 1];
const rate = Number(arg("--bench_rate")), total = rate ? rate * Number(arg("--bench_seconds")) : Number(arg("--bench_count"));
const via = arg("--bench_via"), url = process.env.TRAINER_CALLBACK_URL;
const stamp = () => performance.timeOrigin + performance.now();
let inFlight = 0; const waiting = [];
const post = (body) => { inFlight++; fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body })
  .then((r) => r.arrayBuffer(), (e) => { console.error(String(e)); process.exit(3); })
  .finally(() => { inFlight--; if (waiting.length) post(waiting.shift()); }); };
const emit = (event) => { const line = JSON.stringify(event);
  if (via === "callback") { if (inFlight < 16) post(line); else waiting.push(line); } else process.stdout.write(line + "\\n"); };
const finish = () => (inFlight || waiting.length ? setTimeout(finish, 5) : setTimeout(() => process.exit(0), 200));
setTimeout(() => {
  const start = stamp(); let n = 0;
  const tick = () => {
    const due = rate ? Math.min(total, Math.floor(((stamp() - start) / 1000) * rate) + 1) : Math.min(total, n + 500);
    while (n < due) emit({ type: "bench.tick", data: { n: n++, t: stamp() } });
    if (n < total) setTimeout(tick, rate ? 1 : 0); else finish();
  };
  tick();
}, 2000);`;

// A trainer that watches its signal file as SimpleTuner's train.py does (stat, re-read on a new
// mtime, one action per counter increase) and reports, with the time, each request it sees.
const LISTENER = `
const fs = require("node:fs");
const file = process.env.SIMPLETUNER_ACCELERATE_SIGNAL_FILE; let seen = 0, mtime = 0;
const stamp = () => performance.timeOrigin + performance.now();
process.stdout.write(JSON.stringify({ type: "bench.ready", data: {} }) + "\\n");
setInterval(() => {
  let now = 0, count = seen; try { now = fs.statSync(file).mtimeMs; if (now !== mtime) count = JSON.parse(fs.readFileSync(file, "utf8")).manual_validation; mtime = now; } catch {}
  while (seen < count) process.stdout.write(JSON.stringify({ type: "bench.command", data: { n: seen++, t: stamp() } }) + "\\n");
}, 1);
process.on("SIGTERM", () => process.exit(0));`;

interface Sse {
  events: AsyncGenerator<{ id: number; data: any }>;
  close(): void;
}

async function openSse(url: string, headers: Record<string, string>): Promise<Sse> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { ...headers, accept: "text/event-stream" }, signal: controller.signal });
  if (!response.ok) throw new Error(`stream answered ${response.status}`);
  async function* events() {
    for await (const e of sseEvents(response.body!)) {
      if (e.event === "end") return;
      yield { id: Number(e.id), data: e.data };
    }
  }
  return { events: events(), close: () => controller.abort() };
}

// The emitter and the listener are admin commands (--trainer_command), which a box runs only when
// its runner config allows raw commands (README "Security in short").
// Its job directories go to a temporary directory, not the checkout's ./.runner.
const runnerDir = mkdtempSync(join(tmpdir(), "bench-runner-"));
const runnerConfig = join(runnerDir, "runner.json");
writeFileSync(runnerConfig, JSON.stringify({ allow_raw_commands: true, work_dir: join(runnerDir, "work") }));
const stack = await startBenchStack({ localRunner: true, env: { RUNNER_CONFIG: runnerConfig } });
try {
  const auth = { "x-api-key": stack.adminKey };
  const json = { ...auth, "content-type": "application/json" };
  const put = (name: string, config: Record<string, unknown>) =>
    fetch(`${stack.base}/api/configs/${name}`, { method: "PUT", headers: json, body: JSON.stringify({ config }) });
  await stack.post("/api/queue/concurrency", { local_job_max_concurrent: 4 });
  // 10,000 events/s for 5 s is the default cap of one job's log (50,000 events, README "Bounds"): raised, so
  // what is measured is the path, not the cap.
  const limits = await fetch(`${stack.base}/api/admin/event-limits`, {
    method: "PUT",
    headers: json,
    body: JSON.stringify({ max_events_per_job: 10_000_000 }),
  });
  if (!limits.ok) throw new Error(`event limits: ${limits.status} ${await limits.text()}`);

  // --- 1. event latency and throughput, printed and through the callback -----------------------
  await stack.post("/api/configs/environments", { name: "emitter" });
  const burst = Number(process.env.BENCH_BURST ?? 5000);
  for (const via of vias)
    for (const rate of rates) {
      await put("emitter", {
        "--num_processes": 0,
        "--trainer_command": JSON.stringify([process.execPath, "-e", EMITTER, "--"]),
        "--bench_rate": rate,
        "--bench_seconds": seconds,
        "--bench_count": burst,
        "--bench_via": via,
      });
      const job = (await (await stack.post("/api/queue/submit", { config_name: "emitter" })).json()) as { job_id: string; status: string };
      if (job.status !== "running") throw new Error(`the emitter job is ${job.status}`);
      const sse = await openSse(`${stack.base}/api/training/events/stream?job_id=${job.job_id}`, auth);
      const latencies: number[] = [];
      const seen: number[] = [];
      let ids = 0;
      let gaps = 0;
      // What the runner says it dropped (its queue holds at most 50,000 events while the edge lags).
      let runnerDropped = 0;
      let truncated = false;
      let first = Infinity;
      let last = 0;
      let cpu: ReturnType<typeof watchCpu> | null = null;
      for await (const e of sse.events) {
        if (e.id !== ids) gaps++;
        ids = e.id + 1;
        if (e.data.type === "events.dropped") runnerDropped += Number(e.data.data?.count ?? 0);
        if (e.data.type === "events.truncated") truncated = true;
        if (e.data.type !== "bench.tick") continue;
        const at = now();
        cpu ??= watchCpu(stack.pid, (p) =>
          p.pid === stack.pid ? "service (front, libSQL, runner)" : p.name === "node" ? "trainer" : p.name,
        );
        first = Math.min(first, e.data.data.t);
        last = at;
        latencies.push(at - e.data.data.t);
        seen.push(e.data.data.n);
      }
      sse.close();
      if (!seen.length) {
        // The emitter never ran (e.g. no bubblewrap on this box, so no --trainer_command): say why, not a NaN.
        const entry = (await (await fetch(`${stack.base}/api/queue/jobs/${job.job_id}`, { headers: auth })).json()) as {
          status: string;
          error_message: string | null;
        };
        throw new Error(`the emitter job ${job.job_id} sent no events: ${entry.status}: ${entry.error_message ?? "no error given"}`);
      }
      const used = cpu?.stop() ?? { wall: 1, byName: new Map<string, number>() };
      const expected = rate ? rate * seconds : burst;
      const missing = expected - new Set(seen).size;
      const l = percentiles(latencies);
      const label = `${via.padEnd(8)} ${rate ? `${fmt(rate, 0)} events/s for ${seconds}s` : `${fmt(burst, 0)} events at once`}`;
      const rateNote = rate ? "" : `; ${((seen.length / (last - first)) * 1000).toFixed(0)} events/s through`;
      out(
        `1.  ${label}: ${seen.length} of ${expected} received, ${missing} missing (${runnerDropped} dropped by the runner, said by events.dropped${truncated ? "; the log was truncated at its cap" : ""}), ${gaps} index gaps; trainer -> SSE client p50 ${l.p50.toFixed(1)} ms, p99 ${l.p99.toFixed(1)} ms${rateNote}`,
      );
      // Which process the load saturates: CPU seconds per wall second (1.00 is one core), from the submit to the end.
      const load = [...used.byName].filter(([, s]) => s >= 0.01 * used.wall).sort((a, b) => b[1] - a[1]);
      const cpuTotal = [...used.byName.values()].reduce((sum, s) => sum + s, 0);
      out(
        `    CPU per wall second, first event received to the last, ${used.wall.toFixed(1)} s: ${load.map(([name, s]) => `${name} ${(s / used.wall).toFixed(2)}`).join(", ")}; all of them: ${((cpuTotal / Math.max(1, seen.length)) * 1e6).toFixed(0)} us of CPU per event`,
      );
      const whole = missing === 0 && gaps === 0;
      if (rate === 10_000) out(`    target p50 < 5 ms with nothing dropped at 10,000/s: ${l.p50 < 5 && whole ? "met" : "NOT met"}`);
      else if (rate)
        out(
          `    target p50 < 20 ms: ${l.p50 < 20 ? "met" : "NOT met"}${rate === 1000 ? `; nothing dropped at 1,000/s: ${whole ? "met" : "NOT met"}` : ""}`,
        );
    }

  // --- 2. command latency --------------------------------------------------------------------
  await stack.post("/api/configs/environments", { name: "listener" });
  await put("listener", { "--num_processes": 0, "--trainer_command": JSON.stringify([process.execPath, "-e", LISTENER, "--"]) });
  const job = (await (await stack.post("/api/queue/submit", { config_name: "listener" })).json()) as { job_id: string };
  const sse = await openSse(`${stack.base}/api/training/events/stream?job_id=${job.job_id}`, auth);
  // next(), not for-await: leaving a for-await loop would close the stream.
  const waitFor = async (test: (data: any) => boolean) => {
    for (;;) {
      const { value, done } = await sse.events.next();
      if (done) throw new Error("the stream ended");
      if (test(value.data)) return value.data;
    }
  };
  await waitFor((d) => d.type === "bench.ready");
  const commandLatencies: number[] = [];
  // Where the time goes: until the POST is answered (the edge has stored the command and handed it
  // to the runner's channel), and the rest (the runner, the signal file, the trainer's 1 ms poll).
  const answered: number[] = [];
  for (let i = 0; i < commands; i++) {
    const t0 = now();
    const reply = await stack.post("/api/training/validation/run", { job_id: job.job_id });
    if (!reply.ok) throw new Error(`validation/run answered ${reply.status}`);
    answered.push(now() - t0);
    const seenAt = await waitFor((d) => d.type === "bench.command" && d.data.n === i);
    commandLatencies.push(seenAt.data.t - t0);
    await new Promise((r) => setTimeout(r, 100));
  }
  sse.close();
  await stack.post("/api/training/cancel", { job_id: job.job_id });
  const c = percentiles(commandLatencies);
  out(
    `2.  command latency, ${commands} x POST /api/training/validation/run -> the trainer sees it: p50 ${c.p50.toFixed(1)} ms, p99 ${c.p99.toFixed(1)} ms (target p50 < 10 ms: ${c.p50 < 10 ? "met" : "NOT met"}); the POST answered p50 ${percentiles(answered).p50.toFixed(1)} ms`,
  );

  // --- 3. runner idle memory -----------------------------------------------------------------
  const created = (await (await stack.post("/api/admin/workers", { name: "idle-runner" })).json()) as { token: string };
  // As `npm run runner` starts it: built, then plain node.
  execFileSync(process.execPath, ["runner/agent/build.mjs"]);
  const runner = spawn(process.execPath, [".build/runner/main.mjs", "start", "--url", stack.base, "--work-dir", join(runnerDir, "idle")], {
    env: { ...process.env, RUNNER_TOKEN: created.token },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    runner.stdout!.on("data", (d: Buffer) => d.toString().includes("registered as worker") && resolve());
    runner.once("exit", (code) => reject(new Error(`the runner exited with ${code}`)));
  });
  const samples: number[] = [];
  for (let i = 0; i < 10; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    samples.push(Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${runner.pid}/status`, "utf8"))![1]) / 1024);
  }
  runner.kill("SIGTERM");
  const rss = Math.max(...samples.slice(5));
  out(
    `3.  runner idle RSS (npm run runner's process: registered, channel open, 10 s idle): ${rss.toFixed(1)} MB (target at most 60 MB: ${rss <= 60 ? "met" : "NOT met"})`,
  );
} finally {
  await stack.stop();
  rmSync(runnerDir, { recursive: true, force: true });
}
