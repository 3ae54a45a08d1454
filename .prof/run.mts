import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import { round } from "../test/bench/lib";
const dataDir = mkdtempSync(join(tmpdir(), "prof-"));
const port = 18778;
const service = spawn(process.execPath, ["--import", "tsx", "edge/local/main.ts"], {
  cwd: "/work/main",
  env: { ...process.env, PROF_INSPECTOR_PORT: "9331", SERVICE_HOST: "127.0.0.1", SERVICE_PORT: String(port), SERVICE_DATA_DIR: dataDir, SERVICE_LOG_LEVEL: "WARNING", SERVICE_LOCAL_RUNNER: "0" },
  stdio: ["ignore", "ignore", "inherit"],
});
const exited = new Promise((done) => service.once("exit", done));
const base = `http://127.0.0.1:${port}`;
for (;;) { if (await fetch(`${base}/api/cloud/health/ready`).then((r) => r.ok, () => false)) break; await new Promise((r) => setTimeout(r, 200)); }
const post = (path: string, body: unknown, headers: Record<string, string> = {}) => fetch(base + path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
const admin = await post("/api/cloud/auth/setup/first-admin", { email: "b@example.com", username: "bench", password: "bench-password-1" });
const cookie = /(st_session=[^;]+)/.exec(admin.headers.get("set-cookie") ?? "")![1]!;
const { key } = (await (await post("/api/cloud/auth/api-keys", { name: "b" }, { cookie })).json()) as { key: string };
const auth = { "x-api-key": key };
const created = (await (await post("/api/admin/workers", { name: "bench-box" }, auth)).json()) as { token: string };
await post("/api/workers/register", { role: "local", gpus: [] }, { authorization: `Bearer ${created.token}` });
await post("/api/configs/environments", { name: "cpu" }, auth);
await fetch(`${base}/api/configs/cpu`, { method: "PUT", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ config: { "--num_processes": 0 } }) });
await post("/api/queue/concurrency", { local_job_max_concurrent: 100000 }, auth);
const targets = (await (await fetch("http://127.0.0.1:9331/json/list")).json()) as { webSocketDebuggerUrl: string; title: string; id: string }[];
console.log(targets.map((t) => t.title + " " + t.webSocketDebuggerUrl));
const ws = new WebSocket(targets[0]!.webSocketDebuggerUrl);
await new Promise((r) => ws.once("open", r));
let n = 0; const pending = new Map<number, (v: any) => void>();
ws.on("message", (m) => { const msg = JSON.parse(String(m)); if (msg.id && pending.has(msg.id)) { pending.get(msg.id)!(msg.result); pending.delete(msg.id); } });
const send = (method: string, params: any = {}) => new Promise<any>((r) => { const id = ++n; pending.set(id, r); ws.send(JSON.stringify({ id, method, params })); });
await send("Profiler.enable"); await send("Profiler.setSamplingInterval", { interval: 200 }); await send("Profiler.start");
const mode = process.argv[2] ?? "submit";
const req = mode === "trivial" ? { url: `${base}/api/cloud/health/live` } : { url: `${base}/api/queue/submit`, method: "POST", headers: { ...auth, "content-type": "application/json" }, body: () => JSON.stringify({ config_name: "cpu", target: "local" }) };
const r = await round(req, { concurrency: 16, seconds: 6 });
const { profile } = await send("Profiler.stop");
writeFileSync(`/tmp/prof2/${mode}.cpuprofile`, JSON.stringify(profile));
console.log(mode, "req/s", r.perSecond.toFixed(0), "requests", r.requests);
ws.close();
service.kill("SIGTERM");
await exited;
