// `npm run bench:runner-modules`: what each module the runner loads costs in memory (issue 31, item
// 6: the runner at most 60 MB idle). Each case runs in a fresh `node --expose-gc` that loads the
// module (and uses it once: a schema parsed, a request made, a socket opened), collects garbage
// three times and prints its RSS, split into anonymous memory (V8's heap, malloc) and file pages
// (mostly the node binary's own code), and V8's heap used, heap size and external memory; the case's figure is
// the median of BENCH_ROUNDS (3) processes, and "+" is its RSS over a bare Node's.
// The runner's own modules are bundled to plain JavaScript first, as runner/agent/build.mjs does
// (and as it did before, packages left in node_modules). The idle runner itself, registered with a
// real edge: `npm run bench:training`, line 3.
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { createServer } from "node:http";
import { join, resolve } from "node:path";
import * as esbuild from "esbuild";
import { WebSocketServer } from "ws";
import { runnerBuild } from "../../runner/agent/build.mjs";
import { z } from "zod";
import { httpFetch } from "../../runner/agent/http-fetch";
import { ServiceClient } from "../../shared/client/client";
import { endpoint } from "../../shared/client/endpoint";
import { median, percentiles } from "./lib";

const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const out = (line: string) => process.stdout.write(line + "\n");
const root = resolve(import.meta.dirname, "../..");
// Inside the checkout (ignored), so that bundled files resolve packages from its node_modules.
const build = join(root, ".build/bench-runner-modules");

// A local HTTP and WebSocket server for the cases that make a request or open a socket.
const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => res.setHeader("content-type", "application/json").end("{}"));
});
new WebSocketServer({ server });
await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;

/**
 * Bundles `entry` as the runner's build does (runner/agent/build.mjs), or, `external`, as it did
 * before issue 31 (packages loaded from node_modules, the real @hono/zod-openapi).
 */
async function bundle(name: string, entry: string, how: "as built" | "external" | "all locales" = "as built"): Promise<string> {
  const file = join(build, `${name}.mjs`);
  const { entryPoints: _, outdir: __, outExtension: ___, ...options } = runnerBuild;
  await esbuild.build({
    ...options,
    ...(how === "external" ? { packages: "external", alias: {}, banner: {}, plugins: [] } : {}),
    ...(how === "all locales" ? { plugins: [] } : {}),
    sourcemap: "linked",
    entryPoints: [join(root, entry)],
    outfile: file,
  });
  return file;
}
const imp = (file: string) => `await import(${JSON.stringify(file)});`;
const requireFrom = `(await import("node:module")).createRequire(${JSON.stringify(join(root, "x.js"))})`;
const wsOpen = (load: string) =>
  `const WebSocket = ${load}; const ws = new WebSocket(${JSON.stringify(url.replace("http", "ws"))});
   await new Promise((done, fail) => { ws.once("open", done); ws.once("error", fail); });`;

const cases: [string, string, string[]?][] = [
  ["bare node", ""],
  ["zod (full), one schema parsed", `const { z } = await import("zod"); z.object({ a: z.string() }).parse({ a: "x" });`],
  ["zod/mini, one schema parsed", `const z = await import("zod/mini"); z.object({ a: z.string() }).parse({ a: "x" });`],
  [
    "@hono/zod-openapi, one schema parsed",
    `const { z } = await import("@hono/zod-openapi"); z.object({ a: z.string() }).openapi("A").parse({ a: "x" });`,
  ],
  [
    "worker endpoints' schemas, packages from node_modules",
    imp(await bundle("endpoints-ext", "shared/client/endpoints-workers.ts", "external")),
  ],
  ["worker endpoints' schemas, bundled, plain zod", imp(await bundle("endpoints", "shared/client/endpoints-workers.ts"))],
  ["  the same with all of zod's locales", imp(await bundle("endpoints-locales", "shared/client/endpoints-workers.ts", "all locales"))],
  [
    "node:crypto, a hash and random bytes",
    `const c = await import("node:crypto"); c.createHash("sha1").update("x").digest(); c.randomBytes(16);`,
  ],
  ["global fetch, one request", `await (await fetch(${JSON.stringify(url)})).text();`],
  ["a Response made (loads undici as fetch does)", `new Response("x");`],
  [
    "node:http keep-alive, one request",
    `const http = await import("node:http"); const agent = new http.Agent({ keepAlive: true });
     await new Promise((done) => http.get(${JSON.stringify(url)}, { agent }, (r) => { r.resume(); r.on("end", done); }));`,
  ],
  ["ws imported from ESM (Node's CommonJS export lexer), one socket", wsOpen(`(await import("ws")).default`)],
  ["ws required, one socket", wsOpen(`${requireFrom}("ws")`)],
  ["ipaddr.js imported from ESM", `await import("ipaddr.js");`],
  ["ipaddr.js required", `${requireFrom}("ipaddr.js");`],
  ["node-pty (loaded)", `${requireFrom}("node-pty");`],
  ["runner/agent/agent.ts, packages from node_modules (before)", imp(await bundle("agent-ext", "runner/agent/agent.ts", "external"))],
  ["runner/agent/agent.ts as built now (not started)", imp(await bundle("agent", "runner/agent/agent.ts"))],
  ["  the same with --enable-source-maps", imp(join(build, "agent.mjs")), ["--enable-source-maps"]],
];

// Run in the child: the case, then GC and the figures.
const MEASURE = `
await new Promise((r) => setTimeout(r, 100));
for (let i = 0; i < 3; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 50)); }
const fs = await import("node:fs");
const m = process.memoryUsage();
const status = fs.readFileSync("/proc/self/status", "utf8");
const kb = (k) => Number(new RegExp(k + ":\\\\s+(\\\\d+) kB").exec(status)[1]) * 1024;
process.stdout.write(JSON.stringify({ rss: kb("VmRSS"), anon: kb("RssAnon"), file: kb("RssFile"), heap: m.heapUsed, heapTotal: m.heapTotal, external: m.external }));
process.exit(0);`;

interface Figures {
  rss: number;
  anon: number;
  file: number;
  heap: number;
  heapTotal: number;
  external: number;
}

function measure(code: string, flags: string[] = []): Promise<Figures> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ["--expose-gc", ...flags, "--input-type=module", "-e", code + MEASURE], {
      cwd: root,
      env: { ...process.env, NODE_OPTIONS: "" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let text = "";
    child.stdout.on("data", (d: Buffer) => (text += d));
    child.on("exit", (status) => (status === 0 ? done(JSON.parse(text) as Figures) : fail(new Error(`exited with ${status}: ${text}`))));
  });
}

const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1).padStart(6);
try {
  out(`each case in a fresh node ${process.version} --expose-gc after GC, median of ${rounds}; MB (2^20 bytes)`);
  out(`${"case".padEnd(58)}    rss      +   anon   file   heap  heapT extern`);
  let bare = 0;
  for (const [name, code, flags] of cases) {
    const runs: Figures[] = [];
    for (let i = 0; i < rounds; i++) runs.push(await measure(code, flags));
    const pick = (k: keyof Figures) => median(runs.map((r) => r[k]));
    const rss = pick("rss");
    if (!bare) bare = rss;
    out(
      `${name.padEnd(58)} ${mb(rss)} ${mb(rss - bare)} ${mb(pick("anon"))} ${mb(pick("file"))} ${mb(pick("heap"))} ${mb(pick("heapTotal"))} ${mb(pick("external"))}`,
    );
  }

  // The transport's speed, so that memory is not bought with latency: BENCH_CALLS (2,000)
  // sequential POSTs of a 200-event batch, as the runner's event shipper sends them, through
  // ServiceClient with the global fetch and with the runner's node:http fetch, in turn.
  const calls = Number(process.env.BENCH_CALLS ?? 2000);
  const post = endpoint({ method: "POST", path: "/events", body: z.unknown(), response: "json" });
  const batch = { attempt: 1, events: Array.from({ length: 200 }, (_, i) => ({ type: "log", data: { line: `step ${i} loss 0.1234` } })) };
  for (const [name, fetcher] of [
    ["global fetch", undefined],
    ["node:http (httpFetch)", httpFetch()],
    ["global fetch", undefined],
    ["node:http (httpFetch)", httpFetch()],
  ] as const) {
    const client = new ServiceClient({ baseUrl: url, fetch: fetcher });
    const times: number[] = [];
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) {
      const t = performance.now();
      await client.call(post, { body: batch });
      times.push(performance.now() - t);
    }
    const { p50, p99 } = percentiles(times);
    out(
      `${name.padEnd(22)} ${calls} POSTs of 200 events: p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms, ${((calls / (performance.now() - t0)) * 1000).toFixed(0)}/s`,
    );
  }
} finally {
  server.close();
  rmSync(build, { recursive: true, force: true });
}
