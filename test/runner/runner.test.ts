// The runner agent against the real stack: it registers the box's GPUs as a fake nvidia-smi
// reports them, runs the jobs the Scheduler assigns it under a PTY with CUDA_VISIBLE_DEVICES,
// and reports how they end; the edge frees the GPUs and starts what was waiting.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { parseGpuCsv } from "../../runner/agent/gpus";
import { PLAIN_BOX, planLaunch } from "../../runner/agent/job";
import { findProgram } from "../../runner/agent/sandbox";
import { sseEvents, type SseEvent } from "../helpers/sse";
import { spawnRunner, stopRunner } from "../helpers/runner-process";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until as waitUntil } from "../helpers/wait";
import { prerequisite } from "../helpers/prerequisites";
import { endWhenDone } from "../helpers/cleanup";

let t: TestStack;
let admin: { key: string; cookie: string };
let runner: ChildProcess;
let runnerOutput = "";
let token: string;

function startRunner() {
  runner = spawnRunner(t.base, token, ["--local", "--config", configFile, "--work-dir", workDir], {
    env: { PATH: `${resolve("test/fakes")}:${process.env.PATH}`, FAKE_NVIDIA_GPUS: "2" },
    onOutput: (text) => (runnerOutput += text),
  }).child;
}
const workDir = mkdtempSync(join(tmpdir(), "runner-test-"));
// This box lets an admin's raw --trainer_command run (sandboxed) and declares one script.
const configFile = join(mkdtempSync(join(tmpdir(), "runner-config-")), "runner.json");
const ECHO_ARGS = resolve("test/fakes/echo-args");
const HAS_BWRAP = prerequisite("bubblewrap (bwrap)", findProgram("bwrap", process.env.PATH ?? "") !== null);
const auth = () => ({ key: admin.key });

async function env(name: string, config: Record<string, unknown>) {
  expect((await t.call("POST", "/api/configs/environments", { json: { name }, auth: auth() })).status).toBe(201);
  expect((await t.call("PUT", `/api/configs/${name}`, { json: { config }, auth: auth() })).status).toBe(200);
}
const submit = async (config_name: string) =>
  (await t.call("POST", "/api/queue/submit", { json: { config_name, target: "local" }, auth: auth() })).body;
const entry = async (jobId: string) =>
  ((await t.call("GET", "/api/queue?include_completed=true&limit=1000", { auth: auth() })).body.jobs as any[]).find(
    (j) => j.job_id === jobId,
  );

const until = <T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 20_000) =>
  waitUntil(what, probe, { timeoutMs, context: () => `runner output:\n${runnerOutput}` });

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  const created = await t.call("POST", "/api/admin/workers", { json: { name: "gpu-box" }, auth: auth() });
  token = created.body.token;
  // Sandboxed wherever bubblewrap is installed (.ci/run installs it); without it the box runs
  // only the built-in trainers, and the tests of raw commands are skipped.
  writeFileSync(
    configFile,
    JSON.stringify({ allow_raw_commands: true, scripts: [ECHO_ARGS], hide: [t.dataDir], sandbox: HAS_BWRAP ? "required" : "auto" }),
  );
  startRunner();
  await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 4 }, auth: auth() });
  await until("the runner to register", async () => runnerOutput.includes("registered as worker"));
  await env("demo-1", { "--trainer": "demo", "--num_processes": 1, "--max_train_steps": 4, "--demo_step_ms": 50 });
  await env("demo-2", { "--trainer": "demo", "--num_processes": 2, "--max_train_steps": 3, "--demo_step_ms": 20 });
});
afterAll(async () => {
  await stopRunner(runner);
  await t?.stop();
  rmSync(workDir, { recursive: true, force: true });
  rmSync(dirname(configFile), { recursive: true, force: true });
});

describe("the runner", () => {
  it("registers the GPUs nvidia-smi reports as the local box", async () => {
    const box = await until("the box to register", async () => {
      const workers = (await t.call("GET", "/api/admin/workers", { auth: auth() })).body.workers as any[];
      return workers.find((w) => w.name === "gpu-box" && w.status === "IDLE");
    });
    expect(box).toMatchObject({ role: "local", gpu_count: 2, gpu_name: "NVIDIA A100-SXM4-80GB" });
    await until("the runner's log line", async () => runnerOutput.includes("registered as worker"));
    expect(runnerOutput).toContain("with 2 GPU(s): 0 NVIDIA A100-SXM4-80GB, 1 NVIDIA A100-SXM4-80GB");
    // Every trainer and script of this file runs in bubblewrap.
    if (HAS_BWRAP) expect(runnerOutput).toMatch(/trainers and scripts run sandboxed by \S*bwrap/);
  });

  it("runs assigned jobs on their devices, reports them completed, and the waiting job starts on the freed GPUs", async () => {
    const first = await submit("demo-1");
    expect(first).toMatchObject({ status: "running", allocated_gpus: [0] });
    const second = await submit("demo-2");
    expect(second).toMatchObject({ status: "queued", wait_reason: "gpus_busy" });
    await until("the first job to complete", async () => (await entry(first.job_id))?.status === "completed");
    const started = await until("the second job to start", async () => {
      const e = await entry(second.job_id);
      return e?.status !== "pending" && e;
    });
    expect(started.allocated_gpus).toEqual([0, 1]);
    await until("the second job to complete", async () => (await entry(second.job_id))?.status === "completed");
    const log1 = readFileSync(join(workDir, "jobs", first.job_id, "output.log"), "utf8");
    expect(log1).toContain(`"job_id":"${first.job_id}"`);
    expect(log1).toContain('"cuda_visible_devices":"0"');
    expect(log1).toContain('"type":"training.completed"');
    expect(readFileSync(join(workDir, "jobs", second.job_id, "output.log"), "utf8")).toContain('"cuda_visible_devices":"0,1"');
    const box = ((await t.call("GET", "/api/admin/workers", { auth: auth() })).body.workers as any[]).find((w) => w.name === "gpu-box");
    expect(box.status).toBe("IDLE");

    // Every event reached the edge, in order, with dense indexes, before the job was reported done.
    const page = (await t.call("GET", `/api/training/events?job_id=${first.job_id}`, { auth: auth() })).body;
    expect(page).toMatchObject({ job_id: first.job_id, status: "completed", next_index: page.events.length });
    expect(page.events.map((e: any) => e.index)).toEqual(page.events.map((_: unknown, i: number) => i));
    // First the runner's word on the (never uploaded) dataset, then the trainer's events.
    expect(page.events[0]).toMatchObject({ index: 0, type: "dataset.missing", data: { path: "datasets/demo-1" } });
    expect(page.events[1]).toMatchObject({
      index: 1,
      type: "training.started",
      data: { job_id: first.job_id, cuda_visible_devices: "0", total_steps: 4 },
    });
    expect(page.events.filter((e: any) => e.type === "training.progress").map((e: any) => e.data.step)).toEqual([1, 2, 3, 4]);
    expect(page.events.at(-1)).toMatchObject({ type: "training.completed", data: { step: 4 } });
    expect(page.events[0].timestamp).toMatch(/^\d{4}-\d\d-\d\dT/);
    // Polling from an index gives the rest; past the end, nothing and the same next_index.
    const rest = (await t.call("GET", `/api/training/events?job_id=${first.job_id}&since_index=3&limit=2`, { auth: auth() })).body;
    expect(rest.events.map((e: any) => e.index)).toEqual([3, 4]);
    expect(rest.next_index).toBe(5);
    const end = (await t.call("GET", `/api/training/events?job_id=${first.job_id}&since_index=${page.next_index}`, { auth: auth() })).body;
    expect(end).toMatchObject({ events: [], next_index: page.next_index });
    expect((await t.call("GET", "/api/training/events?job_id=nope", { auth: auth() })).status).toBe(404);
    expect((await t.call("GET", `/api/training/events?job_id=${first.job_id}`)).status).toBe(401);
  });

  it.skipIf(!HAS_BWRAP)("reports a trainer that exits non-zero as failed with its exit code and last lines", async () => {
    await env("crashes", {
      "--num_processes": 0,
      "--trainer_command": JSON.stringify([
        process.execPath,
        "-e",
        "console.log('loading model'); console.error('CUDA error: out of memory'); process.exit(3)",
        "--",
      ]),
    });
    const job = await submit("crashes");
    const failed = await until("the job to fail", async () => {
      const e = await entry(job.job_id);
      return e?.status === "failed" && e;
    });
    expect(failed.error_message).toMatch(/^the trainer exited with code 3\nlast lines:\n/);
    expect(failed.error_message).toContain("CUDA error: out of memory");
    // Lines that are not events arrive as log events.
    const events = (await t.call("GET", `/api/training/events?job_id=${job.job_id}`, { auth: auth() })).body.events as any[];
    expect(events.map((e) => [e.type, e.message])).toEqual(
      expect.arrayContaining([
        ["log", "loading model"],
        ["log", "CUDA error: out of memory"],
      ]),
    );
  });

  it("stores a resent event batch once, and only for the job's own worker", async () => {
    const job = await submit("demo-1");
    await until("the job to complete", async () => (await entry(job.job_id))?.status === "completed");
    const other = await t.call("POST", "/api/admin/workers", { json: { name: "events-other" }, auth: auth() });
    const bearer = (token: string) => ({ bearer: token });
    // An attempt this worker never ran is not its to write into.
    const never = { attempt: 9, events: [{ seq: 0, event: { type: "custom.note", text: "x" } }] };
    expect((await t.call("POST", `/api/workers/jobs/${job.job_id}/events`, { json: never, auth: { bearer: token } })).status).toBe(404);
    // Late events of the attempt it ran, numbered on from the runner's own (0 .. n-1).
    const n = (await t.call("GET", `/api/training/events?job_id=${job.job_id}&limit=1000`, { auth: auth() })).body.events.length;
    const batch = {
      attempt: 1,
      events: [
        { seq: n, event: { type: "custom.note", text: "a" } },
        { seq: n + 1, event: { type: "custom.note", text: "b" } },
      ],
    };
    const path = `/api/workers/jobs/${job.job_id}/events`;
    // Another box's token, while this runner's own batches of the job were just stored: refused,
    // and nothing of it stored (the next batch of the job's own runner takes the very next indexes).
    expect((await t.call("POST", path, { json: batch, auth: bearer(other.body.token) })).status).toBe(404);
    const first = await t.call("POST", path, { json: batch, auth: bearer(token) });
    expect(first.status).toBe(200);
    expect(first.body.next_index).toBe(n + 2);
    const again = await t.call("POST", path, { json: batch, auth: bearer(token) });
    expect(again.body).toEqual({ stored: 0, next_index: first.body.next_index, dropped: 0 });
    expect(first.body.stored).toBe(2);
    const tail = (
      await t.call("GET", `/api/training/events?job_id=${job.job_id}&since_index=${first.body.next_index - 2}`, { auth: auth() })
    ).body.events;
    // The job has ended: they are kept, marked late.
    expect(tail.map((e: any) => [e.index, e.type, e.text, e.late])).toEqual([
      [first.body.next_index - 2, "custom.note", "a", true],
      [first.body.next_index - 1, "custom.note", "b", true],
    ]);
    const bad = await t.call("POST", path, {
      json: { attempt: 1, events: [{ seq: 0, event: { title: "no type" } }] },
      auth: bearer(token),
    });
    expect(bad.status).toBe(422);
  });

  it.skipIf(!HAS_BWRAP)(
    "takes events a trainer POSTs as raw webhooks to the callback the runner puts in its --webhook_config",
    async () => {
      const poster = `
      const hooks = JSON.parse(process.argv[process.argv.indexOf("--webhook_config") + 1]);
      const post = (body) => fetch(hooks[0].callback_url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      (async () => {
        console.log(JSON.stringify({ type: "hooks.seen", data: { count: hooks.length, type: hooks[0].webhook_type, env: process.env.TRAINER_CALLBACK_URL === hooks[0].callback_url } }));
        await post({ message_type: "train_status", state: { global_step: 3 } });
        await post({ type: "custom.event", data: { x: 1 } });
        await post([1, 2]);
      })();`;
      await env("webhook-trainer", {
        "--num_processes": 0,
        "--trainer_command": JSON.stringify([process.execPath, "-e", poster, "--"]),
        "--webhook_config": JSON.stringify([{ webhook_type: "raw", callback_url: "https://user-receiver.example/h" }]),
      });
      const job = await submit("webhook-trainer");
      await until("the job to complete", async () => (await entry(job.job_id))?.status === "completed");
      const events = (await t.call("GET", `/api/training/events?job_id=${job.job_id}`, { auth: auth() })).body.events as any[];
      // Only the runner's own callback reaches the trainer; the user's receiver is the edge's to call.
      expect(events.find((e) => e.type === "hooks.seen").data).toEqual({ count: 1, type: "raw", env: true });
      expect(events.find((e) => e.type === "train_status")).toMatchObject({ message_type: "train_status", state: { global_step: 3 } });
      expect(events.find((e) => e.type === "custom.event")).toMatchObject({ data: { x: 1 } });
      expect(events.find((e) => e.type === "webhook")).toMatchObject({ data: [1, 2] });
    },
  );

  it("wakes the runner through its channel: with a 60 s poll, assignments and commands still arrive at once", async () => {
    // The runner here asks for work every 60 s; everything in this file relies on the channel.
    expect((await t.call("GET", "/api/workers/channel", { auth: { bearer: token } })).status).toBe(426);
    expect((await t.call("GET", "/api/workers/channel")).status).toBe(401);
    const job = await submit("demo-1");
    // Well inside the 60 s poll: only the wake-up can have brought it.
    await until("the runner to start it", async () => runnerOutput.includes(`job ${job.job_id} started`), 10_000);
    await until("the job to complete", async () => (await entry(job.job_id))?.status === "completed");
  });

  it("refuses a finish report for a job that is not this worker's", async () => {
    const other = await t.call("POST", "/api/admin/workers", { json: { name: "other" }, auth: auth() });
    await t.call("POST", "/api/workers/register", { json: { role: "remote" }, auth: { bearer: other.body.token } });
    const job = await submit("demo-1");
    const refused = await t.call("POST", `/api/workers/jobs/${job.job_id}/finish`, {
      json: { status: "completed" },
      auth: { bearer: other.body.token },
    });
    expect(refused.status).toBe(404);
    await until("the job to complete", async () => (await entry(job.job_id))?.status === "completed");
    const late = await t.call("POST", `/api/workers/jobs/${job.job_id}/finish`, {
      json: { status: "failed" },
      auth: { bearer: other.body.token },
    });
    expect(late.status).toBe(404);
    expect((await t.call("POST", `/api/workers/jobs/${job.job_id}/finish`, { json: { status: "completed" } })).status).toBe(401);
    // No runner behind this worker: drained, so later jobs with target auto do not go to it.
    await t.call("POST", "/api/workers/heartbeat", { json: { draining: true }, auth: { bearer: other.body.token } });
  });
});

/** Reads server-sent events from a stream until `stop` says so; returns them with their ids. */
/** Server-sent events from a stream until `stop` says so (or the stream ends). */
async function readSse(response: Response, stop: (e: SseEvent) => boolean) {
  const got: SseEvent[] = [];
  for await (const e of sseEvents(response.body!)) {
    got.push(e);
    if (stop(e)) break;
  }
  return got;
}

describe("watching a job live", () => {
  it("streams server-sent events live in order, resumes after Last-Event-ID, and ends with the job", async () => {
    await env("watched", {
      "--trainer": "demo",
      "--num_processes": 0,
      "--max_train_steps": 30,
      "--demo_step_ms": 30,
      "--validation_preview": true,
      "--validation_preview_steps": 4,
      "--validation_num_inference_steps": 9,
    });
    const job = await submit("watched");
    const url = `${t.base}/api/training/events/stream?job_id=${job.job_id}`;
    const headers = { "x-api-key": admin.key, accept: "text/event-stream" };
    const response = await fetch(url, { headers });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    // Read part of it live, then drop the connection.
    const firstPart = await readSse(response, (e) => e.data.type === "training.progress" && e.data.data.step === 10);
    expect(firstPart.map((e) => Number(e.id))).toEqual(firstPart.map((_, i) => i));
    // Reconnect the way EventSource does: the rest follows without a gap, then the end.
    const lastId = firstPart.at(-1)!.id!;
    const rest = await readSse(await fetch(url, { headers: { ...headers, "last-event-id": lastId } }), (e) => e.event === "end");
    expect(rest.at(-1)).toMatchObject({ event: "end", data: { status: "completed" } });
    const all = [...firstPart, ...rest.slice(0, -1)];
    expect(all.map((e) => Number(e.id))).toEqual(all.map((_, i) => i));
    expect(all.filter((e) => e.data.type === "validation.image").map((e) => e.data.data.step_label)).toEqual(["1/9", "5/9", "9/9"]);
    // The same as polling, event for event.
    const polled = (await t.call("GET", `/api/training/events?job_id=${job.job_id}`, { auth: auth() })).body.events;
    expect(all.map((e) => e.data)).toEqual(polled);
    // An ended job's stream replays its log and closes.
    const replay = await readSse(await fetch(url, { headers }), () => false);
    expect(replay.length).toBe(polled.length + 1);
    expect((await fetch(url.replace(job.job_id, "nope"), { headers })).status).toBe(404);
    expect((await fetch(url, { headers: { ...headers, "last-event-id": "x" } })).status).toBe(422);
    expect((await fetch(url)).status).toBe(401);
  });

  it.skipIf(!HAS_BWRAP)(
    "delivers a burst of 1,500 printed events (several runner batches) once each, in order, live and resumed after Last-Event-ID",
    async () => {
      // Waits for the follower, then prints all 1,500 in one write: they reach the runner together
      // and go to the edge as full batches, one after another; each batch's events (over 150 KiB)
      // reach a follower in several writes.
      const burst = `
      setTimeout(() => {
        let text = "";
        for (let n = 0; n < 1500; n++) text += JSON.stringify({ type: "burst.tick", data: { n, pad: "x".repeat(300) } }) + "\\n";
        process.stdout.write(text, () => setTimeout(() => process.exit(0), 100));
      }, 1500);`;
      await env("burst", { "--num_processes": 0, "--trainer_command": JSON.stringify([process.execPath, "-e", burst, "--"]) });
      const job = await submit("burst");
      const url = `${t.base}/api/training/events/stream?job_id=${job.job_id}`;
      const headers = { "x-api-key": admin.key, accept: "text/event-stream" };
      const firstPart = await readSse(await fetch(url, { headers }), (e) => e.data.type === "burst.tick" && e.data.data.n === 700);
      const rest = await readSse(
        await fetch(url, { headers: { ...headers, "last-event-id": firstPart.at(-1)!.id! } }),
        (e) => e.event === "end",
      );
      expect(rest.at(-1)).toMatchObject({ event: "end", data: { status: "completed" } });
      const all = [...firstPart, ...rest.slice(0, -1)];
      expect(all.map((e) => Number(e.id))).toEqual(all.map((_, i) => i));
      expect(all.filter((e) => e.data.type === "burst.tick").map((e) => e.data.data.n)).toEqual(Array.from({ length: 1500 }, (_, n) => n));
      expect(all.filter((e) => e.data.type === "events.gap" || e.data.type === "events.dropped")).toEqual([]);
      const polled = (await t.call("GET", `/api/training/events?job_id=${job.job_id}&limit=1000`, { auth: auth() })).body;
      const more = (
        await t.call("GET", `/api/training/events?job_id=${job.job_id}&since_index=${polled.next_index}&limit=1000`, { auth: auth() })
      ).body;
      expect(all.map((e) => e.data)).toEqual([...polled.events, ...more.events]);
      // Delivered whole: the attempt's outbox is gone.
      expect(existsSync(join(workDir, "outbox", `${job.job_id}.attempt-1.jsonl`))).toBe(false);
    },
  );

  it("streams over a WebSocket on the same path", async () => {
    const job = await submit("watched");
    const messages: any[] = [];
    const socket = new WebSocket(`${t.base.replace("http", "ws")}/api/training/events/stream?job_id=${job.job_id}`, {
      headers: { "x-api-key": admin.key },
    });
    await new Promise<void>((done, fail) => {
      socket.on("message", (data) => {
        const m = JSON.parse(String(data));
        messages.push(m);
        if (m.type === "end") done();
      });
      socket.on("error", fail);
      socket.on("close", () => done());
    });
    expect(messages.at(-1)).toEqual({ type: "end", status: "completed" });
    expect(messages.slice(0, -1).map((m) => m.index)).toEqual(messages.slice(0, -1).map((_, i) => i));
    expect(messages.map((m) => m.type).slice(0, 2)).toEqual(["dataset.missing", "training.started"]);
  });
});

describe("datasets on the box", () => {
  it("brings a job's datasets from R2 into the cache, reuses them by hash, and fetches a damaged file again", async () => {
    await env("faces", { "--trainer": "demo", "--num_processes": 0, "--max_train_steps": 2, "--demo_step_ms": 10 });
    const form = new FormData();
    form.set("target_path", "faces");
    form.append("files[]", new Blob(["png bytes"]), "a.png");
    form.append("files[]", new Blob(["a caption"]), "a.txt");
    expect((await fetch(`${t.base}/api/datasets/upload`, { method: "POST", headers: { "x-api-key": admin.key }, body: form })).status).toBe(
      201,
    );
    const ready = async () => {
      const job = await submit("faces");
      await until("the job to complete", async () => (await entry(job.job_id))?.status === "completed");
      const events = (await t.call("GET", `/api/training/events?job_id=${job.job_id}`, { auth: auth() })).body.events as any[];
      return { job, event: events.find((e) => e.type === "dataset.ready"), first: events[0] };
    };
    const cached = join(workDir, "cache", "datasets", "faces");
    const one = await ready();
    const jobDir = join(workDir, "jobs", one.job.job_id);
    const view = join(jobDir, "datasets", "0-faces");
    expect(one.event.data).toMatchObject({ path: "faces", localDir: cached, files: 2, downloaded: 2, reused: 0, view });
    expect(one.first.type).toBe("dataset.ready"); // before the trainer started
    expect(readFileSync(join(cached, "a.txt"), "utf8")).toBe("a caption");
    // The trainer reads its own view of the dataset: links into the cache, in its job directory.
    expect(readFileSync(join(view, "a.txt"), "utf8")).toBe("a caption");
    expect(readlinkSync(join(view, "a.txt"))).toBe(join(cached, "a.txt"));
    // The runner's files are in service/, where no trainer looks by itself (SimpleTuner loads config/config.json).
    expect(existsSync(join(jobDir, "config"))).toBe(false);
    const dataloader = JSON.parse(readFileSync(join(jobDir, "service", "multidatabackend.json"), "utf8"));
    expect(dataloader[0]).toMatchObject({ dataset_type: "image", instance_data_dir: view });
    const config = JSON.parse(readFileSync(join(jobDir, "service", "options.json"), "utf8"));
    expect(config["--data_backend_config"]).toBe(join(jobDir, "service", "multidatabackend.json"));
    expect((await ready()).event.data).toMatchObject({ downloaded: 0, reused: 2 });
    writeFileSync(join(cached, "a.png"), "damaged");
    expect((await ready()).event.data).toMatchObject({ downloaded: 1, reused: 1 });
    expect(readFileSync(join(cached, "a.png"), "utf8")).toBe("png bytes");
    // An environment whose dataset was never uploaded: reported, and the job still runs.
    await env("no-data", { "--trainer": "demo", "--num_processes": 0, "--max_train_steps": 1, "--demo_step_ms": 10 });
    const job = await submit("no-data");
    await until("the job to complete", async () => (await entry(job.job_id))?.status === "completed");
    const events = (await t.call("GET", `/api/training/events?job_id=${job.job_id}`, { auth: auth() })).body.events as any[];
    expect(events[0]).toMatchObject({ type: "dataset.missing", data: { path: "datasets/no-data" } });
  });
});

describe("datasets for a runner", () => {
  it("serves a dataset only for a job running on the asking worker, and only one its dataloader names", async () => {
    await env("named-set", { "--trainer": "demo", "--num_processes": 0, "--max_train_steps": 1 });
    for (const [target, name, body] of [
      ["named-set", "a.txt", "named caption"],
      ["private-set", "secret.txt", "someone else's data"],
    ]) {
      const form = new FormData();
      form.set("target_path", target!);
      form.append("files[]", new Blob([body!]), name!);
      expect(
        (await fetch(`${t.base}/api/datasets/upload`, { method: "POST", headers: { "x-api-key": admin.key }, body: form })).status,
      ).toBe(201);
    }
    // A worker with no runner behind it: the job assigned to it stays running while it asks.
    const probe = await t.call("POST", "/api/admin/workers", { json: { name: "dataset-probe" }, auth: auth() });
    const asProbe = { bearer: probe.body.token };
    await t.call("POST", "/api/workers/register", { json: { role: "remote", labels: { probe: "datasets" } }, auth: asProbe });
    const job = (
      await t.call("POST", "/api/queue/submit", {
        json: { config_name: "named-set", target: "worker", worker_labels: { probe: "datasets" } },
        auth: auth(),
      })
    ).body;
    expect(job).toMatchObject({ status: "running", worker_id: probe.body.id });
    const ask = (what: string, path: string, as = asProbe, jobId = job.job_id) =>
      t.call("GET", `/api/workers/datasets/${what}?job_id=${encodeURIComponent(jobId)}&path=${encodeURIComponent(path)}`, { auth: as });
    try {
      // What the job's dataloader names: served.
      expect((await ask("manifest", "datasets/named-set")).body).toMatchObject({ path: "named-set", files: [{ path: "a.txt", size: 13 }] });
      expect((await ask("file", "named-set/a.txt")).text).toBe("named caption");
      // Another dataset, for this very job: refused, nothing served.
      for (const [what, path] of [
        ["manifest", "private-set"],
        ["file", "private-set/secret.txt"],
        ["file", "datasets/private-set/secret.txt"],
      ]) {
        const refused = await ask(what!, path!);
        expect([refused.status, refused.body.code]).toEqual([403, "dataset_not_in_job"]);
        expect(refused.text).not.toContain("someone else's data");
      }
      expect((await ask("manifest", "private-set")).body.detail).toBe("private-set is not a dataset this job's dataloader names");
      // A path that climbs out of the named dataset is refused as a path.
      const climbing = await ask("file", "named-set/../private-set/secret.txt");
      expect([climbing.status, climbing.body.code]).toEqual([422, "invalid_path"]);
      // Another worker (this file's runner) asking for this job's dataset: not its job.
      for (const what of ["manifest", "file"]) {
        const other = await ask(what, what === "file" ? "named-set/a.txt" : "named-set", { bearer: token });
        expect([other.status, other.body.code, other.body.detail]).toEqual([
          404,
          "not_found",
          `Job ${job.job_id} is not running on this worker`,
        ]);
      }
      expect((await ask("manifest", "named-set", asProbe, "no-such-job")).status).toBe(404);
      expect((await t.call("GET", "/api/workers/datasets/manifest?path=named-set", { auth: asProbe })).status).toBe(422);
    } finally {
      await t.call("POST", "/api/training/cancel", { json: { job_id: job.job_id }, auth: auth() });
      await t.call("POST", "/api/workers/heartbeat", { json: { draining: true }, auth: asProbe });
    }
    // The job no longer runs there: nothing more for that worker.
    expect((await ask("file", "named-set/a.txt")).status).toBe(404);
  });
});

describe("outbound webhooks", () => {
  it("refuses a private receiver by default, then, allowed, signs each lifecycle message and retries a failed one", async () => {
    const received: { headers: Record<string, string>; body: string }[] = [];
    let failFirst = true;
    const receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        const parsed = JSON.parse(body) as { type: string };
        if (failFirst && parsed.type === "job.started") {
          failFirst = false;
          res.writeHead(503).end();
          return;
        }
        received.push({ headers: req.headers as Record<string, string>, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    try {
      const hooks = JSON.stringify([{ webhook_type: "raw", callback_url: url, log_level: "info", ssl_no_verify: false }]);
      await env("hooked", {
        "--trainer": "demo",
        "--num_processes": 0,
        "--max_train_steps": 3,
        "--demo_step_ms": 10,
        "--checkpointing_steps": 3,
        "--webhook_config": hooks,
        "--webhook_reporting_interval": 5, // the shortest an environment may be saved with (delivery clamps to it)
      });
      // Private targets are refused by default: at validation, and at delivery.
      const inline = {
        "--model_family": "demo",
        "--model_type": "full",
        "--pretrained_model_name_or_path": "none",
        "--output_dir": "output",
        "--data_backend_config": "d.json",
        "--max_train_steps": "3",
        "--webhook_config": hooks,
      };
      const check = await fetch(`${t.base}/api/training/validate`, {
        method: "POST",
        headers: { "x-api-key": admin.key, "content-type": "application/json" },
        body: JSON.stringify(inline),
      });
      expect((await check.json()).errors).toEqual([
        {
          field: "--webhook_config",
          message: `${url}: 127.0.0.1 is a loopback, private or reserved address; an admin can allow private targets (PUT /api/admin/webhooks)`,
        },
      ]);
      const refused = await submit("hooked");
      await until("the job to complete", async () => (await entry(refused.job_id))?.status === "completed");
      const refusedList = await until("the refusals", async () => {
        const d = (await t.call("GET", `/api/training/webhooks?job_id=${refused.job_id}`, { auth: auth() })).body.deliveries as any[];
        return d.length >= 3 && d.every((x) => x.status !== "pending") && d;
      });
      expect(new Set(refusedList.map((d: any) => d.status))).toEqual(new Set(["refused"]));
      expect(received).toEqual([]);

      // An admin allows private targets; the receiver verifies every signature with the service's secret.
      expect((await t.call("PUT", "/api/admin/webhooks", { json: { allow_private_targets: true }, auth: auth() })).status).toBe(200);
      const { signing_secret } = (await t.call("GET", "/api/admin/webhooks", { auth: auth() })).body;
      expect(signing_secret).toMatch(/^whsec_/);
      const job = await submit("hooked");
      await until("the job to complete", async () => (await entry(job.job_id))?.status === "completed");
      const list = await until(
        "every delivery, the retried one included",
        async () => {
          const d = (await t.call("GET", `/api/training/webhooks?job_id=${job.job_id}`, { auth: auth() })).body.deliveries as any[];
          return d.length > 0 && d.every((x) => x.status === "delivered") && d;
        },
        30_000,
      );
      expect(list.find((d: any) => d.type === "job.started")).toMatchObject({ status: "delivered", attempts: 2, last_error: null });
      const verifier = new Webhook(signing_secret);
      const messages = received.map((r) => verifier.verify(r.body, r.headers) as any).filter((m) => m.job_id === job.job_id);
      const types = messages.map((m) => m.type);
      expect(types).toEqual(expect.arrayContaining(["job.started", "job.progress", "job.checkpoint", "job.completed"]));
      expect(messages.find((m) => m.type === "job.completed")).toMatchObject({
        job_id: job.job_id,
        data: { status: "completed", last_progress: { step: 3, total_steps: 3 } },
      });
      expect(new Set(received.map((r) => r.headers["webhook-id"])).size).toBe(received.length);
      // A tampered body does not verify.
      expect(() => verifier.verify(received[0]!.body.replace("job", "jab"), received[0]!.headers)).toThrow();
    } finally {
      await t.call("PUT", "/api/admin/webhooks", { json: { allow_private_targets: false }, auth: auth() });
      receiver.close();
    }
  });
});

describe("scripts", () => {
  it("runs --post_checkpoint_script after each checkpoint and the external validation script, placeholders in argv, no shell", async () => {
    const echo = ECHO_ARGS;
    await env("scripted", {
      "--trainer": "demo",
      "--num_processes": 0,
      "--max_train_steps": 4,
      "--demo_step_ms": 10,
      "--checkpointing_steps": 2,
      "--validation_steps": 4,
      "--validation_prompt": "a cat; echo pwned $(whoami)",
      "--post_checkpoint_script": `${echo} {local_checkpoint_path} {global_step} {validation_prompt} {remote_checkpoint_path}`,
      "--validation_method": "external-script",
      "--validation_external_script": `${echo} validate {global_step} {model_family}`,
      "--model_family": "demo",
    });
    const job = await submit("scripted");
    await until("the job to complete", async () => (await entry(job.job_id))?.status === "completed");
    const events = (await t.call("GET", `/api/training/events?job_id=${job.job_id}`, { auth: auth() })).body.events as any[];
    const outputs = events.filter((e) => e.type === "script.output").map((e) => [e.data.script, JSON.parse(e.message)]);
    const out = join(workDir, "jobs", job.job_id, "output");
    expect(outputs).toEqual(
      expect.arrayContaining([
        ["post_checkpoint", [`${out}/checkpoint-2`, "2", "a cat; echo pwned $(whoami)", ""]],
        ["post_checkpoint", [`${out}/checkpoint-4`, "4", "a cat; echo pwned $(whoami)", ""]],
        ["validation", ["validate", "4", "demo"]],
      ]),
    );
    expect(events.filter((e) => e.type === "script.finished").map((e) => [e.data.script, e.data.exit_code])).toEqual(
      expect.arrayContaining([
        ["post_checkpoint", 0],
        ["post_checkpoint", 0],
        ["validation", 0],
      ]),
    );
    // The events all arrived before the job was reported completed: the last one is the trainer's or a script's.
    expect(events.map((e) => e.index)).toEqual(events.map((_, i) => i));
  });

  it.skipIf(!HAS_BWRAP)(
    "runs --post_upload_script once per upload.completed event, with the remote path, model_type and lora_type",
    async () => {
      const echo = ECHO_ARGS;
      // The last one names a path outside the job's directory: no script is given it.
      const uploader = `for (const step of [5, 10]) console.log(JSON.stringify({ type: "upload.completed", data: { step, local_path: "output/checkpoint-" + step, remote_path: "s3://bucket/run/checkpoint-" + step, provider: "s3" } }));
        console.log(JSON.stringify({ type: "upload.completed", data: { step: 11, local_path: "/etc/shadow", remote_path: "s3://bucket/x", provider: "s3" } }));`;
      await env("uploads", {
        "--num_processes": 0,
        "--trainer_command": JSON.stringify([process.execPath, "-e", uploader, "--"]),
        "--model_type": "lora",
        "--lora_type": "lycoris",
        "--post_upload_script": `${echo} {remote_checkpoint_path} {local_checkpoint_path} {global_step} {model_type} {lora_type}`,
      });
      const job = await submit("uploads");
      await until("the job to complete", async () => (await entry(job.job_id))?.status === "completed");
      const events = (await t.call("GET", `/api/training/events?job_id=${job.job_id}`, { auth: auth() })).body.events as any[];
      const runs = events.filter((e) => e.type === "script.output" && e.data.script === "post_upload").map((e) => JSON.parse(e.message));
      expect(runs).toEqual(
        expect.arrayContaining([
          ["s3://bucket/run/checkpoint-5", "output/checkpoint-5", "5", "lora", "lycoris"],
          ["s3://bucket/run/checkpoint-10", "output/checkpoint-10", "10", "lora", "lycoris"],
        ]),
      );
      expect(runs).toHaveLength(2);
      expect(events.find((e) => e.type === "script.refused")).toMatchObject({
        title: "post_upload script not run: the checkpoint path it would be given (/etc/shadow) is outside the job's directory",
      });
    },
  );

  it.skipIf(!HAS_BWRAP)(
    "hands the trainer the job's storage credentials, with which it uploads its result to the storage endpoint",
    async () => {
      // The trainer uploads with the stock AWS SDK (from this repository's node_modules), as a
      // Python trainer would with boto3, reading only the TRAINER_STORAGE_* variables.
      const trainer = `
      const aws = require("node:module").createRequire(${JSON.stringify(join(process.cwd(), "package.json"))})("@aws-sdk/client-s3");
      const e = process.env;
      const s3 = new aws.S3Client({ endpoint: e.TRAINER_STORAGE_ENDPOINT_URL, forcePathStyle: true, region: e.TRAINER_STORAGE_REGION, expectContinueHeader: false,
        credentials: { accessKeyId: e.TRAINER_STORAGE_ACCESS_KEY_ID, secretAccessKey: e.TRAINER_STORAGE_SECRET_ACCESS_KEY } });
      s3.send(new aws.PutObjectCommand({ Bucket: e.TRAINER_STORAGE_BUCKET, Key: "final/model.txt", Body: "weights of " + e.TRAINER_JOB_ID }))
        .then((r) => console.log(JSON.stringify({ type: "upload.completed", data: { etag: r.ETag, bucket: e.TRAINER_STORAGE_BUCKET } })), (err) => { console.error(String(err)); process.exit(4); });`;
      await env("uploads-results", { "--num_processes": 0, "--trainer_command": JSON.stringify([process.execPath, "-e", trainer, "--"]) });
      const job = await submit("uploads-results");
      await until("the job to complete", async () => (await entry(job.job_id))?.status === "completed");
      const events = (await t.call("GET", `/api/training/events?job_id=${job.job_id}`, { auth: auth() })).body.events as any[];
      expect(events.find((e) => e.type === "upload.completed")?.data).toMatchObject({ bucket: job.job_id });
      const stored = await t.call("GET", `/api/cloud/storage/${job.job_id}/final/model.txt`, { auth: auth() });
      expect([stored.status, stored.text]).toEqual([200, `weights of ${job.job_id}`]);
      expect(runnerOutput).not.toContain("TRAINER_STORAGE_SECRET_ACCESS_KEY");
    },
  );

  it("does not run a script the box does not declare: a script.refused event names it; the job goes on", async () => {
    await env("bad-scripts", {
      "--trainer": "demo",
      "--num_processes": 0,
      "--max_train_steps": 2,
      "--demo_step_ms": 10,
      "--checkpointing_steps": 1,
      "--post_checkpoint_script": "/no/such/program {global_step}",
    });
    const job = await submit("bad-scripts");
    await until("the job to complete", async () => (await entry(job.job_id))?.status === "completed");
    const events = (await t.call("GET", `/api/training/events?job_id=${job.job_id}`, { auth: auth() })).body.events as any[];
    const refused = events.filter((e) => e.type === "script.refused");
    expect(refused.map((e) => e.data)).toEqual([
      { script: "post_checkpoint", program: "/no/such/program" },
      { script: "post_checkpoint", program: "/no/such/program" },
    ]);
    expect(refused[0].title).toBe(
      "post_checkpoint script /no/such/program not run: this box's runner config does not declare it in scripts",
    );
    expect(events.some((e) => e.type === "script.finished" || e.type === "script.output")).toBe(false);
  });
});

describe("validate and start (training forms)", () => {
  const form = (fields: Record<string, string>) => {
    const f = new FormData();
    for (const [k, v] of Object.entries(fields)) f.set(k, v);
    return f;
  };
  const post = (path: string, fields: Record<string, string>) =>
    fetch(`${t.base}${path}`, { method: "POST", headers: { "x-api-key": admin.key }, body: form(fields) });
  const inline = {
    "--model_family": "demo",
    "--model_type": "full",
    "--pretrained_model_name_or_path": "none",
    "--output_dir": "output",
    "--data_backend_config": "config/multidatabackend.json",
    "--max_train_steps": "3",
    "--trainer": "demo",
    "--num_processes": "0",
    "--demo_step_ms": "10",
    __active_tab__: "model",
  };

  it("validates field by field: an inline run needs the six options; types, ranges and the epochs/steps rule", async () => {
    const empty = await (await post("/api/training/validate", { __active_tab__: "model" })).json();
    const me = (await t.call("GET", "/api/users/me", { auth: auth() })).body.id;
    expect(empty).toMatchObject({ valid: false, environment: `inline-run-${me}`, active_tab: "model" });
    expect(empty.errors.map((e: any) => e.field)).toEqual([
      "--model_family",
      "--model_type",
      "--pretrained_model_name_or_path",
      "--output_dir",
      "--data_backend_config",
      "--max_train_steps",
    ]);
    const ok = await (await post("/api/training/validate", inline)).json();
    expect(ok).toMatchObject({ valid: true, message: "Configuration Valid", errors: [] });
    expect(ok.options).toMatchObject({ "--max_train_steps": 3, "--num_train_epochs": 0, "--learning_rate": 0.0001, "--num_processes": 0 });
    const bad = await (
      await post("/api/training/validate", {
        ...inline,
        "--learning_rate": "fast",
        "--train_batch_size": "0",
        "--num_train_epochs": "2",
        "--validation_resolution": "big",
        "--output_dir": "../x",
        "--webhook_config": '[{"callback_url":"ftp://x"}]',
        colour: "red",
      })
    ).json();
    expect(bad.valid).toBe(false);
    expect(bad.message).toBe("9 problems found"); // the ftp receiver counts twice: its shape, and the SSRF guard; both of epochs and steps are named
    expect(bad.errors).toEqual(
      expect.arrayContaining([
        { field: "colour", message: 'not an option: option fields are named with their "--" prefix' },
        { field: "--learning_rate", message: 'must be a number, not "fast"' },
        { field: "--num_train_epochs", message: "set either --num_train_epochs or --max_train_steps; the other must be 0" },
        { field: "--max_train_steps", message: "set either --max_train_steps or --num_train_epochs; the other must be 0" },
        { field: "--train_batch_size", message: "must be at least 1" },
        { field: "--validation_resolution", message: "must look like 1024x1024 (or a comma-separated list)" },
        { field: "--output_dir", message: "must be a relative path without .. (it is resolved inside the job's directory)" },
        { field: "--webhook_config", message: "entry 0: callback_url must be an http(s) URL" },
      ]),
    );
  });

  it("starts an inline run: saved as the caller's own inline-run environment, queued through the Scheduler, runs to completion", async () => {
    const refused = await post("/api/training/start", { ...inline, "--max_train_steps": "-1" });
    expect(refused.status).toBe(422);
    expect((await refused.json()).errors).toEqual([
      { path: "form.--max_train_steps", message: "set --max_train_steps or --num_train_epochs (a positive number)" },
      { path: "form.--max_train_steps", message: "must not be negative" },
    ]);
    const inlineName = `inline-run-${(await t.call("GET", "/api/users/me", { auth: auth() })).body.id}`;
    expect((await t.call("GET", `/api/configs/${inlineName}`, { auth: auth() })).status).toBe(404);
    const started = await (await post("/api/training/start", inline)).json();
    expect(started).toMatchObject({ success: true, status: "running", environment: inlineName });
    await until(`the inline run to complete (${JSON.stringify(started)})`, async () => {
      const e = await entry(started.job_id);
      if (e?.status === "failed") throw new Error(e.error_message);
      return e?.status === "completed";
    });
    const saved = (await t.call("GET", `/api/configs/${inlineName}`, { auth: auth() })).body;
    expect(saved.config).toMatchObject({ "--max_train_steps": 3, "--num_train_epochs": 0, "--trainer": "demo", "--train_batch_size": 1 });
  });

  it("starts the form as the active environment's configuration, replacing its options", async () => {
    await env("active-demo", {
      "--trainer": "demo",
      "--num_processes": 0,
      "--max_train_steps": 1000,
      "--demo_step_ms": 10,
      "--learning_rate": 0.05,
      "--validation_prompt": "gone",
    });
    expect((await t.call("POST", "/api/configs/active-demo/activate", { auth: auth() })).status).toBe(200);
    const started = await (
      await post("/api/training/start", { ...inline, "--max_train_steps": "4", "--learning_rate": "0.05", __active_tab__: "training" })
    ).json();
    expect(started).toMatchObject({ status: "running", environment: "active-demo" });
    await until("the run to complete", async () => (await entry(started.job_id))?.status === "completed");
    const events = (await t.call("GET", `/api/training/events?job_id=${started.job_id}`, { auth: auth() })).body.events as any[];
    expect(events.find((e) => e.type === "training.started").data.total_steps).toBe(4);
    const saved = (await t.call("GET", "/api/configs/active-demo", { auth: auth() })).body.config;
    expect(saved).toMatchObject({ "--max_train_steps": 4, "--learning_rate": 0.05, "--num_train_epochs": 0, "--seed": 42 });
    expect(saved["--validation_prompt"]).toBeUndefined();
    expect(
      (
        await fetch(`${t.base}/api/training/start`, {
          method: "POST",
          headers: { "x-api-key": admin.key, "content-type": "text/plain" },
          body: "x",
        })
      ).status,
    ).toBe(415);
  });
});

describe("training control", () => {
  it("runs a validation and a checkpoint on request, reports status and checkpoints, and stops gracefully", async () => {
    await env("controlled", {
      "--trainer": "demo",
      "--num_processes": 1,
      "--max_train_steps": 100000,
      "--demo_step_ms": 40,
      "--checkpointing_steps": 0,
    });
    const job = await submit("controlled");
    const events = async () => (await t.call("GET", `/api/training/events?job_id=${job.job_id}`, { auth: auth() })).body.events as any[];
    await until("steps", async () => (await events()).some((e) => e.type === "training.progress"));
    const status = (await t.call("GET", `/api/training/status?job_id=${job.job_id}`, { auth: auth() })).body;
    expect(status).toMatchObject({
      state: "running",
      job_id: job.job_id,
      status: "running",
      startup_stage: "training",
      allocated_gpus: [0],
      attempt: 1,
    });
    expect(status.progress.step).toBeGreaterThan(0);
    const validation = await t.call("POST", "/api/training/validation/run", { json: { job_id: job.job_id }, auth: auth() });
    expect(validation.body).toMatchObject({ success: true, job_id: job.job_id });
    // A form works too, as curl -F and HTML forms send it.
    const form = new FormData();
    form.set("job_id", job.job_id);
    const checkpoint = await fetch(`${t.base}/api/training/checkpoint/run`, {
      method: "POST",
      headers: { "x-api-key": admin.key },
      body: form,
    });
    expect(checkpoint.status).toBe(200);
    const saved = await until("the requested checkpoint", async () => (await events()).find((e) => e.type === "checkpoint.saved"));
    expect(saved.data.on_demand).toBe(true);
    await until("the requested validation", async () =>
      (await events()).some((e) => e.type === "validation.completed" && e.data.on_demand),
    );
    const listed = (await t.call("POST", "/api/training/checkpoints", { json: { job_id: job.job_id }, auth: auth() })).body;
    expect(listed).toEqual({
      job_id: job.job_id,
      checkpoints: [{ name: `checkpoint-${saved.data.step}`, path: saved.data.path, step: saved.data.step, saved_at: expect.any(String) }],
    });
    // The list is the output directory as the runner sees it: a checkpoint deleted on the box is gone.
    rmSync(saved.data.path, { recursive: true });
    // A stop keeps the work: a checkpoint is asked for and saved, then the trainer is interrupted.
    expect((await t.call("POST", "/api/training/stop", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    await until("the job to end", async () => (await entry(job.job_id))?.status === "completed");
    const all = await events();
    const requested = all.findIndex((e) => e.type === "training.stop_requested");
    expect(all[requested].data).toMatchObject({ checkpoint: true });
    const kept = all.slice(requested).find((e) => e.type === "checkpoint.saved");
    expect(kept.data).toMatchObject({ on_demand: true });
    expect(all.findIndex((e) => e.type === "training.stopping")).toBeGreaterThan(all.indexOf(kept));
    expect((await t.call("POST", "/api/training/checkpoints", { json: { job_id: job.job_id }, auth: auth() })).body.checkpoints).toEqual([
      { name: `checkpoint-${kept.data.step}`, path: kept.data.path, step: kept.data.step, saved_at: expect.any(String) },
    ]);
    // The demo trainer stops as SimpleTuner does on KeyboardInterrupt: an interrupted status, exit 0.
    expect(all.find((e) => e.type === "training.status")).toMatchObject({ data: { status: "interrupted", signal: "SIGINT" } });
    // Nothing running any more: 400 no_active_job.
    const none = await t.call("POST", "/api/training/validation/run", { auth: auth() });
    expect(none.status).toBe(400);
    expect(none.body).toMatchObject({ code: "no_active_job" });
    expect((await t.call("POST", "/api/training/checkpoint/run", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(409);
  });

  it("cancels a running local job at once; pending local jobs then wait for POST /api/queue/process", async () => {
    await env("hog", { "--trainer": "demo", "--num_processes": 2, "--max_train_steps": 100000, "--demo_step_ms": 40 });
    const running = await submit("hog");
    expect(running.status).toBe("running");
    const waiting = await submit("demo-1");
    expect(waiting.status).toBe("queued");
    await until("the trainer to start", async () => runnerOutput.includes(`job ${running.job_id} started`));
    expect((await t.call("POST", "/api/training/cancel", { auth: auth() })).status).toBe(422);
    const cancelled = await t.call("POST", "/api/training/cancel", { json: { job_id: running.job_id }, auth: auth() });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.message).toContain("Pending local jobs wait for POST /api/queue/process");
    expect((await entry(running.job_id)).status).toBe("cancelled");
    await until("the trainer to be stopped", async () => runnerOutput.includes(`job ${running.job_id} ended`));
    const held = await entry(waiting.job_id);
    expect(held).toMatchObject({ status: "pending", wait_reason: "local_paused" });
    const status = (await t.call("GET", "/api/system/status?include_allocation=true", { auth: auth() })).body;
    expect(status.gpu_allocation.available_gpus).toEqual([0, 1]);
    expect((await t.call("POST", "/api/queue/process", { auth: auth() })).status).toBe(200);
    await until("the waiting job to run", async () => (await entry(waiting.job_id))?.status !== "pending");
    // A waiting job is cancelled through the same endpoint, with a form.
    const later = await submit("hog");
    await until("it to run", async () => (await entry(later.job_id))?.status === "running");
    const pend = await submit("hog");
    expect(pend.status).toBe("queued");
    const body = new URLSearchParams({ job_id: pend.job_id });
    const r = await fetch(`${t.base}/api/training/cancel`, {
      method: "POST",
      headers: { "x-api-key": admin.key, "content-type": "application/x-www-form-urlencoded" },
      body,
    });
    expect(r.status).toBe(200);
    expect((await entry(pend.job_id)).status).toBe("cancelled");
    await t.call("POST", "/api/training/cancel", { json: { job_id: later.job_id }, auth: auth() });
    await t.call("POST", "/api/queue/process", { auth: auth() });
    await until(
      "the GPUs to be free",
      async () =>
        (await t.call("GET", "/api/system/status?include_allocation=true", { auth: auth() })).body.gpu_allocation.running_local_jobs === 0,
    );
  });
});

describe("a runner killed mid-job", () => {
  it("never leaves the job running: restarted, it puts the job back in the queue and runs it again, and fails it after max_attempts", async () => {
    await env("long", {
      "--trainer": "demo",
      "--num_processes": 1,
      "--max_train_steps": 10000,
      "--demo_step_ms": 50,
      "--checkpointing_steps": 5,
      "--resume_from_checkpoint": "latest",
    });
    const job = await submit("long");
    expect(job.status).toBe("running");
    const log = join(workDir, "jobs", job.job_id, "output.log");
    const read = () => (existsSync(log) ? readFileSync(log, "utf8") : "");
    await until("a checkpoint", async () => read().includes('"type":"checkpoint.saved"'));
    runner.kill("SIGKILL");
    await new Promise((r) => runner.once("exit", r));
    expect((await entry(job.job_id)).status).toBe("running"); // nobody has said otherwise yet
    const before = runnerOutput.split(`job ${job.job_id} started`).length;
    startRunner();
    const again = await until("the job to run again", async () => {
      const e = await entry(job.job_id);
      return e?.status === "running" && e.attempt === 2 && runnerOutput.split(`job ${job.job_id} started`).length > before && e;
    });
    expect(again.error_message).toBe("the runner restarted while the job was running (attempt 1); retrying (attempt 2 of 3)");
    // The demo trainer resumes from its last checkpoint in the same job directory.
    await until("the resumed run", async () => /"resumed_from_step":[1-9]/.test(read()));
    // Killed again during attempt 2, then during attempt 3 (max_attempts): the job fails.
    for (const attempt of [2, 3]) {
      await until(
        `attempt ${attempt} to be under way`,
        async () =>
          (await entry(job.job_id))?.attempt === attempt && runnerOutput.split(`job ${job.job_id} started`).length > before + attempt - 2,
      );
      runner.kill("SIGKILL");
      await new Promise((r) => runner.once("exit", r));
      startRunner();
    }
    const failed = await until("the job to fail for good", async () => {
      const e = await entry(job.job_id);
      return e?.status === "failed" && e;
    });
    expect(failed).toMatchObject({
      attempt: 3,
      error_message: "the runner restarted while the job was running (attempt 3); no retries left",
    });
    const next = await submit("demo-1");
    expect(next.status).toBe("running");
    await until("the next job to complete", async () => (await entry(next.job_id))?.status === "completed");
  });
});

describe("a remote worker started as npm run runner starts it", () => {
  it("builds to plain JavaScript, registers with labels, and runs a job sent to it by label glob", async () => {
    execFileSync(process.execPath, ["runner/agent/build.mjs"]);
    const created = await t.call("POST", "/api/admin/workers", { json: { name: "remote-a100" }, auth: auth() });
    const remoteDir = mkdtempSync(join(tmpdir(), "runner-remote-"));
    let output = "";
    const remote = spawn(
      process.execPath,
      [
        ".build/runner/main.mjs",
        "start",
        "--url",
        t.base,
        "--label",
        "gpu=a100-80gb",
        "--label",
        "zone=eu",
        "--work-dir",
        remoteDir,
        "--poll-ms",
        "60000",
      ],
      {
        env: {
          ...process.env,
          RUNNER_TOKEN: created.body.token,
          PATH: `${resolve("test/fakes")}:${process.env.PATH}`,
          FAKE_NVIDIA_GPUS: "1",
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    endWhenDone(remote);
    remote.stdout!.on("data", (d: Buffer) => (output += d.toString()));
    remote.stderr!.on("data", (d: Buffer) => (output += d.toString()));
    try {
      await until("the remote worker to register", async () => output.includes("registered as worker"));
      expect(output).toContain("(remote) with 1 GPU(s)");
      const job = (
        await t.call("POST", "/api/queue/submit", {
          json: { config_name: "demo-1", target: "worker", worker_labels: { gpu: "a100*" } },
          auth: auth(),
        })
      ).body;
      expect(job).toMatchObject({ status: "running", worker_id: created.body.id });
      await until("the job to complete", async () => (await entry(job.job_id))?.status === "completed");
      // The built runner launched the built demo trainer (plain node, no TypeScript loader).
      const log = readFileSync(join(remoteDir, "jobs", job.job_id, "output.log"), "utf8");
      expect(log).toContain('"type":"training.completed"');
      const events = (await t.call("GET", `/api/training/events?job_id=${job.job_id}`, { auth: auth() })).body.events as any[];
      // The whole worker is the job's: its first num_processes devices.
      expect(events.find((e) => e.type === "training.started")).toMatchObject({ data: { cuda_visible_devices: "0" } });
    } finally {
      remote.kill("SIGTERM");
      await new Promise((r) => remote.once("exit", r));
      rmSync(remoteDir, { recursive: true, force: true });
    }
  });
});

describe("runner pieces", () => {
  it("reads nvidia-smi's CSV and refuses a line it cannot read", () => {
    expect(parseGpuCsv("0, GPU-a, NVIDIA H100 80GB HBM3, 81559\n1, GPU-b, NVIDIA H100 80GB HBM3, 81559\n")).toEqual([
      { index: 0, uuid: "GPU-a", name: "NVIDIA H100 80GB HBM3", memory_mb: 81559 },
      { index: 1, uuid: "GPU-b", name: "NVIDIA H100 80GB HBM3", memory_mb: 81559 },
    ]);
    expect(parseGpuCsv("")).toEqual([]);
    expect(() => parseGpuCsv("No devices were found")).toThrow("nvidia-smi printed a line this runner cannot read");
  });

  it("keeps --output_dir inside the job's directory and passes options as argv, never a shell string", () => {
    const job = { job_id: "local-1", config_name: "x", dataloader: [], allocated_gpus: [2, 3], num_processes: 2, attempt: 1 };
    const launch = planLaunch("/w", {
      ...job,
      config: {
        "--trainer": "demo",
        "--max_train_steps": 5,
        "--validation_prompt": "a cat; rm -rf /",
        "--validation_preview": true,
        "--push_checkpoints_to_hub": false,
      },
    });
    expect(launch.env).toMatchObject({
      CUDA_VISIBLE_DEVICES: "2,3",
      TRAINER_JOB_ID: "local-1",
      SIMPLETUNER_ACCELERATE_SIGNAL_FILE: "/w/jobs/local-1/trainer-signal-attempt-1.json",
      TRAINER_OUTPUT_DIR: "/w/jobs/local-1/output",
    });
    expect(launch.argv.slice(-8)).toEqual([
      "--max_train_steps",
      "5",
      "--validation_prompt",
      "a cat; rm -rf /",
      "--validation_preview",
      "true",
      "--output_dir",
      "/w/jobs/local-1/output",
    ]);
    expect(
      planLaunch("/w", { ...job, allocated_gpus: null, num_processes: 2, config: { "--trainer": "demo" } }, [0, 1, 2, 3]).env
        .CUDA_VISIBLE_DEVICES,
    ).toBe("0,1");
    for (const bad of ["../elsewhere", "/etc", "out/../../x"]) {
      expect(() => planLaunch("/w", { ...job, config: { "--trainer": "demo", "--output_dir": bad } })).toThrow(
        "--output_dir must be a path inside the job's directory",
      );
    }
    expect(planLaunch("/w", { ...job, config: { "--trainer": "demo", "--output_dir": "runs/a" } }).env.TRAINER_OUTPUT_DIR).toBe(
      "/w/jobs/local-1/runs/a",
    );
    // Raw commands only on a box that allows them (and sandboxes them, or has the sandbox off).
    const raw = { ...PLAIN_BOX, allowRawCommands: true, sandbox: "off" as const };
    expect(() => planLaunch("/w", { ...job, config: { "--trainer_command": "python train.py" } }, [], null, raw)).toThrow(
      "--trainer_command must be a JSON array of strings",
    );
    expect(
      planLaunch(
        "/w",
        { ...job, config: { "--trainer_command": JSON.stringify([process.execPath, "train.js"]), "--seed": 1 } },
        [],
        null,
        raw,
      ).argv,
    ).toEqual([process.execPath, "train.js", "--seed", "1", "--output_dir", "/w/jobs/local-1/output"]);
    expect(() => planLaunch("/w", { ...job, config: { "--trainer_command": JSON.stringify([process.execPath, "train.js"]) } })).toThrow(
      "--trainer_command is not run on this box: its runner config does not set allow_raw_commands; pick one of its trainers with --trainer (simpletuner, demo)",
    );
    expect(() =>
      planLaunch("/w", { ...job, config: { "--trainer": "sd3" } }, [], null, { ...PLAIN_BOX, trainers: { flux: ["flux-train"] } }),
    ).toThrow('unknown trainer "sd3": this box has simpletuner, demo, flux');
    // The default trainer is SimpleTuner; a box without its installation says so (the Scheduler gives it no such job).
    expect(() => planLaunch("/w", { ...job, config: {} })).toThrow(
      'SimpleTuner is not available on this box (not installed on this box: its runner config names no "simpletuner" installation); name its installation in the runner config ("simpletuner"), or set "--trainer": "demo" in the environment',
    );
    expect(() => planLaunch("/w", { ...job, config: { "--trainer_command": '["/no/such/trainer"]' } }, [], null, raw)).toThrow(
      "/no/such/trainer is not installed on this box (not found on PATH)",
    );
  });
});
