// `npm run bench:backfill`: the pure planner (edge/scheduler/plan.ts) in simulated time, under
// three policies side by side:
//   none         no reservation at all (starvation_threshold_minutes 0);
//   reservation  a job waiting past 60 min holds every GPU it could use (the planner with no
//                estimates: what it did before backfill, and still does where nothing is known);
//   backfill     the same threshold, with the estimates the service makes (EASY backfill).
// The workload (seeded): 1,000 jobs arriving at random over a week on one 8-GPU box, with sizes
// drawn from 1, 1, 2, 2, 4, 8 GPUs and run times of 10-120 min. Each job runs one of 20
// environments (a model on this hardware, so a time per step of its own, 0.5-5 s) for its own
// --max_train_steps; a run takes its steps times its environment's step time, +-5 % from run to
// run (BENCH_JITTER). A pass runs after every arrival and every completion, and a minute after each
// start, when the job's first progress report arrives (the service's 5-s timer pass sees it then).
// The planner learns run times only as the service does (edge/jobs/estimate.ts):
//   - a running job's expected end is what its plan expected when it started (below) until its
//     first progress report, then what its progress gives (its true end; off by up to +-50 % in
//     the second workload);
//   - a waiting job's expected run time is its steps times the median step time of the last 5
//     completed runs of its environment on as many GPUs (off by the same factor in the second
//     workload), unknown before there is one. The service has run before this week: each
//     environment and size has one earlier run (BENCH_HISTORY=cold starts with none).
// Figures are over the week: busy = GPUs busy on average; 8-GPU starts = 8-GPU jobs started within
// it; longest 8-GPU wait = the longest an 8-GPU job waited, one still waiting at the end of the
// week counted as waiting until then.
// Expected-start accuracy (the backfill policy): at the pass after each job arrives, the
// service's expected start for it (edge/scheduler/forecast.ts: that pass's plan run forward);
// over every job that waited (started later than it arrived, within the week), the median and p90
// of |expected start - actual start| / actual wait (targets: median <= 20 %, p90 <= 50 %). A job
// whose start was "unknown" on arrival is counted apart (no figure to compare).
// Settings: BENCH_SEED (17), BENCH_JOBS (1000), BENCH_JITTER (0.05), BENCH_HISTORY (warm | cold).
import { CONCURRENCY_DEFAULTS } from "../../shared/schemas/queue";
import { expectedStarts } from "../../edge/scheduler/forecast";
import { planPass, type PendingJob, type PlanInput, type RunningJob } from "../../edge/scheduler/plan";
// The demo trainer's seeded generator: every run and every policy sees the same workload.
import { random } from "../../runner/demo-trainer/model";

const MIN = 60_000;
const WEEK = 7 * 24 * 60 * MIN;
const GPUS = 8;
const SIZES = [1, 1, 2, 2, 4, 8];
const ENVIRONMENTS = 20;
/** How long after its start a job's first progress report arrives. */
const FIRST_PROGRESS_MS = MIN;
const seed = Number(process.env.BENCH_SEED ?? 17);
const jobCount = Number(process.env.BENCH_JOBS ?? 1000);
const jitter = Number(process.env.BENCH_JITTER ?? 0.05);
const warm = (process.env.BENCH_HISTORY ?? "warm") !== "cold";
const out = (line: string) => process.stdout.write(line + "\n");

interface SimJob {
  id: number;
  queuedAt: number;
  size: number;
  environment: number;
  /** Its --max_train_steps. */
  steps: number;
  /** How long it really runs. */
  durationMs: number;
  /** Every estimate of this job the planner sees is its true value times this. */
  error: number;
}

function workload(seed: number, maxError: number): SimJob[] {
  const rand = random(seed);
  // Each environment's seconds per step (its model on this hardware).
  const stepSeconds = Array.from({ length: ENVIRONMENTS }, () => 0.5 + rand() * 4.5);
  const arrivals = Array.from({ length: jobCount }, () => rand() * WEEK).sort((a, b) => a - b);
  return arrivals.map((queuedAt, i) => {
    const environment = Math.floor(rand() * ENVIRONMENTS);
    const nominal = (10 + rand() * 110) * 60;
    const steps = Math.round(nominal / stepSeconds[environment]!);
    return {
      id: i + 1,
      queuedAt,
      size: SIZES[Math.floor(rand() * SIZES.length)]!,
      environment,
      steps,
      durationMs: steps * stepSeconds[environment]! * 1000 * (1 - jitter + rand() * 2 * jitter),
      error: 1 + (rand() * 2 - 1) * maxError,
    };
  });
}

type Policy = "none" | "reservation" | "backfill";

interface Result {
  /** Per job that waited: |expected start on arrival - actual start| / actual wait; and how many were unknown on arrival. */
  startErrors: number[];
  unknownStarts: number;
  busy: number;
  bigStarts: number;
  longestBigWaitMin: number;
  started: number;
}

function simulate(jobs: SimJob[], policy: Policy): Result {
  const limits = {
    ...CONCURRENCY_DEFAULTS,
    local_job_max_concurrent: GPUS,
    starvation_threshold_minutes: policy === "none" ? 0 : 60,
  };
  const estimates = policy === "backfill";
  const byId = new Map(jobs.map((j) => [j.id, j]));
  const pending = new Map<number, SimJob>();
  const running = new Map<number, { job: SimJob; gpus: number[]; startedAt: number; endsAt: number; plannedEnd: number | null }>();
  const history = new Map<string, number[]>(); // environment/size -> completed runs' ms per step, newest last
  const startedAt = new Map<number, number>();
  // The expected start each job was given at the pass after it arrived (null: unknown).
  const forecastAt = new Map<number, number | null>();
  let next = 0; // next arrival
  let now = 0;
  let busyArea = 0; // GPU-ms busy within the week
  let busyNow = 0;

  const key = (j: SimJob) => `${j.environment}/${j.size}`;
  const msPerStep = (j: SimJob) => j.durationMs / j.steps;
  // A run of each environment and size before the week: the first one's twin.
  if (warm) for (const j of jobs) if (!history.has(key(j))) history.set(key(j), [msPerStep(j)]);
  const expectedMs = (j: SimJob): number | null => {
    const runs = history.get(key(j));
    if (!estimates || !runs?.length) return null;
    const last = [...runs.slice(-5)].sort((a, b) => a - b);
    return j.steps * last[Math.floor((last.length - 1) / 2)]! * j.error;
  };
  const advance = (to: number) => {
    const end = Math.min(to, WEEK);
    if (end > now) busyArea += busyNow * (end - now);
    now = to;
  };

  while (now < WEEK) {
    // The next event: an arrival, a completion or a first progress report, whichever comes first.
    const arrival = next < jobs.length ? jobs[next]!.queuedAt : Infinity;
    let completion = Infinity;
    for (const r of running.values()) {
      completion = Math.min(completion, r.endsAt);
      if (r.startedAt + FIRST_PROGRESS_MS > now) completion = Math.min(completion, r.startedAt + FIRST_PROGRESS_MS);
    }
    const at = Math.min(arrival, completion);
    if (at === Infinity || at >= WEEK) {
      advance(WEEK);
      break;
    }
    advance(at);
    while (next < jobs.length && jobs[next]!.queuedAt <= now) pending.set(jobs[next]!.id, jobs[next++]!);
    for (const [id, r] of running)
      if (r.endsAt <= now) {
        running.delete(id);
        busyNow -= r.gpus.length;
        const runs = history.get(key(r.job)) ?? [];
        runs.push(msPerStep(r.job));
        history.set(key(r.job), runs.slice(-5));
      }

    const input: PlanInput = {
      now,
      limits,
      pending: [...pending.values()].map((j): PendingJob => ({
        id: j.id,
        jobId: `job-${j.id}`,
        userId: 1,
        teamId: null,
        priority: 10,
        priorityOverride: null,
        queuedAt: j.queuedAt,
        jobType: "local",
        numProcesses: j.size,
        target: "local",
        workerLabels: null,
        deviceIds: null,
        anyGpu: false,
        expectedMs: expectedMs(j),
      })),
      running: [...running.values()].map((r): RunningJob => ({
        id: r.job.id,
        userId: 1,
        teamId: null,
        jobType: "local",
        allocatedGpus: r.gpus,
        workerId: null,
        // What its progress reports say: its true end, or off by its error factor; before its first
        // report, the end its plan expected when it started (its expected run time), if any.
        expectedEndAt: !estimates
          ? null
          : now >= r.startedAt + FIRST_PROGRESS_MS
            ? r.startedAt + r.job.durationMs * r.job.error
            : r.plannedEnd,
      })),
      localDevices: Array.from({ length: GPUS }, (_, i) => i),
      workers: [],
    };
    const plan = planPass(input);
    if (estimates && plan.waiting.some((w) => !forecastAt.has(w.id))) {
      const starts = expectedStarts(input, plan);
      for (const w of plan.waiting) if (!forecastAt.has(w.id)) forecastAt.set(w.id, starts.get(w.id)?.at ?? null);
    }
    for (const a of plan.admitted) {
      const job = byId.get(a.id)!;
      pending.delete(a.id);
      running.set(a.id, { job, gpus: a.gpus!, startedAt: now, endsAt: now + job.durationMs, plannedEnd: a.expectedEndAt ?? null });
      startedAt.set(a.id, now);
      busyNow += a.gpus!.length;
    }
  }

  const startErrors: number[] = [];
  let unknownStarts = 0;
  for (const [id, expected] of forecastAt) {
    const job = byId.get(id)!;
    const actual = startedAt.get(id);
    if (actual === undefined || actual >= WEEK || actual <= job.queuedAt) continue;
    if (expected === null) unknownStarts++;
    else startErrors.push(Math.abs(expected - actual) / (actual - job.queuedAt));
  }
  const big = jobs.filter((j) => j.size === GPUS && j.queuedAt < WEEK);
  const waits = big.map((j) => (Math.min(startedAt.get(j.id) ?? WEEK, WEEK) - j.queuedAt) / MIN);
  return {
    startErrors,
    unknownStarts,
    busy: busyArea / WEEK,
    bigStarts: big.filter((j) => (startedAt.get(j.id) ?? Infinity) < WEEK).length,
    longestBigWaitMin: Math.max(0, ...waits),
    started: [...startedAt.values()].filter((t) => t < WEEK).length,
  };
}

function report(title: string, maxError: number): { line: string; met: boolean } {
  const jobs = workload(seed, maxError);
  const t0 = performance.now();
  const results = Object.fromEntries((["none", "reservation", "backfill"] as const).map((p) => [p, simulate(jobs, p)])) as Record<
    Policy,
    Result
  >;
  const ms = performance.now() - t0;
  const big = jobs.filter((j) => j.size === GPUS).length;
  out(
    `${title}: ${jobs.length} jobs (${big} of 8 GPUs), seed ${seed}, run-to-run jitter +-${(jitter * 100).toFixed(0)} %, ${warm ? "each environment and size run once before" : "no earlier runs"}; simulated in ${(ms / 1000).toFixed(1)} s`,
  );
  for (const p of ["none", "reservation", "backfill"] as const) {
    const r = results[p];
    out(
      `  ${p.padEnd(11)} busy ${r.busy.toFixed(2)}/8; jobs started ${r.started}; 8-GPU jobs started ${r.bigStarts} of ${big}; longest 8-GPU wait ${r.longestBigWaitMin.toFixed(0)} min`,
    );
  }
  const { none, reservation, backfill } = results;
  const met =
    backfill.busy >= 7.8 && backfill.bigStarts >= reservation.bigStarts && backfill.longestBigWaitMin <= reservation.longestBigWaitMin;
  out(
    `  targets: busy >= 7.8 (${backfill.busy >= 7.8 ? "met" : "NOT met"}), 8-GPU starts >= reservation's (${backfill.bigStarts >= reservation.bigStarts ? "met" : "NOT met"}), longest 8-GPU wait <= reservation's (${backfill.longestBigWaitMin <= reservation.longestBigWaitMin ? "met" : "NOT met"})`,
  );
  const errors = [...backfill.startErrors].sort((a, b) => a - b);
  const quantile = (q: number) => errors[Math.min(errors.length - 1, Math.floor(q * errors.length))] ?? NaN;
  const [median, p90] = [quantile(0.5), quantile(0.9)];
  const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
  out(
    `  expected start (backfill): ${errors.length} jobs waited with a start expected on arrival (${backfill.unknownStarts} more were "unknown"); |expected - actual| / wait: median ${pct(median)}, p90 ${pct(p90)}; targets median <= 20 % (${median <= 0.2 ? "met" : "NOT met"}), p90 <= 50 % (${p90 <= 0.5 ? "met" : "NOT met"})`,
  );
  const line = `backfill: busy ${backfill.busy.toFixed(2)}/8 (reservation ${reservation.busy.toFixed(2)}/8, none ${none.busy.toFixed(2)}/8); 8-GPU starts ${backfill.bigStarts} (reservation ${reservation.bigStarts}); longest 8-GPU wait ${backfill.longestBigWaitMin.toFixed(0)} min (reservation ${reservation.longestBigWaitMin.toFixed(0)} min)`;
  return { line: `${line}; expected start error median ${pct(median)}, p90 ${pct(p90)}`, met };
}

// The workload with estimates wrong by up to +-50 % first; the workload last, so its line ends the output.
const wrong = report("Workload 2, every estimate wrong by up to +-50 %", 0.5);
out(wrong.line);
out("");
const exact = report("Workload 1, estimates as running jobs report them", 0);
out(exact.line);
