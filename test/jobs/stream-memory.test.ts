// A live event stream's memory in the Worker does not grow with the events it has sent: each
// event the hub writes to a follower is let go once the follower has it. Read in workerd's heap
// through its inspector (test/helpers/heap.ts). Against a stream body that workerd pumps as a
// JavaScript stream (a TransformStream), the heap holds a chain of pending promises two longer
// for every event written, until the stream ends (edge/jobs/live-watchers.ts, sseBody).
import { afterAll, beforeAll, expect, it } from "vitest";
import { registerWorker } from "../helpers/boxes";
import { longestPromiseChain, workerHeapSnapshot } from "../helpers/heap";
import { sseEvents } from "../helpers/sse";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
const EVENTS = 300;

beforeAll(async () => {
  t = await startTestStack(undefined, undefined, { inspector: true });
  admin = await setUpAdmin(t);
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

it("holds nothing per event sent to a follower that has read it", async () => {
  const auth = { key: admin.key };
  await t.call("POST", "/api/queue/concurrency", { json: { worker_heartbeat_timeout_seconds: 86_400 }, auth });
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "plain" }, auth })).status).toBe(201);
  const box = await registerWorker(t, admin.key, "box-memory", "remote", [{ index: 0, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }], {
    pool: "memory",
  });
  const job = (
    await t.call("POST", "/api/queue/submit", { json: { config_name: "plain", target: "worker", worker_labels: { pool: "memory" } }, auth })
  ).body;
  expect(job.status).toBe("running");

  const follower = new AbortController();
  const stream = await fetch(`${t.base}/api/training/events/stream?job_id=${job.job_id}`, {
    headers: { "x-api-key": admin.key },
    signal: follower.signal,
  });
  expect(stream.status).toBe(200);
  const seen: number[] = [];
  const reading = (async () => {
    for await (const event of sseEvents(stream.body!)) if (event.data?.type === "log") seen.push(event.data.index as number);
  })().catch(() => {});
  // One event a batch, as a runner sends them at a few a second: each is its own write to the follower.
  for (let seq = 0; seq < EVENTS; seq++) {
    const stored = await t.call("POST", `/api/workers/jobs/${job.job_id}/events`, {
      json: { attempt: 1, events: [{ seq, event: { type: "log", message: `line ${seq}` } }] },
      auth: { bearer: box.token },
    });
    expect(stored.status).toBe(200);
  }
  await until("the follower to have every event", () => seen.length >= EVENTS, { timeoutMs: 20_000 });
  expect(seen.length).toBe(EVENTS);

  // The stream is still open: what it sent is let go (a JavaScript-pumped body held about 2 x EVENTS here).
  expect(longestPromiseChain(await workerHeapSnapshot(t.stack.inspectorUrl!))).toBeLessThan(50);
  follower.abort();
  await reading;
}, 90_000);
