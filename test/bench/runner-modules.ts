// `npm run bench:runner-modules`: what each module the runner loads costs in memory (issue 31, item
// 6: the runner at most 60 MB idle). Each case runs in a fresh `node --expose-gc` that loads the
// module (and uses it once: a schema parsed, a request made, a socket opened), collects garbage
// twice and prints its RSS and V8's split (heap used, external, code space); the case's figure is
// the median of BENCH_ROUNDS (3) processes, and "+" is its RSS over a bare Node's.
// The runner's own modules are bundled to plain JavaScript first, as runner/agent/build.mjs does.
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { createServer } from "node:http";
import { join, resolve } from "node:path";
import * as esbuild from "esbuild";
import { WebSocketServer } from "ws";
import { median } from "./lib";

const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const out = (line: string) => process.stdout.write(line + "\n");
const root = resolve(import.meta.dirname, "../..");
// Inside the checkout (ignored), so that bundled files resolve packages from its node_modules.
const build = join(root, ".build/bench-runner-modules");

// A local HTTP and WebSocket server for the cases that make a request or open a socket.
const server = createServer((_req, res) => res.end("{}"));
new WebSocketServer({ server });
await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`;

async function bundle(name: string, entry: string): Promise<string> {
  const file = join(build, `${name}.mjs`);
  await esbuild.build({
    entryPoints: [join(root, entry)],
    outfile: file,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    packages: "external",
    logLevel: "warning",
  });
  return file;
}
const imp = (file: string) => `await import(${JSON.stringify(file)});`;

const cases: [string, string][] = [
  ["bare node", ""],
  ["zod (full), one schema parsed", `const { z } = await import("zod"); z.object({ a: z.string() }).parse({ a: "x" });`],
  ["zod/mini, one schema parsed", `const z = await import("zod/mini"); z.object({ a: z.string() }).parse({ a: "x" });`],
  [
    "@hono/zod-openapi, one schema parsed",
    `const { z } = await import("@hono/zod-openapi"); z.object({ a: z.string() }).openapi("A").parse({ a: "x" });`,
  ],
  ["shared/schemas/workers.ts", imp(await bundle("schemas-workers", "shared/schemas/workers.ts"))],
  ["shared/client/endpoints-workers.ts (its schemas)", imp(await bundle("endpoints-workers", "shared/client/endpoints-workers.ts"))],
  [
    "node:crypto, a hash and random bytes",
    `const c = await import("node:crypto"); c.createHash("sha1").update("x").digest(); c.randomBytes(16);`,
  ],
  ["ws (loaded only)", `await import("ws");`],
  ["global fetch, one request", `await (await fetch(${JSON.stringify(url)})).text();`],
  [
    "node:http keep-alive, one request",
    `const http = await import("node:http"); const agent = new http.Agent({ keepAlive: true });
     await new Promise((done) => http.get(${JSON.stringify(url)}, { agent }, (r) => { r.resume(); r.on("end", done); }));`,
  ],
  [
    "ws, one socket open",
    `const { default: WebSocket } = await import("ws"); const ws = new WebSocket(${JSON.stringify(url.replace("http", "ws"))});
     await new Promise((done, fail) => { ws.once("open", done); ws.once("error", fail); });`,
  ],
  ["node-pty (loaded)", `(await import("node:module")).createRequire(${JSON.stringify(join(root, "x.js"))})("node-pty");`],
  ["the runner's modules (runner/agent/agent.ts, not started)", imp(await bundle("agent", "runner/agent/agent.ts"))],
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

function measure(code: string): Promise<Figures> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ["--expose-gc", "--input-type=module", "-e", code + MEASURE], {
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
  for (const [name, code] of cases) {
    const runs: Figures[] = [];
    for (let i = 0; i < rounds; i++) runs.push(await measure(code));
    const pick = (k: keyof Figures) => median(runs.map((r) => r[k]));
    const rss = pick("rss");
    if (!bare) bare = rss;
    out(
      `${name.padEnd(58)} ${mb(rss)} ${mb(rss - bare)} ${mb(pick("anon"))} ${mb(pick("file"))} ${mb(pick("heap"))} ${mb(pick("heapTotal"))} ${mb(pick("external"))}`,
    );
  }
} finally {
  server.close();
  rmSync(build, { recursive: true, force: true });
}
