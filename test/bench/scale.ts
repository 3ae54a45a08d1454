// `npm run bench:scale`: issue 31's scale figures on this machine (items 1 to 3).
//  0. A burst: BENCH_BURST (1,000) submissions sent within a second (one every ms, open loop) onto
//     8 boxes' worth of capacity (one local box registered with 64 GPUs, 1-GPU jobs, no runner:
//     jobs only need to reach `running`). For every job that fits: submit sent -> running and
//     submit answer -> running; the p99 gap between consecutive starts, how many distinct start
//     times there were (a submission group starts its jobs at one time) and where the longest
//     gaps fell; each process's CPU over the burst and over its first 300 ms. Targets: every one
//     running <= 1 s after its submit, p99 gap <= 50 ms. Checked: every answer stored exactly
//     once, no GPU given twice. Sent over node:http keep-alive (BENCH_CLIENT=fetch: Node's fetch);
//     BENCH_BURST_ONLY=1 stops after it (a few seconds), to repeat it.
//  1. Sustained submissions from BENCH_CLIENTS (8) clients, each with its own API key and a fresh
//     Idempotency-Key per submission as the CLI sends them, of 1-GPU jobs that wait for the box's busy GPUs: with an empty queue, then with
//     BENCH_PENDING (20,000; the issue's figure is 100,000) jobs pending. Those are written
//     straight into the libSQL file as copies of a submitted job, then the Scheduler re-reads
//     them (POST /api/queue/process) and places them like any other. Target: at depth >= 80 % of
//     empty. Then `sbatch --hold --wrap=true` from as many parallel clients when Slurm is
//     installed (Debian's slurm-wlm: the benchmark starts its own slurmctld and slurmd, 8 GPUs
//     declared as gres). Target: >= 2 x sbatch.
//  2. Depth, at BENCH_PENDING pending: a scheduler pass (POST /api/queue/concurrency with the
//     same limits: a settings write and one pass; median and p99 of BENCH_PASSES (20)), and the
//     queue listing's first page (GET /api/queue, p50 and p99 of BENCH_LISTINGS (50)). Targets:
//     pass <= 250 ms, first page <= 50 ms.
// Settings: BENCH_SECONDS (5) per sustained round, BENCH_ROUNDS (2).
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createClient } from "@libsql/client";
import { httpFetch } from "../../runner/agent/http-fetch";
import { median, percentiles, round, startBenchStack, watchCpu, type BenchStack } from "./lib";

const PENDING = Number(process.env.BENCH_PENDING ?? 20_000);
const BURST = Number(process.env.BENCH_BURST ?? 1_000);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 8);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const PASSES = Number(process.env.BENCH_PASSES ?? 20);
const LISTINGS = Number(process.env.BENCH_LISTINGS ?? 50);
const GPUS = 64;
const out = (line: string) => process.stdout.write(line + "\n");
const ms = (n: number) => `${n.toFixed(1)} ms`;
const met = (ok: boolean) => (ok ? "met" : "NOT met");
const run = promisify(execFile);

out(`load before: ${(await import("node:fs")).readFileSync("/proc/loadavg", "utf8").trim()}`);
const stack = await startBenchStack({ env: { SCHEDULER_PASS_SECONDS: "5" } });
const dbFile = join(stack.dataDir, "service.db");
try {
  const admin = { "x-api-key": stack.adminKey, "content-type": "application/json" };
  const keys = await clientKeys(stack, CLIENTS);
  // The box: 64 GPUs, kept online for the whole run (no runner heartbeats it).
  await stack.post("/api/queue/concurrency", { worker_heartbeat_timeout_seconds: 86_400, local_job_max_concurrent: 1024 });
  const box = (await (await stack.post("/api/admin/workers", { name: "bench-box" })).json()) as { token: string };
  const gpus = Array.from({ length: GPUS }, (_, index) => ({ index, name: "H100", memory_mb: 81920 }));
  const registered = await stack.post("/api/workers/register", { role: "local", gpus }, { authorization: `Bearer ${box.token}` });
  if (registered.status !== 200) throw new Error(`register: ${registered.status} ${await registered.text()}`);
  await stack.post("/api/configs/environments", { name: "gpu1" });
  const put = await fetch(`${stack.base}/api/configs/gpu1`, {
    method: "PUT",
    headers: admin,
    body: JSON.stringify({ config: { "--num_processes": 1, "--max_runtime_minutes": 60 } }),
  });
  if (!put.ok) throw new Error(`environment: ${put.status} ${await put.text()}`);
  const submitBody = JSON.stringify({ config_name: "gpu1", target: "local" });
  // As `jobs submit` sends it: the client's API key and a fresh Idempotency-Key (runner/cli/submit-once.ts).
  const submitHeaders = (key: string) => ({ "x-api-key": key, "content-type": "application/json", "idempotency-key": crypto.randomUUID() });
  // The burst's sender: node:http with kept-alive connections (the runner's own client), which
  // costs the 2 cores this machine shares with the service about half what Node's fetch (undici)
  // does (the client's CPU is printed); BENCH_CLIENT=fetch sends with fetch, as earlier figures did.
  const viaFetch = process.env.BENCH_CLIENT === "fetch";
  const sender = viaFetch ? fetch : httpFetch();
  const submit = (key: string) =>
    sender(`${stack.base}/api/queue/submit`, { method: "POST", headers: submitHeaders(key), body: submitBody });

  // --- 0. the burst ---------------------------------------------------------------------------
  {
    type Sent = { sent: number; answered: number; status: number; body: { job_id?: string; status?: string } };
    // workerd runs the Worker and every Durable Object on one thread here: its CPU per wall second
    // during the burst says whether that thread, shared by the requests and the Scheduler's
    // groups, is what spaces the starts.
    const cpu = watchCpu(stack.pid, (p) => (p.pid === stack.pid ? "Node host" : p.name));
    // The same for the burst's first EARLY_MS, when the fitting jobs start.
    const EARLY_MS = 300;
    const early = watchCpu(stack.pid, (p) => (p.pid === stack.pid ? "Node host" : p.name));
    let earlyUsed: ReturnType<typeof early.stop> | null = null;
    setTimeout(() => (earlyUsed = early.stop()), EARLY_MS);
    const t0 = performance.now();
    const wallT0 = Date.now();
    const sent: Promise<Sent>[] = [];
    for (let i = 0; i < BURST; i++) {
      const at = t0 + (i * 1000) / BURST;
      const wait = at - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      const sentAt = performance.now();
      sent.push(
        submit(keys[i % keys.length]!).then(async (r) => ({
          sent: sentAt,
          answered: performance.now(),
          status: r.status,
          body: await r.json(),
        })),
      );
    }
    const sendSpan = performance.now() - t0;
    const answers = await Promise.all(sent);
    const used = cpu.stop();
    const bad = answers.filter((a) => a.status !== 200);
    const toWall = (perf: number) => wallT0 + (perf - t0);
    const db = createClient({ url: `file:${dbFile}` });
    const rows = (await db.execute("SELECT job_id, status, started_at, allocated_gpus FROM queue_entries WHERE config_name = 'gpu1'")).rows;
    db.close();
    const byJob = new Map(rows.map((r) => [String(r.job_id), r]));
    const answeredIds = answers.map((a) => a.body.job_id).filter((id): id is string => !!id);
    const lost = answeredIds.filter((id) => !byJob.has(id)).length;
    const duplicated = answeredIds.length - new Set(answeredIds).size + (rows.length - byJob.size);
    const running = rows.filter((r) => r.status === "running");
    const held = running.flatMap((r) => JSON.parse(String(r.allocated_gpus)) as number[]);
    const doubleBooked = held.length - new Set(held).size;
    // Each started job: from its submit being sent, and from its answer, to its start (the stored started_at).
    const starts: number[] = [];
    const fromSent: number[] = [];
    const fromAnswer: number[] = [];
    for (const a of answers) {
      const row = a.body.job_id ? byJob.get(a.body.job_id) : undefined;
      if (!row || row.status !== "running") continue;
      const at = Date.parse(String(row.started_at));
      starts.push(at);
      fromSent.push(at - toWall(a.sent));
      // A job answered `running` was running when answered.
      fromAnswer.push(a.body.status === "running" ? 0 : Math.max(0, at - toWall(a.answered)));
    }
    starts.sort((a, b) => a - b);
    const gaps = starts.slice(1).map((s, i) => s - starts[i]!);
    const answerLatency = percentiles(answers.map((a) => a.answered - a.sent));
    const gapP = gaps.length ? percentiles(gaps) : { p50: 0, p99: 0 };
    const worst = Math.max(0, ...fromSent);
    out(
      `0.  burst: ${BURST} submissions sent over ${ms(sendSpan)} from ${keys.length} keys (${viaFetch ? "Node's fetch" : "node:http keep-alive"}) onto ${GPUS} GPUs (8 boxes of 8): answers p50 ${ms(answerLatency.p50)}, p99 ${ms(answerLatency.p99)}; ${bad.length} not 200`,
    );
    out(
      `    ${running.length} started (every job that fits: ${running.length === Math.min(GPUS, BURST) ? "yes" : "NO"}); submit sent -> running p50 ${ms(percentiles(fromSent).p50)}, max ${ms(worst)}; answer -> running max ${ms(Math.max(0, ...fromAnswer))}; gap between consecutive starts p50 ${ms(gapP.p50)}, p99 ${ms(gapP.p99)}`,
    );
    // Where the longest gaps fall: after which start, and when, from the first submit sent.
    const longest = gaps
      .map((gap, i) => ({ gap, after: i + 1, at: starts[i]! - wallT0 }))
      .sort((a, b) => b.gap - a.gap)
      .slice(0, 3)
      .map((g) => `${ms(g.gap)} after start ${g.after} (${ms(g.at)} into the burst)`);
    out(
      `    ${new Set(starts).size} distinct start times (a submission group starts its jobs at one time); longest gaps: ${longest.join(", ")}`,
    );
    const busy = [...used.byName].map(([name, seconds]) => `${name} ${((seconds / used.wall) * 100).toFixed(0)} %`).join(", ");
    out(`    CPU per wall second from the first submit to the last answer (${used.wall.toFixed(1)} s), of one core: ${busy}`);
    const firstUsed = earlyUsed as ReturnType<typeof early.stop> | null;
    if (firstUsed)
      out(
        `    the same in the burst's first ${EARLY_MS} ms (${firstUsed.wall.toFixed(2)} s; /proc counts in 10 ms ticks): ${[
          ...firstUsed.byName,
        ]
          .map(([name, seconds]) => `${name} ${((seconds / firstUsed.wall) * 100).toFixed(0)} %`)
          .join(", ")}`,
      );
    out(
      `    stored ${rows.length} of ${answeredIds.length} answered, ${lost} lost, ${duplicated} duplicated, ${doubleBooked} GPUs given twice`,
    );
    out(
      `    targets: every fitting job running <= 1 s after its submit (${met(worst <= 1000)}), p99 gap <= 50 ms (${met(gapP.p99 <= 50)})`,
    );
  }

  if (!process.env.BENCH_BURST_ONLY) {
    // --- 1. sustained submissions, empty and deep --------------------------------------------------
    // From here the 64 GPUs stay busy: the burst's running jobs keep them, and what waits goes.
    const clearPending = async () => {
      const db = createClient({ url: `file:${dbFile}` });
      await db.execute("UPDATE queue_entries SET status = 'cancelled', completed_at = datetime('now') WHERE status = 'pending'");
      db.close();
      await stack.post("/api/queue/process", {});
    };
    const submitRound = async (key: (i: number) => string) => {
      let n = 0;
      return round(
        {
          url: `${stack.base}/api/queue/submit`,
          method: "POST",
          get headers() {
            return submitHeaders(key(n++));
          },
          body: () => submitBody,
        },
        { concurrency: CLIENTS, seconds: SECONDS },
      );
    };
    await clearPending();
    await submitRound((i) => keys[i % keys.length]!); // warm-up
    const empty: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      await clearPending();
      const x = await submitRound((i) => keys[i % keys.length]!);
      empty.push(x.perSecond);
      out(`1.  empty queue, round ${r + 1}: ${x.perSecond.toFixed(1)} submits/s (p50 ${ms(x.p50)}, p99 ${ms(x.p99)})`);
    }

    // The backlog: copies of a submitted job (same snapshot, owner and shape), queued in the past.
    await clearPending();
    let t = performance.now();
    const db = createClient({ url: `file:${dbFile}` });
    const template = (await db.execute("SELECT id FROM queue_entries WHERE config_name = 'gpu1' ORDER BY id DESC LIMIT 1")).rows[0]!;
    await db.execute({
      sql: `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
          INSERT INTO queue_entries (job_id, user_id, team_id, provider, config_name, priority, status, queued_at, estimated_cost,
            requires_approval, job_type, num_processes, target, any_gpu, updated_at, config_snapshot, dataloader_snapshot)
          SELECT printf('local-seed%08d', i), user_id, team_id, provider, config_name, priority, 'pending',
            strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (? - i + 60) || ' seconds'), estimated_cost, 0, job_type, num_processes, target,
            any_gpu, updated_at, config_snapshot, dataloader_snapshot
          FROM n, queue_entries q WHERE q.id = ?`,
      args: [PENDING, PENDING, Number(template.id)],
    });
    db.close();
    const seeded = performance.now() - t;
    t = performance.now();
    const processed = (await (await stack.post("/api/queue/process", {})).json()) as { waiting: number };
    const reread = performance.now() - t;
    out(
      `1.  ${PENDING} pending written in ${ms(seeded)}; the Scheduler re-read and placed them in ${ms(reread)} (POST /api/queue/process): ${processed.waiting} waiting`,
    );
    const deep: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const x = await submitRound((i) => keys[i % keys.length]!);
      deep.push(x.perSecond);
      out(`1.  ${PENDING} pending, round ${r + 1}: ${x.perSecond.toFixed(1)} submits/s (p50 ${ms(x.p50)}, p99 ${ms(x.p99)})`);
    }
    const emptyRate = median(empty);
    const deepRate = median(deep);
    out(
      `    at ${PENDING} pending / empty: ${((deepRate / emptyRate) * 100).toFixed(1)} % (target >= 80 %: ${met(deepRate >= 0.8 * emptyRate)})`,
    );

    // --- 2. depth: a pass and the listing ------------------------------------------------------
    const limits = await (await fetch(`${stack.base}/api/queue/concurrency`, { headers: admin })).json();
    const passes: number[] = [];
    for (let i = 0; i < PASSES; i++) {
      const t0 = performance.now();
      const r = await stack.post("/api/queue/concurrency", limits);
      if (r.status !== 200) throw new Error(`pass: ${r.status} ${await r.text()}`);
      passes.push(performance.now() - t0);
    }
    const trivial: number[] = [];
    for (let i = 0; i < PASSES; i++) {
      const t0 = performance.now();
      await (await fetch(`${stack.base}/api/cloud/health/live`)).text();
      trivial.push(performance.now() - t0);
    }
    const p = percentiles(passes);
    const depth = (await (await fetch(`${stack.base}/api/queue/stats`, { headers: admin })).json()) as { queue_depth?: number };
    out(
      `2.  pass over ${PENDING}+ pending (a limits write + one pass, over HTTP): median ${ms(median(passes))}, p99 ${ms(p.p99)} (target <= 250 ms: ${met(p.p99 <= 250)}); a trivial request ${ms(median(trivial))}`,
    );
    const pages: number[] = [];
    let first: { jobs: { status: string; position: number | null }[]; total: number } | null = null;
    for (let i = 0; i < LISTINGS; i++) {
      const t0 = performance.now();
      const r = await fetch(`${stack.base}/api/queue`, { headers: admin });
      const body = await r.json();
      pages.push(performance.now() - t0);
      if (r.status !== 200) throw new Error(`listing: ${r.status}`);
      first = body as typeof first;
    }
    const l = percentiles(pages);
    const shownPending = first!.jobs.filter((j) => j.status === "pending");
    out(
      `2.  GET /api/queue first page (${first!.jobs.length} entries of ${first!.total}; ${shownPending.length} pending, positions ${shownPending[0]?.position ?? "-"}..${shownPending.at(-1)?.position ?? "-"}): p50 ${ms(l.p50)}, p99 ${ms(l.p99)} (target <= 50 ms: ${met(l.p99 <= 50)}); stats say ${JSON.stringify(depth.queue_depth ?? null)} cloud-queue depth`,
    );

    // A page deep in the queue: walk to the middle of the pending jobs 1,000 at a time, then read
    // the page after that cursor BENCH_LISTINGS times (keyset paging: its cost should not grow
    // with the depth).
    let cursor: string | null = null;
    let walked = 0;
    while (walked < PENDING / 2) {
      const r = await fetch(`${stack.base}/api/queue?status=pending&limit=1000${cursor ? `&cursor=${cursor}` : ""}`, { headers: admin });
      const body = (await r.json()) as { jobs: unknown[]; next_cursor: string | null };
      if (r.status !== 200) throw new Error(`listing walk: ${r.status}`);
      walked += body.jobs.length;
      cursor = body.next_cursor;
      if (!cursor) break;
    }
    if (cursor) {
      const deepPages: number[] = [];
      for (let i = 0; i < LISTINGS; i++) {
        const t0 = performance.now();
        const r = await fetch(`${stack.base}/api/queue?cursor=${cursor}`, { headers: admin });
        await r.json();
        deepPages.push(performance.now() - t0);
        if (r.status !== 200) throw new Error(`deep listing: ${r.status}`);
      }
      const d = percentiles(deepPages);
      out(`2.  GET /api/queue, the page after the ${walked}th pending job: p50 ${ms(d.p50)}, p99 ${ms(d.p99)}`);
    }

    // --- 1b. sbatch ------------------------------------------------------------------------------
    const slurm = await sbatchRate(CLIENTS, SECONDS);
    if (slurm === null)
      out("1.  Slurm is not installed here (sbatch, slurmctld, munged): ours only. apt-get install -y slurm-wlm to compare.");
    else
      out(
        `1.  sbatch --hold --wrap=true from ${CLIENTS} parallel clients: ${slurm.toFixed(1)} submits/s; ours (empty queue) ${emptyRate.toFixed(1)}/s = ${(emptyRate / slurm).toFixed(2)} x (target >= 2 x: ${met(emptyRate >= 2 * slurm)}), at depth ${(deepRate / slurm).toFixed(2)} x`,
      );
    out(`load after: ${(await import("node:fs")).readFileSync("/proc/loadavg", "utf8").trim()}`);
  }
} finally {
  await stack.stop();
}

/** `n` API keys of the admin, each a client's, as `jobs login` makes one per host. */
async function clientKeys(stack: BenchStack, n: number): Promise<string[]> {
  const login = await fetch(`${stack.base}/api/cloud/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username: "bench", password: "bench-password-1" }),
  });
  const cookie = /(st_session=[^;]+)/.exec(login.headers.get("set-cookie") ?? "")?.[1];
  if (!cookie) throw new Error(`login: ${login.status}`);
  const keys: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await fetch(`${stack.base}/api/cloud/auth/api-keys`, {
      method: "POST",
      headers: { cookie, "content-type": "application/json" },
      body: JSON.stringify({ name: `client-${i}` }),
    });
    const { key } = (await r.json()) as { key: string };
    keys.push(key);
  }
  return keys;
}

function which(name: string): string | null {
  return ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"].map((d) => join(d, name)).find((p) => existsSync(p)) ?? null;
}

/**
 * Held jobs per second through `sbatch` from `clients` parallel loops, against a slurmctld and
 * slurmd started here (one node: 2 CPUs, 8 GPUs as gres), or null when Slurm is not installed.
 */
async function sbatchRate(clients: number, seconds: number): Promise<number | null> {
  const [sbatch, slurmctld, slurmd, munged] = ["sbatch", "slurmctld", "slurmd", "munged"].map(which);
  if (!sbatch || !slurmctld || !slurmd || !munged) return null;
  const dir = mkdtempSync(join(tmpdir(), "bench-slurm-"));
  const children: ChildProcess[] = [];
  try {
    // munged: Debian's packaged key; started here unless it already runs.
    if ((await run("pgrep", ["-x", "munged"]).catch(() => null)) === null) {
      mkdirSync("/run/munge", { recursive: true });
      await run("chown", ["munge:munge", "/run/munge"]);
      await run("su", ["-s", "/bin/sh", "munge", "-c", munged]);
    }
    const conf = join(dir, "slurm.conf");
    const host = hostname();
    writeFileSync(
      conf,
      [
        "ClusterName=bench",
        `SlurmctldHost=${host}`,
        "SlurmctldPort=16817",
        "SlurmdPort=16818",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "SlurmUser=root",
        "SlurmdUser=root",
        `StateSaveLocation=${dir}/state`,
        `SlurmdSpoolDir=${dir}/spool`,
        `SlurmctldPidFile=${dir}/slurmctld.pid`,
        `SlurmdPidFile=${dir}/slurmd.pid`,
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "ReturnToService=2",
        "MpiDefault=none",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "GresTypes=gpu",
        `NodeName=${host} CPUs=2 RealMemory=2000 Gres=gpu:8 State=UNKNOWN`,
        `PartitionName=main Nodes=${host} Default=YES MaxTime=INFINITE State=UP`,
        "",
      ].join("\n"),
    );
    writeFileSync(join(dir, "gres.conf"), "Name=gpu Count=8\n");
    mkdirSync(join(dir, "state"));
    mkdirSync(join(dir, "spool"));
    const env = { ...process.env, SLURM_CONF: conf };
    for (const daemon of [slurmctld, slurmd]) children.push(spawn(daemon, ["-D", "-f", conf], { env, stdio: "ignore" }));
    for (const deadline = Date.now() + 20_000; ; await new Promise((r) => setTimeout(r, 250))) {
      if (
        await run(sbatch, ["--hold", "--wrap=true"], { env }).then(
          () => true,
          () => false,
        )
      )
        break;
      if (Date.now() > deadline) throw new Error("slurmctld did not take a job within 20 s");
    }
    let count = 0;
    const started = performance.now();
    const deadline = started + seconds * 1000;
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (performance.now() < deadline) {
          await run(sbatch, ["--hold", "--wrap=true"], { env });
          count++;
        }
      }),
    );
    return count / ((performance.now() - started) / 1000);
  } finally {
    for (const child of children) child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 500));
    rmSync(dir, { recursive: true, force: true });
  }
}
