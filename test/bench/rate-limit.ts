// `npm run bench:ratelimit`: what per-client rate limiting costs, and whether it stays exact.
//
// 1. Latency added per request: one client, GET /docs back to back, on a stack with limiting on
//    (every request counted by the RateLimiter Durable Object, loopback included) and on one with
//    it off (RATE_LIMIT_CALLS=0), in alternating rounds; p50/p99 of each and the difference.
// 2. Throughput, limiting on vs off: BENCH_CONCURRENCY clients, alternating rounds; the median of
//    the rounds' on/off ratios. Target: >= 70 %. RATE_LIMIT_CALLS is set far above what a run
//    sends, so nothing is refused and both stacks do the same work apart from the limiter; that
//    every request sent to the 'on' stack was counted is checked from its X-RateLimit-Remaining.
//    GET /docs (a constant page) is the trivial route: the health endpoints are excluded from
//    limiting, so they would measure nothing.
// 3. Exactness under contention: 32 clients hammer one address on a stack allowing
//    EXACT_CALLS per 1 s. A request's admission happened somewhere between its send and its
//    answer, so the admitted requests whose whole round trip fits inside some 1 s span were
//    certainly admitted within that span: their largest number over every span must never
//    exceed EXACT_CALLS.
//
// Settings (environment): BENCH_CONCURRENCY (default 16), BENCH_SECONDS per throughput round
// (default 5), BENCH_ROUNDS (default 3), BENCH_EXACT_SECONDS (default 6).
import { fmt, median, percentiles, round, startBenchStack, type Round } from "./lib";

const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const exactSeconds = Number(process.env.BENCH_EXACT_SECONDS ?? 6);
const EXACT_CALLS = 50;
const EXACT_WINDOW_MS = 1000;
const HAMMERING_CLIENTS = 32;

const [on, off, exact] = await Promise.all([
  startBenchStack({ env: { RATE_LIMIT_CALLS: "100000000", RATE_LIMIT_PERIOD: "3600", RATE_LIMIT_LOOPBACK: "1" } }),
  startBenchStack({ env: { RATE_LIMIT_CALLS: "0" } }),
  startBenchStack({
    env: { RATE_LIMIT_CALLS: String(EXACT_CALLS), RATE_LIMIT_PERIOD: String(EXACT_WINDOW_MS / 1000), RATE_LIMIT_LOOPBACK: "1" },
  }),
]);
try {
  const stacks = [
    { name: "limiting on ", base: on.base },
    { name: "limiting off", base: off.base },
  ];
  // Nothing leaves the 'on' window during the run (1 h), so its Remaining falls by exactly the
  // number of requests it counted: every request sent to it must have gone through the limiter.
  const remaining = async () => Number((await fetch(`${on.base}/docs`)).headers.get("x-ratelimit-remaining") ?? NaN);
  const remainingBefore = await remaining();
  if (Number.isNaN(remainingBefore)) throw new Error("the 'on' stack did not count GET /docs: no X-RateLimit-Remaining header");

  const line = (label: string, r: Round) =>
    process.stdout.write(`  ${label.padEnd(28)} ${fmt(r.perSecond)} req/s  p50 ${fmt(r.p50, 2)} ms  p99 ${fmt(r.p99, 2)} ms\n`);
  process.stdout.write(`rate-limit: GET /docs; latency with 1 client, throughput with ${concurrency}; ${rounds} alternating rounds each\n`);
  // Warm-up, not reported.
  const throughputWarmUp = await round({ url: `${on.base}/docs` }, { concurrency, seconds: 2 });
  await round({ url: `${off.base}/docs` }, { concurrency, seconds: 2 });
  const latencyWarmUp = await round({ url: `${on.base}/docs` }, { concurrency: 1, seconds: 1 });
  await round({ url: `${off.base}/docs` }, { concurrency: 1, seconds: 1 });

  process.stdout.write("\nlatency (1 client, 3 s rounds):\n");
  const latency = stacks.map(() => [] as Round[]);
  for (let r = 0; r < rounds; r++) {
    for (const [i, stack] of stacks.entries()) {
      const result = await round({ url: `${stack.base}/docs` }, { concurrency: 1, seconds: 3 });
      latency[i]!.push(result);
      line(`round ${r + 1} ${stack.name}`, result);
    }
  }

  process.stdout.write(`\nthroughput (${concurrency} clients, ${seconds} s rounds):\n`);
  const throughput = stacks.map(() => [] as Round[]);
  for (let r = 0; r < rounds; r++) {
    for (const [i, stack] of stacks.entries()) {
      const result = await round({ url: `${stack.base}/docs` }, { concurrency, seconds });
      throughput[i]!.push(result);
      line(`round ${r + 1} ${stack.name}`, result);
    }
  }

  const sentToOn = [throughputWarmUp, latencyWarmUp, ...latency[0]!, ...throughput[0]!].reduce((sum, r) => sum + r.requests, 0);
  const countedByOn = remainingBefore - (await remaining()) - 1;

  process.stdout.write(
    `\nexactness: ${HAMMERING_CLIENTS} clients hammering one address, ${EXACT_CALLS} per ${EXACT_WINDOW_MS} ms, ${exactSeconds} s\n`,
  );
  const hammered = await hammer(`${exact.base}/docs`, HAMMERING_CLIENTS, exactSeconds);

  const p = (rs: Round[], key: "p50" | "p99") => median(rs.map((x) => x[key]));
  process.stdout.write("\nsummary (medians of rounds):\n");
  process.stdout.write(
    `  latency p50: on ${fmt(p(latency[0]!, "p50"), 3)} ms, off ${fmt(p(latency[1]!, "p50"), 3)} ms, added ${fmt(p(latency[0]!, "p50") - p(latency[1]!, "p50"), 3)} ms\n`,
  );
  process.stdout.write(
    `  latency p99: on ${fmt(p(latency[0]!, "p99"), 3)} ms, off ${fmt(p(latency[1]!, "p99"), 3)} ms, added ${fmt(p(latency[0]!, "p99") - p(latency[1]!, "p99"), 3)} ms\n`,
  );
  const perSecond = throughput.map((rs) => median(rs.map((x) => x.perSecond)));
  const ratio = median(throughput[0]!.map((x, i) => x.perSecond / throughput[1]![i]!.perSecond));
  process.stdout.write(`  throughput: on ${fmt(perSecond[0]!)} req/s, off ${fmt(perSecond[1]!)} req/s\n`);
  process.stdout.write(
    `  on / off: ${(ratio * 100).toFixed(1)} % (median of per-round ratios; target >= 70 %): ${ratio >= 0.7 ? "met" : "NOT met"}\n`,
  );
  process.stdout.write(
    `  requests counted by the limiter: ${countedByOn} of ${sentToOn} sent with limiting on${countedByOn === sentToOn ? "" : " (MISMATCH)"}\n`,
  );
  process.stdout.write(
    `  exactness: ${hammered.total} requests, ${hammered.admitted} admitted, ${hammered.refused} refused (429), ${hammered.other} other; ` +
      `most admitted inside one ${EXACT_WINDOW_MS} ms span: ${hammered.mostInOneWindow} (limit ${EXACT_CALLS}): ${hammered.mostInOneWindow <= EXACT_CALLS ? "exact" : "OVER-ADMITTED"}\n`,
  );
  process.stdout.write(
    `  exactness: admitted per second ${(hammered.admitted / hammered.seconds).toFixed(1)} (an exact sliding window under saturation admits ~${EXACT_CALLS})\n`,
  );
  process.stdout.write(`  exactness: 429 answers p50 ${fmt(hammered.refusedP50, 2)} ms\n`);
} finally {
  await Promise.all([on.stop(), off.stop(), exact.stop()]);
}

/** `clients` loops sending `url` for `seconds`; per admitted request, when it was sent and answered. */
async function hammer(url: string, clients: number, seconds: number) {
  const admitted: { sent: number; answered: number }[] = [];
  const refusedLatencies: number[] = [];
  let other = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < deadline) {
        const sent = performance.now();
        const response = await fetch(url);
        await response.arrayBuffer();
        const answered = performance.now();
        if (response.status === 200) admitted.push({ sent, answered });
        else if (response.status === 429) refusedLatencies.push(answered - sent);
        else other++;
      }
    }),
  );
  // For each admitted request's send time s: the admitted requests sent and answered within
  // [s, s + window) were admitted within it.
  const bySent = [...admitted].sort((a, b) => a.sent - b.sent);
  let mostInOneWindow = 0;
  for (const [i, first] of bySent.entries()) {
    let inside = 0;
    for (let j = i; j < bySent.length && bySent[j]!.sent < first.sent + EXACT_WINDOW_MS; j++)
      if (bySent[j]!.answered < first.sent + EXACT_WINDOW_MS) inside++;
    mostInOneWindow = Math.max(mostInOneWindow, inside);
  }
  return {
    total: admitted.length + refusedLatencies.length + other,
    admitted: admitted.length,
    refused: refusedLatencies.length,
    other,
    seconds: (performance.now() - started) / 1000,
    mostInOneWindow,
    refusedP50: percentiles(refusedLatencies).p50,
  };
}
