// `npm run bench:followers`: issue 31's followers (item 5) on this machine, through the real stack
// (`npm start`'s process) and real SSE clients.
//
// BENCH_JOBS (20) running jobs on a registered box; their events are posted as a runner posts them
// (POST /api/workers/jobs/{id}/events with the box's token, batches numbered by attempt and seq, one
// batch in flight per job), BENCH_RATE (2) events a second per job. BENCH_FOLLOWERS (200) followers
// hold GET /api/training/events/stream open, BENCH_FOLLOWERS / BENCH_JOBS on each job, from 10 lead
// users (LIVE_STREAMS_PER_USER raised for them). Meanwhile 8 clients
// submit (POST /api/queue/submit) for BENCH_SECONDS (15); the same round with nothing else going on
// first, for the idle figure.
//  - submit p99 with the followers vs idle. Target: <= 2x.
//  - every follower receives every event of its job exactly once and in order (by index, up to
//    the job's end): lost, duplicated and out-of-order counts. Target: 0.
//  - BENCH_DROPS (10 % of the followers) are dropped mid-stream (the connection cut), stay away
//    1 s, and reconnect with Last-Event-ID: the time from the reconnect until they hold every event
//    the job had stored when they reconnected, p50 and max. Target: <= 1 s.
//  - per phase, each process's CPU and how long workerd's one thread waited, runnable, for a core
//    (the share of the phase): with the events, the submits' slow tail is that wait and workerd's
//    own full garbage collections (README, Performance, "Followers").
// The issue's full size: BENCH_JOBS=100 BENCH_FOLLOWERS=1000.
import { createClient } from "@libsql/client";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { percentiles, readProcesses, startBenchStack } from "./lib";
import { roundProcess } from "./round-process";
import { sseEvents } from "../helpers/sse";

const jobs = Number(process.env.BENCH_JOBS ?? 20);
const followers = Number(process.env.BENCH_FOLLOWERS ?? 200);
const rate = Number(process.env.BENCH_RATE ?? 2);
const seconds = Number(process.env.BENCH_SECONDS ?? 15);
const drops = Number(process.env.BENCH_DROPS ?? Math.round(followers / 10));
const aligned = process.env.BENCH_FEED === "aligned";
const concurrency = 8;
// Followers a user holds; the service's limit (LIVE_STREAMS_PER_USER, 10 by default) is raised to
// twice that, room for a dropped follower's lease until its hub notices it gone.
const PER_USER = Math.max(1, Math.ceil(followers / 10));
const out = (line: string) => process.stdout.write(line + "\n");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Seconds the process's main thread (workerd's one event loop) has waited, runnable, for a core
 * (/proc/<pid>/schedstat's second field): on this 2-core machine the stack shares the cores with
 * the benchmark's own processes, and a submit waits while workerd does.
 */
function runnableWaitSeconds(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ")[1]) / 1e9;
}

/** Runs `work` over `items`, `width` at a time. */
async function pool<T>(items: T[], width: number, work: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const i = next++;
        await work(items[i]!, i);
      }
    }),
  );
}

// The submitting clients run in a process of their own: this one parses every follower's stream
// and feeds the jobs, and its event loop would otherwise hold up the submits' answers (their p99
// is the figure; earlier figures counted that delay).
const submitters = roundProcess();
const stack = await startBenchStack({ env: { LIVE_STREAMS_PER_USER: String(2 * PER_USER) } });
try {
  const auth = { "x-api-key": stack.adminKey };
  const json = { ...auth, "content-type": "application/json" };
  const must = async (reply: Promise<Response>, what: string) => {
    const r = await reply;
    if (!r.ok) throw new Error(`${what}: ${r.status} ${await r.text()}`);
    return r.json() as Promise<any>;
  };

  // --- setup: a box, an environment of CPU jobs, the running jobs, the followers' users ----------
  const box = await must(stack.post("/api/admin/workers", { name: "bench-box" }), "worker");
  const boxAuth = { authorization: `Bearer ${box.token}` };
  await must(stack.post("/api/workers/register", { role: "local", gpus: [] }, boxAuth), "register");
  await must(stack.post("/api/configs/environments", { name: "cpu" }), "environment");
  await must(
    fetch(`${stack.base}/api/configs/cpu`, { method: "PUT", headers: json, body: JSON.stringify({ config: { "--num_processes": 0 } }) }),
    "config",
  );
  await must(stack.post("/api/queue/concurrency", { local_job_max_concurrent: jobs }), "concurrency");
  const jobIds: string[] = [];
  for (let i = 0; i < jobs; i++) {
    const job = await must(stack.post("/api/queue/submit", { config_name: "cpu", target: "local" }), "submit");
    if (job.status !== "running") throw new Error(`job ${i} is ${job.status}`);
    jobIds.push(job.job_id);
  }
  const users = Math.ceil(followers / PER_USER);
  const keys: string[] = [];
  await pool(
    Array.from({ length: users }, (_, i) => i),
    4,
    async (i) => {
      const username = `follower${i}`;
      const password = "follower-password-1";
      await must(
        stack.post("/api/users", { email: `${username}@example.com`, username, password, level_names: ["lead"] }),
        `user ${username}`,
      );
      const login = await fetch(`${stack.base}/api/cloud/auth/login`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ username, password }),
      });
      const cookie = /(st_session=[^;]+)/.exec(login.headers.get("set-cookie") ?? "")?.[1];
      if (!cookie) throw new Error(`login ${username}: ${login.status}`);
      const key = await must(
        fetch(`${stack.base}/api/cloud/auth/api-keys`, {
          method: "POST",
          headers: { "content-type": "application/json", cookie, origin: stack.base },
          body: JSON.stringify({ name: "bench" }),
        }),
        `key ${username}`,
      );
      keys[i] = key.key;
    },
  );
  // The submits wait behind the local job limit (the followed jobs hold it), so both rounds measure the same path.
  out(`    ${jobs} running jobs, ${followers} followers (${users} lead users), ${rate} events/s a job, ${concurrency} submitting clients`);

  const submitRound = (roundSeconds = seconds) =>
    submitters.run({
      url: `${stack.base}/api/queue/submit`,
      method: "POST",
      headers: json,
      body: JSON.stringify({ config_name: "cpu", target: "local" }),
      concurrency,
      seconds: roundSeconds,
    });

  // Where the time goes: CPU seconds of the stack's Node host (the client front, the libSQL server),
  // its workerd (the Worker and its Durable Objects), this process (the followers and the feed) and
  // the submitting clients', per phase.
  const workerd = readProcesses().find((p) => p.ppid === stack.pid && p.name === "workerd")?.pid ?? 0;
  const used = () => {
    const cpu = new Map(readProcesses().map((p) => [p.pid, p.cpu]));
    return {
      host: cpu.get(stack.pid) ?? 0,
      workerd: cpu.get(workerd) ?? 0,
      workerdWaited: runnableWaitSeconds(workerd),
      bench: process.cpuUsage(),
      submitters: cpu.get(submitters.pid) ?? 0,
      at: performance.now(),
    };
  };
  let mark = used();
  const cpu = () => {
    const now = used();
    const wall = (now.at - mark.at) / 1000;
    const bench = (now.bench.user + now.bench.system - mark.bench.user - mark.bench.system) / 1e6;
    const share = (seconds: number) => `${((seconds / wall) * 100).toFixed(0)} %`;
    const line = `    CPU over ${wall.toFixed(0)} s: workerd ${share(now.workerd - mark.workerd)}, Node host ${share(now.host - mark.host)}, followers and feed ${share(bench)}, submitting clients ${share(now.submitters - mark.submitters)} (of one core; load ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}); workerd's thread waited for a core ${share(now.workerdWaited - mark.workerdWaited)} of the time`;
    mark = now;
    return line;
  };
  const clearQueue = async () => {
    // The submitted jobs go between rounds (cancelled in the database, as bench:scheduler does), so each round starts from the same queue.
    const db = createClient({ url: `file:${join(stack.dataDir, "service.db")}` });
    await db.execute("UPDATE queue_entries SET status = 'cancelled', completed_at = datetime('now') WHERE status = 'pending'");
    db.close();
  };
  // Warm-up, then the idle figure.
  await submitRound(2);
  await clearQueue();
  cpu();
  const idle = await submitRound();
  out(`1.  idle: ${idle.requests} submits, ${idle.perSecond.toFixed(0)}/s, p50 ${idle.p50.toFixed(1)} ms, p99 ${idle.p99.toFixed(1)} ms`);
  out(cpu());

  // --- the followers ----------------------------------------------------------------------------
  interface Follower {
    job: number;
    key: string;
    /** Indexes received, in arrival order. */
    seen: number[];
    last: number;
    ended: boolean;
    controller: AbortController;
    done: Promise<void>;
  }
  const connects: number[] = [];
  /** Opens (or reopens) a follower's stream; resolves once the stream has answered. */
  /** Streams the service broke off (not dropped here), each resumed as EventSource would: after 2 s (its `retry`), with Last-Event-ID. */
  const broken: string[] = [];
  const follow = async (f: Follower, onEvent?: (index: number) => void): Promise<void> => {
    const controller = (f.controller = new AbortController());
    const headers: Record<string, string> = { "x-api-key": f.key, accept: "text/event-stream" };
    if (f.last >= 0) headers["last-event-id"] = String(f.last);
    const t0 = performance.now();
    const response = await fetch(`${stack.base}/api/training/events/stream?job_id=${jobIds[f.job]}`, {
      headers,
      signal: controller.signal,
    });
    connects.push(performance.now() - t0);
    if (!response.ok) throw new Error(`follower of job ${f.job}: ${response.status} ${await response.text()}`);
    f.done = (async () => {
      try {
        for await (const e of sseEvents(response.body!)) {
          if (e.event === "end") {
            f.ended = true;
            return;
          }
          const index = Number(e.id);
          f.seen.push(index);
          f.last = Math.max(f.last, index);
          onEvent?.(index);
        }
        broken.push("closed without an end");
      } catch (error) {
        if (controller.signal.aborted) return;
        broken.push(String((error as Error).cause ?? error));
      }
      await sleep(2000);
      await follow(f, onEvent);
      await f.done;
    })();
  };
  const all: Follower[] = Array.from({ length: followers }, (_, i) => ({
    job: i % jobs,
    key: keys[Math.floor(i / PER_USER)]!,
    seen: [],
    last: -1,
    ended: false,
    controller: new AbortController(),
    done: Promise.resolve(),
  }));

  // --- the feed: each job's events as its runner sends them ----------------------------------
  const stored = jobIds.map(() => 0); // events stored (acknowledged) per job
  const seqs = jobIds.map(() => 0);
  let feedErrors = 0;
  let feedLatencies: number[] = [];
  /** Feeds every job at `rate` events/s until the returned stop() (which resolves once the batches in flight are answered). */
  const startFeed = () => {
    let feeding = true;
    const feedStart = performance.now();
    const first = [...seqs];
    const feeders = jobIds.map(async (jobId, j) => {
      // Where in each period of 1/rate s this job's events fall: spread over it, as independent
      // trainers' are (BENCH_FEED=aligned: every job's at once, each feeder polling every half
      // period, as earlier figures were measured: 100 POSTs landing together twice a second).
      const phase = aligned ? 0 : j / jobIds.length;
      const periods = () => ((performance.now() - feedStart) / 1000) * rate + phase;
      while (feeding) {
        const due = first[j]! + Math.floor(periods());
        if (due > seqs[j]!) {
          const events = [];
          for (; seqs[j]! < due; seqs[j]!++)
            events.push({ seq: seqs[j]!, event: { type: "bench.tick", data: { n: seqs[j]!, t: Date.now() } } });
          for (;;) {
            const t = performance.now();
            const reply = await stack.post(`/api/workers/jobs/${jobId}/events`, { attempt: 1, events }, boxAuth);
            if (reply.ok) {
              feedLatencies.push(performance.now() - t);
              stored[j] = ((await reply.json()) as { next_index: number }).next_index;
              break;
            }
            feedErrors++;
            if (feedErrors === 1) out(`    (a batch answered ${reply.status}: ${(await reply.text()).slice(0, 200)}; sent again)`);
            else await reply.text();
            await sleep(100);
          }
        }
        if (aligned) await sleep(Math.max(10, 1000 / rate / 2));
        else await sleep(Math.max(1, ((Math.floor(periods()) + 1 - periods()) * 1000) / rate));
      }
    });
    return async () => {
      feeding = false;
      await Promise.all(feeders);
      const fed = seqs.reduce((a, b) => a + b, 0) - first.reduce((a, b) => a + b, 0);
      const f = percentiles(feedLatencies);
      feedLatencies = [];
      const perSecond = fed / ((performance.now() - feedStart) / 1000);
      return `${fed} events stored (${perSecond.toFixed(0)}/s; a batch's POST p50 ${f.p50.toFixed(1)} ms, p99 ${f.p99.toFixed(1)} ms; ${feedErrors} sent again)`;
    };
  };

  // Events without followers: what storing them costs the submits.
  await clearQueue();
  cpu();
  let stopFeed = startFeed();
  const feedOnly = await submitRound();
  out(
    `2.  events, no followers: ${feedOnly.requests} submits, ${feedOnly.perSecond.toFixed(0)}/s, p50 ${feedOnly.p50.toFixed(1)} ms, p99 ${feedOnly.p99.toFixed(1)} ms; ${await stopFeed()}`,
  );
  out(cpu());

  // The followers: from index 0, so each first replays what the job has stored.
  await clearQueue();
  const t0 = performance.now();
  await pool(all, 50, (f) => follow(f));
  const c = percentiles(connects);
  out(
    `    ${followers} followers connected in ${((performance.now() - t0) / 1000).toFixed(1)} s (connect p50 ${c.p50.toFixed(1)} ms, p99 ${c.p99.toFixed(1)} ms)`,
  );
  stopFeed = startFeed();

  // --- drops: a follower cut mid-stream, away 1 s, back with Last-Event-ID --------------------
  const catchUps: number[] = [];
  const dropped = all.filter((_, i) => i % Math.max(1, Math.floor(followers / Math.max(1, drops))) === 0).slice(0, drops);
  const dropping = (async () => {
    await sleep(2000);
    const spread = ((seconds - 4) * 1000) / Math.max(1, dropped.length);
    await Promise.all(
      dropped.map(async (f, i) => {
        await sleep(i * spread);
        f.controller.abort();
        await f.done;
        await sleep(1000);
        const target = stored[f.job]! - 1; // every event stored when it reconnects
        const t = performance.now();
        let reached!: () => void;
        const caughtUp = new Promise<void>((r) => (reached = r));
        if (f.last >= target) reached();
        await follow(f, (index) => index >= target && reached());
        await caughtUp;
        catchUps.push(performance.now() - t);
      }),
    );
  })();

  await sleep(1000);
  cpu();
  const loaded = await submitRound();
  await dropping;
  const fedLine = await stopFeed();
  out(
    `3.  events and ${followers} followers: ${loaded.requests} submits, ${loaded.perSecond.toFixed(0)}/s, p50 ${loaded.p50.toFixed(1)} ms, p99 ${loaded.p99.toFixed(1)} ms; ${fedLine}`,
  );
  out(cpu());
  const ratio = loaded.p99 / idle.p99;
  out(`    submit p99 with followers / idle: ${ratio.toFixed(2)}x (target <= 2x): ${ratio <= 2 ? "met" : "NOT met"}`);

  // --- the end: each job finishes, each follower gets `end`; what each received -------------
  for (const jobId of jobIds)
    await must(stack.post(`/api/workers/jobs/${jobId}/finish`, { status: "completed", exit_code: 0 }, boxAuth), "finish");
  const ending = Promise.all(all.map((f) => f.done));
  await Promise.race([ending, sleep(30_000)]);
  let lost = 0;
  let duplicated = 0;
  let disordered = 0;
  let unended = 0;
  for (const f of all) {
    f.controller.abort();
    if (!f.ended) unended++;
    const distinct = new Set(f.seen);
    // A job's log: the ticks at 0..stored-1 (the end's summary, if any, would follow them).
    for (let i = 0; i < stored[f.job]!; i++) if (!distinct.has(i)) lost++;
    duplicated += f.seen.length - distinct.size;
    for (let i = 1; i < f.seen.length; i++) if (f.seen[i]! <= f.seen[i - 1]!) disordered++;
  }
  const causes = [...new Set(broken)].join("; ");
  out(`    streams the service broke off (resumed with Last-Event-ID): ${broken.length}${broken.length ? ` (${causes})` : ""}`);
  out(
    `4.  ${followers} followers: ${lost} events lost, ${duplicated} duplicated, ${disordered} out of order, ${unended} never got the end (target 0): ${lost + duplicated + disordered + unended === 0 ? "met" : "NOT met"}`,
  );
  const u = percentiles(catchUps);
  const max = Math.max(...catchUps);
  out(
    `5.  ${catchUps.length} followers dropped mid-stream and back with Last-Event-ID after 1 s: caught up p50 ${u.p50.toFixed(1)} ms, max ${max.toFixed(1)} ms (target <= 1 s): ${max <= 1000 ? "met" : "NOT met"}`,
  );
} finally {
  submitters.stop();
  await stack.stop();
}
