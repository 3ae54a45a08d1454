import { readFileSync } from "node:fs";
const p = JSON.parse(readFileSync(process.argv[2], "utf8"));
const byId = new Map(p.nodes.map(n => [n.id, n]));
const dt = new Map(); for (let i = 0; i < p.samples.length; i++) dt.set(p.samples[i], (dt.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
let total = 0; const self = new Map();
const key = (cf) => `${cf.functionName || "(anon)"} ${cf.url.split("/").slice(-1)[0]}:${cf.lineNumber}`;
for (const n of p.nodes) { const t = dt.get(n.id) ?? 0; total += t; const k = key(n.callFrame); self.set(k, (self.get(k) ?? 0) + t); }
console.log("total ms", (total / 1000).toFixed(0));
for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, +process.argv[3] || 25)) console.log((v / 1000).toFixed(0).padStart(7), (100 * v / total).toFixed(1).padStart(5) + "%", k);
const parent = new Map(); for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const incl = new Map();
for (const n of p.nodes) { const t = dt.get(n.id) ?? 0; if (!t) continue; const seen = new Set(); let id = n.id; while (id !== undefined) { const k = key(byId.get(id).callFrame); if (!seen.has(k)) { seen.add(k); incl.set(k, (incl.get(k) ?? 0) + t); } id = parent.get(id); } }
console.log("--- inclusive"); for (const [k, v] of [...incl].sort((a, b) => b[1] - a[1]).slice(0, +process.argv[4] || 40)) console.log((v / 1000).toFixed(0).padStart(7), (100 * v / total).toFixed(1).padStart(5) + "%", k);
