// `npm run bench:dashboard`: the dashboard's weight and how soon its first view is drawn.
//  1. the script and stylesheet as the Worker serves them (edge/local/ui-build.ts), raw and gzipped,
//     against the script's budget (250 KB minified), and what the script is made of (bytes by origin);
//  2. through `npm start`'s process and headless chromium (/usr/bin/chromium), logged in: from
//     navigating to `/#/queue` to the Queue view's heading being visible, and the browser's own
//     first-contentful-paint; each round a new browser context (no cache).
// Settings: BENCH_ROUNDS (10).
import { gzipSync } from "node:zlib";
import { bundleDashboard, DASHBOARD_SCRIPT_BUDGET } from "../../edge/local/ui-build";
import { launchBrowser } from "../helpers/browser";
import { fmt, percentiles, startBenchStack } from "./lib";

const rounds = Number(process.env.BENCH_ROUNDS ?? 10);
const out = (line: string) => process.stdout.write(line + "\n");
const kb = (bytes: number) => `${(bytes / 1000).toFixed(1)} KB`;

async function main(): Promise<void> {
  const { build, scriptBytesByOrigin } = await bundleDashboard();
  const { js, css } = build;
  out(`script ${kb(js.length)} (gzip ${kb(gzipSync(js).length)}), stylesheet ${kb(css.length)} (gzip ${kb(gzipSync(css).length)})`);
  out(`script budget ${kb(DASHBOARD_SCRIPT_BUDGET)}: ${js.length <= DASHBOARD_SCRIPT_BUDGET ? "within" : "OVER"}`);
  const origins = Object.entries(scriptBytesByOrigin).sort(([, a], [, b]) => b - a);
  out(`script by origin: ${origins.map(([origin, bytes]) => `${origin} ${kb(bytes)}`).join(", ")}`);

  const stack = await startBenchStack();
  const browser = await launchBrowser();
  try {
    const login = await stack.post("/api/cloud/auth/login", { username: "bench", password: "bench-password-1" });
    const cookie = /st_session=([^;]+)/.exec(login.headers.get("set-cookie") ?? "")?.[1];
    if (!cookie) throw new Error(`login: ${login.status}`);
    const drawn: number[] = [];
    const paints: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      await context.addCookies([{ name: "st_session", value: cookie, url: stack.base }]);
      const page = await context.newPage();
      const started = performance.now();
      await page.goto(`${stack.base}/#/queue`, { waitUntil: "commit" });
      await page.getByRole("heading", { name: "Queue", level: 1 }).waitFor();
      drawn.push(performance.now() - started);
      paints.push(await page.evaluate(() => performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? Number.NaN));
      await context.close();
    }
    const d = percentiles(drawn);
    const p = percentiles(paints);
    out(`first view (Queue heading visible), ${rounds} rounds: p50 ${fmt(d.p50)} ms  p99 ${fmt(d.p99)} ms`);
    out(`first contentful paint:                   p50 ${fmt(p.p50)} ms  p99 ${fmt(p.p99)} ms`);
  } finally {
    await browser.close();
    await stack.stop();
  }
}

await main();
