// `npm run bench`: requests/s of an API-key-authenticated GET (/api/users/me) against a trivial
// public route (/api/cloud/health/live) on the same local stack, measured in alternating rounds
// so both see the same machine state. Target: the authenticated route at >= 50 % of the trivial.
// The stack runs as `npm start` does, in its own process, so the load generator here does not
// share an event loop with the libSQL bridge it measures.
//
// Settings (environment): BENCH_CONCURRENCY (default 16), BENCH_SECONDS per round (default 5),
// BENCH_ROUNDS per route (default 3).
import { fmt, median, round, startBenchStack, type Round } from "./lib";

const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);

const stack = await startBenchStack();
try {
  const routes = [
    { name: "GET /api/cloud/health/live (public)", request: { url: `${stack.base}/api/cloud/health/live` } },
    { name: "GET /api/users/me (X-API-Key)", request: { url: `${stack.base}/api/users/me`, headers: { "x-api-key": stack.adminKey } } },
  ];
  process.stdout.write(`auth-throughput: ${concurrency} concurrent clients, ${rounds} rounds of ${seconds}s per route, alternating\n`);
  for (const route of routes) await round(route.request, { concurrency, seconds }); // warm-up, not counted
  const results = routes.map(() => [] as Round[]);
  for (let r = 0; r < rounds; r++) {
    for (const [i, route] of routes.entries()) {
      const result = await round(route.request, { concurrency, seconds });
      results[i]!.push(result);
      process.stdout.write(
        `  round ${r + 1} ${route.name.padEnd(38)} ${fmt(result.perSecond)} req/s  p50 ${fmt(result.p50, 2)} ms  p99 ${fmt(result.p99, 2)} ms\n`,
      );
    }
  }
  const perSecond = results.map((rs) => median(rs.map((x) => x.perSecond)));
  process.stdout.write("\nmedian of rounds:\n");
  for (const [i, route] of routes.entries()) {
    process.stdout.write(
      `  ${route.name.padEnd(38)} ${fmt(perSecond[i]!)} req/s  p50 ${fmt(median(results[i]!.map((x) => x.p50)), 2)} ms  p99 ${fmt(median(results[i]!.map((x) => x.p99)), 2)} ms\n`,
    );
  }
  const ratio = perSecond[1]! / perSecond[0]!;
  process.stdout.write(`\nauthenticated / trivial: ${(ratio * 100).toFixed(1)} % (target >= 50 %): ${ratio >= 0.5 ? "met" : "NOT met"}\n`);
} finally {
  await stack.stop();
}
