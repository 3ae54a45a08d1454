// `npm run bench:stall`: stall detection (edge/jobs/stall.ts, the rule the service runs) on a
// simulated week with injected hangs. The workload (seeded, the demo trainer's generator, as
// bench:backfill): 1,000 jobs over a week, each of one of 20 environments (a time per step of
// 0.5-5 s; three large models 1-4 min) running 10-120 min; each step's time varies +-30 %, and one
// step in 200 takes 4 times as long (a slow batch). Every 100-500 steps a validation (1-5 min; one in 8 takes 20-60 min,
// longer than the threshold), every 250-1000 steps a checkpoint save (0.5-3 min; one in 8 takes
// 12-30 min). Model loading before the first step takes 1-15 min. One job in 10 hangs: at a random
// point between two steps it sends nothing more (its process is alive, so no heartbeat is missed).
// Events reach the service as they happen; the Scheduler asks the rule every 5 s (its beat), with
// the default thresholds: max(10 min, 5 x the median step time).
// Figures: hangs found (target all), time from the last step to the mark (median, max), and false
// alarms (marks of a job that was not hung), with those during validations and checkpoints (target
// 0); beside them the same rule without the phase exclusion, to show what the phases are worth.
// Settings: BENCH_SEED (17), BENCH_JOBS (1000), BENCH_HANG_RATE (0.1).
import { STALL_DEFAULTS } from "../../shared/schemas/queue";
import { advanceWatch, stallOf, stallThresholdMs, type StallWatch } from "../../edge/jobs/stall";
import { random } from "../../runner/demo-trainer/model";

const MIN = 60_000;
const WEEK = 7 * 24 * 60 * MIN;
const BEAT_MS = 5_000;
const ENVIRONMENTS = 20;
const seed = Number(process.env.BENCH_SEED ?? 17);
const jobCount = Number(process.env.BENCH_JOBS ?? 1000);
const hangRate = Number(process.env.BENCH_HANG_RATE ?? 0.1);
const out = (line: string) => process.stdout.write(line + "\n");

type SimEvent = { at: number; type: string; step?: number };

interface SimJob {
  startedAt: number;
  events: SimEvent[];
  /** When it hung (its last event), or null. */
  hungAt: number | null;
}

function workload(): SimJob[] {
  const rand = random(seed);
  const between = (a: number, b: number) => a + rand() * (b - a);
  // Three large models take 1-4 min a step: for them 5 x the median step is the threshold, not the 10 min.
  const stepSeconds = Array.from({ length: ENVIRONMENTS }, (_, i) => (i < 3 ? between(60, 240) : between(0.5, 5)));
  const jobs: SimJob[] = [];
  for (let j = 0; j < jobCount; j++) {
    const startedAt = rand() * WEEK;
    const env = Math.floor(rand() * ENVIRONMENTS);
    const stepMs = stepSeconds[env]! * 1000;
    const runMs = between(10, 120) * MIN;
    const validateEvery = Math.floor(between(100, 500));
    const checkpointEvery = Math.floor(between(250, 1000));
    const hangs = rand() < hangRate;
    const hangAfter = hangs ? rand() * runMs : Infinity;
    const events: SimEvent[] = [];
    let at = startedAt + between(1, 15) * MIN;
    let hungAt: number | null = null;
    // A hang comes between steps: a phase begun is ended (a hang inside a validation or a save is outside the rule).
    const emit = (e: SimEvent) => {
      if (hungAt !== null) return;
      if (e.type === "training.progress" && e.at - startedAt > hangAfter) {
        hungAt = events.length ? events[events.length - 1]!.at : startedAt;
        return;
      }
      events.push(e);
    };
    for (let step = 1; at - startedAt < runMs && hungAt === null; step++) {
      at += stepMs * between(0.7, 1.3) * (rand() < 1 / 200 ? 4 : 1);
      emit({ at, type: "training.progress", step });
      if (step % validateEvery === 0) {
        emit({ at, type: "validation.started" });
        at += (rand() < 1 / 8 ? between(20, 60) : between(1, 5)) * MIN;
        emit({ at, type: "validation.completed" });
      }
      if (step % checkpointEvery === 0) {
        emit({ at, type: "checkpoint.started" });
        at += (rand() < 1 / 8 ? between(12, 30) : between(0.5, 3)) * MIN;
        emit({ at, type: "checkpoint.saved" });
      }
    }
    jobs.push({ startedAt, events, hungAt });
  }
  return jobs;
}

interface Mark {
  at: number;
  /** What the job was really doing: hung, in a phase, or training. */
  truth: "hung" | "phase" | "training";
}

/**
 * The marks the Scheduler would make on one job: at each 5-s beat the rule reads the watch the
 * events so far built (the service's own advanceWatch); a mark stays until the next step.
 * `phases` false: the same rule with phases ignored.
 */
function marksOf(job: SimJob, phases: boolean): Mark[] {
  const marks: Mark[] = [];
  let watch: StallWatch | null = null;
  let marked = false;
  let inPhase = false;
  const end = job.hungAt !== null ? job.hungAt + 24 * 60 * MIN : (job.events.at(-1)?.at ?? job.startedAt);
  const points = [...job.events, { at: end, type: "end" }];
  for (let i = 0; i < points.length; i++) {
    const e = points[i]!;
    // The beats between the previous event and this one: the watch stays as it is, so the first
    // beat past its threshold is the only one to ask the rule about.
    if (watch && !marked) {
      const from = i === 0 ? job.startedAt : points[i - 1]!.at;
      const w: StallWatch = phases ? watch : { ...watch, phase: null };
      const due = Math.max(w.at, w.phaseAt) + stallThresholdMs(w.times, STALL_DEFAULTS);
      const beat = Math.ceil(Math.max(from, due) / BEAT_MS) * BEAT_MS;
      if (beat < e.at && stallOf(w, STALL_DEFAULTS, beat).stalled) {
        marks.push({ at: beat, truth: job.hungAt !== null && beat > job.hungAt ? "hung" : inPhase ? "phase" : "training" });
        marked = true;
      }
    }
    if (e.type === "end") break;
    if (e.type === "validation.started" || e.type === "checkpoint.started") inPhase = true;
    if (e.type === "validation.completed" || e.type === "checkpoint.saved") inPhase = false;
    const next = advanceWatch(watch, [e], job.startedAt, e.at);
    if (next && watch && next.step > watch.step) marked = false;
    watch = next;
  }
  return marks;
}

const jobs = workload();
const hung = jobs.filter((j) => j.hungAt !== null);
// A hang before the first step is outside the rule (no step yet): counted apart.
const hungTraining = hung.filter((j) => j.events.some((e) => e.type === "training.progress"));
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? NaN;
const minutes = (ms: number) => `${(ms / MIN).toFixed(1)} min`;

out(`stall detection on a simulated week: seed ${seed}, ${jobs.length} jobs, ${hung.length} hangs injected`);
out(`(${hungTraining.length} after the first step; ${hung.length - hungTraining.length} before it, outside the rule)`);
out(`rule: max(${STALL_DEFAULTS.min_seconds} s, ${STALL_DEFAULTS.factor} x median step time), checked every ${BEAT_MS / 1000} s`);
out("");
out("| rule | hangs found | time to detect: median | max | false alarms | of which during validation/checkpoint |");
out("|---|---|---|---|---|---|");
for (const phases of [true, false]) {
  const all = jobs.map((j) => ({ job: j, marks: marksOf(j, phases) }));
  const found = all.filter(({ job, marks }) => job.hungAt !== null && marks.some((m) => m.truth === "hung"));
  const foundTraining = found.filter(({ job }) => hungTraining.includes(job));
  const delays = found.map(({ job, marks }) => marks.find((m) => m.truth === "hung")!.at - job.hungAt!);
  const falseMarks = all.flatMap(({ marks }) => marks.filter((m) => m.truth !== "hung"));
  const inPhase = falseMarks.filter((m) => m.truth === "phase").length;
  out(
    `| ${phases ? "the service's (phases excluded)" : "without the phase exclusion"} | ${foundTraining.length} of ${hungTraining.length} | ${minutes(pct(delays, 0.5))} | ${minutes(Math.max(...delays))} | ${falseMarks.length} | ${inPhase} |`,
  );
}
