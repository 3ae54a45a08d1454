// SimpleTuner through the service: real runners (`runner start`, as an operator starts one on a
// GPU box) against the real stack, their runner config naming a SimpleTuner installation - a
// real Python virtual environment whose `simpletuner` package is the stand-in of
// test/fakes/simpletuner/ (written from SimpleTuner 4.8.0's source and from recordings of real
// runs) under a stand-in of `accelerate launch`. Recorded real runs are replayed through it
// (test/fixtures/simpletuner/); live runs train, take commands through the signal file, stop,
// fail and get cancelled as train.py does. Boxes: sandboxed by bubblewrap where it is installed,
// one with the sandbox off, and one without SimpleTuner.
import { type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { PNG } from "pngjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findProgram } from "../../runner/agent/sandbox";
import { spawnRunner, startRemoteRunner, stopRunners, type RunnerProcess } from "../helpers/runner-process";
import { fakeSimpleTuner, removeFakeSimpleTuners } from "../helpers/simpletuner";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until as waitUntil } from "../helpers/wait";
import { prerequisite } from "../helpers/prerequisites";

const HAS_BWRAP = prerequisite("bubblewrap (bwrap)", findProgram("bwrap", process.env.PATH ?? "") !== null);
const ECHO_ARGS = resolve("test/fakes/echo-args");
const dirs: string[] = [];
const temp = (name: string) => {
  const dir = mkdtempSync(join(tmpdir(), `simpletuner-${name}-`));
  dirs.push(dir);
  return dir;
};

/** A PNG of `size` x `size` pixels of one colour (what a dataset holds). */
function png(size: number, rgb: [number, number, number]): Buffer {
  const image = new PNG({ width: size, height: size });
  for (let i = 0; i < size * size; i++) image.data.set([...rgb, 255], i * 4);
  return PNG.sync.write(image);
}

/** Eight small pictures with captions, as a user uploads a dataset. */
const pictures: Record<string, Buffer | string> = {};
for (let i = 0; i < 8; i++) {
  pictures[`img${i}.png`] = png(64, [i * 30, 100, 200 - i * 20]);
  pictures[`img${i}.txt`] = `a picture number ${i}`;
}

/** Host processes whose command line holds `text` in one of its words. */
const processesWith = (text: string) =>
  readdirSync("/proc")
    .filter((p) => /^\d+$/.test(p) && Number(p) !== process.pid)
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, "utf8")
          .split("\0")
          .some((word) => word.includes(text));
      } catch {
        return false;
      }
    });

describe("SimpleTuner through the service", () => {
  let t: TestStack;
  let admin: { key: string; cookie: string };
  let venv: string;
  const runners: (RunnerProcess & { name: string })[] = [];
  const workDirs: Record<string, string> = {};
  const auth = () => ({ key: admin.key });
  // The boxes with SimpleTuner: sandboxed where bubblewrap is installed, and one with the sandbox off.
  const boxes = HAS_BWRAP ? ["sandboxed", "plain"] : ["plain"];
  const main = boxes[0]!;
  const received: { type: string; job_id: string; data: any }[] = [];
  let receiver: Server;
  let receiverUrl: string;

  const until = <T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 30_000) =>
    waitUntil(what, probe, { timeoutMs, context: () => `runners:\n${runners.map((r) => `${r.name}: ${r.output}`).join("\n")}` });
  async function env(name: string, config: Record<string, unknown>) {
    expect((await t.call("POST", "/api/configs/environments", { json: { name }, auth: auth() })).status).toBe(201);
    expect((await t.call("PUT", `/api/configs/${name}`, { json: { config }, auth: auth() })).status).toBe(200);
  }
  const submit = async (config_name: string, box: string) =>
    (await t.call("POST", "/api/queue/submit", { json: { config_name, target: "worker", worker_labels: { box } }, auth: auth() })).body;
  const entry = async (jobId: string) =>
    ((await t.call("GET", "/api/queue?include_completed=true&limit=1000", { auth: auth() })).body.jobs as any[]).find(
      (j) => j.job_id === jobId,
    );
  const events = async (jobId: string) =>
    (await t.call("GET", `/api/training/events?job_id=${jobId}&limit=1000`, { auth: auth() })).body.events as any[];
  const ended = (jobId: string) =>
    until(`job ${jobId} to end`, async () => {
      const e = await entry(jobId);
      return ["completed", "failed", "cancelled"].includes(e?.status) && e;
    });
  const output = (box: string) => runners.find((r) => r.name === box)!.output;
  /** An environment with the starter dataloader, its dataset (datasets/<name>) uploaded: eight pictures with captions. */
  async function envWithData(name: string, config: Record<string, unknown>) {
    await env(name, config);
    await upload(name, pictures);
  }
  async function upload(target: string, files: Record<string, Buffer | string>) {
    const form = new FormData();
    form.set("target_path", target);
    for (const [name, body] of Object.entries(files))
      form.append("files[]", new Blob([typeof body === "string" ? body : new Uint8Array(body)]), name);
    expect((await fetch(`${t.base}/api/datasets/upload`, { method: "POST", headers: { "x-api-key": admin.key }, body: form })).status).toBe(
      201,
    );
  }

  beforeAll(async () => {
    t = await startTestStack();
    admin = await setUpAdmin(t);
    venv = fakeSimpleTuner();
    const host = temp("host");
    for (const name of [...boxes, "bare"]) {
      const work = join(host, name);
      mkdirSync(work);
      workDirs[name] = work;
      const config = {
        ...(name === "bare" ? {} : { simpletuner: venv }),
        trainers: {
          standin_direct: ["python3", join(venv, "lib", readdirSync(join(venv, "lib"))[0]!, "site-packages", "simpletuner", "train.py")],
        },
        scripts: [ECHO_ARGS],
        allow_raw_commands: true,
        sandbox: name === "sandboxed" ? "required" : "off",
        work_dir: work,
        hide: [t.dataDir],
      };
      runners.push(await startRemoteRunner(t, auth(), name, config, host));
    }
    await until("the runners to register", async () => runners.every((r) => r.output.includes("registered as worker")));
    // Lifecycle webhooks go to a receiver on this machine.
    receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        received.push(JSON.parse(body));
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    expect((await t.call("PUT", "/api/admin/webhooks", { json: { allow_private_targets: true }, auth: auth() })).status).toBe(200);
  }, 120_000);
  afterAll(async () => {
    await stopRunners(runners);
    await t?.stop();
    receiver?.close();
    removeFakeSimpleTuners();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("each box says whether it runs SimpleTuner, and a job that needs it waits for a box that does, saying why", async () => {
    const workers = (await t.call("GET", "/api/admin/workers", { auth: auth() })).body.workers as any[];
    const box = (name: string) => workers.find((w) => w.name === `box-${name}`);
    expect(box(main).trainers).toEqual([
      { name: "simpletuner", available: true, version: "4.8.0" },
      { name: "demo", available: true },
      { name: "standin_direct", available: true },
    ]);
    expect(box("bare").trainers[0]).toEqual({
      name: "simpletuner",
      available: false,
      detail: 'not installed on this box: its runner config names no "simpletuner" installation',
    });
    expect(output(main)).toMatch(/SimpleTuner 4\.8\.0: .*\/site-packages\/simpletuner\/train\.py/);
    // Checking it imported SimpleTuner, which writes debug.log where it runs: not in the runner's own folder.
    expect(existsSync("debug.log")).toBe(false);
    // Any logged-in user sees it in the system view too.
    const system = (await t.call("GET", "/api/system/workers", { auth: auth() })).body.workers as any[];
    expect(system.find((w) => w.name === "box-bare").trainers[0]).toMatchObject({ name: "simpletuner", available: false });

    await env("needs-st", { "--num_processes": 0, "--max_train_steps": 2 });
    const waiting = await submit("needs-st", "bare");
    expect(waiting).toMatchObject({ status: "queued", wait_reason: "trainer_unavailable" });
    const listed = await entry(waiting.job_id);
    expect(listed.wait_message).toBe(
      'no online worker with labels {"box":"bare"} and at least 0 GPU(s) can run trainer "simpletuner" (GET /api/system/workers says why)',
    );
    // The bare box never saw it; the demo trainer runs there as before.
    await new Promise((r) => setTimeout(r, 500));
    expect(output("bare")).not.toContain(waiting.job_id);
    await env("demo-on-bare", { "--trainer": "demo", "--num_processes": 0, "--max_train_steps": 2, "--demo_step_ms": 10 });
    expect((await ended((await submit("demo-on-bare", "bare")).job_id)).status).toBe("completed");
    expect((await t.call("POST", "/api/training/cancel", { json: { job_id: waiting.job_id }, auth: auth() })).status).toBe(200);
    // Not now and never: asked not to wait, it is refused with the reason.
    const refused = await t.call("POST", "/api/queue/submit", {
      json: { config_name: "needs-st", target: "worker", worker_labels: { box: "bare" }, no_wait: true },
      auth: auth(),
    });
    expect(refused.body).toMatchObject({ status: "rejected", wait_reason: "trainer_unavailable" });
  });

  it("replays a recorded real run: progress, checkpoints, validation images, the end, and every lifecycle webhook, as for the demo trainer", async () => {
    await envWithData("tiny", {
      "--num_processes": 0,
      "--standin_replay": "lora-run",
      "--webhook_config": JSON.stringify([{ webhook_type: "raw", callback_url: receiverUrl }]),
      "--webhook_reporting_interval": 5, // the shortest an environment may be saved with (delivery clamps to it)
    });
    const job = await submit("tiny", main);
    const finished = await ended(job.job_id);
    expect(finished.status).toBe("completed");
    const all = await events(job.job_id);
    const out = join(workDirs[main]!, "jobs", job.job_id, "output");
    expect(all.filter((e) => e.type === "training.started")).toEqual([
      expect.objectContaining({ data: { total_steps: 8, resumed_from_step: 0, epochs: 1 } }),
    ]);
    const progress = all.filter((e) => e.type === "training.progress");
    expect(progress.map((e) => e.data.step)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(progress[0].data).toMatchObject({ step: 1, total_steps: 8, loss: 1.2108274698257446, learning_rate: 0.0001, epoch: 1 });
    expect(all.filter((e) => e.type === "checkpoint.saved").map((e) => e.data)).toEqual([
      { step: 4, path: join(out, "checkpoint-4"), is_final: false },
      { step: 8, path: join(out, "checkpoint-8"), is_final: false },
    ]);
    const images = all.filter((e) => e.type === "validation.image");
    expect(images.map((e) => e.data.prompt)).toEqual(["unconditional", "validation"]);
    for (const image of images) expect(image.images[0].src).toMatch(/^data:image\/png;base64,iVBORw0KGgo/);
    expect(all.filter((e) => e.type.startsWith("validation.") && e.type !== "validation.image").map((e) => e.type)).toEqual([
      "validation.started",
      "validation.completed",
      "validation.started",
      "validation.completed",
    ]);
    expect(all.some((e) => e.type === "training.completed")).toBe(true);
    // One copy of each log line: the printed one, with its level; the posted log.message records are not stored.
    expect(all.filter((e) => e.type === "log.message")).toEqual([]);
    const alignment = all.filter((e) => JSON.stringify(e).includes("requires an alignment value of 64px"));
    expect(alignment).toEqual([expect.objectContaining({ type: "log", level: "warning" })]);
    // What the status and checkpoints endpoints say.
    const status = (await t.call("GET", `/api/training/status?job_id=${job.job_id}`, { auth: auth() })).body;
    expect(status).toMatchObject({ status: "completed", progress: { step: 8, total_steps: 8, loss: 0.9087712168693542, epoch: 1 } });
    const checkpoints = (await t.call("POST", "/api/training/checkpoints", { json: { job_id: job.job_id }, auth: auth() })).body
      .checkpoints;
    expect(checkpoints.map((c: any) => c.name)).toEqual(["checkpoint-4", "checkpoint-8"]);
    // Every lifecycle webhook the demo trainer's run sends, signed and delivered by the edge.
    const types = await until("the lifecycle webhooks", async () => {
      const mine = received.filter((m) => m.job_id === job.job_id).map((m) => m.type);
      return mine.includes("job.completed") && mine;
    });
    expect(new Set(types)).toEqual(new Set(["job.started", "job.progress", "job.checkpoint", "job.validation", "job.completed"]));
    expect(received.find((m) => m.job_id === job.job_id && m.type === "job.checkpoint")!.data).toEqual({
      step: 4,
      path: join(out, "checkpoint-4"),
    });
    // The user's receiver hears only the edge's signed lifecycle messages, never SimpleTuner's own raw bodies.
    expect(received.filter((m) => !m.type.startsWith("job."))).toEqual([]);
  });

  it("a failing run (its 1,241-character lines, its traceback) ends failed once, with the trainer's error and traceback as the reason", async () => {
    // A long option makes accelerate's CalledProcessError line as long as the recorded one.
    await envWithData("broken", { "--num_processes": 0, "--standin_replay": "failed-run", "--validation_prompt": "a ".repeat(400) });
    const job = await submit("broken", main);
    const finished = await ended(job.job_id);
    expect(finished).toMatchObject({ status: "failed", attempt: 1 });
    expect(finished.error_message).toMatch(
      /^Training failed: OSError: \[Errno 30\] Read-only file system: '.*\.tmp-2ffr1nhu'\nlast lines:\n/,
    );
    expect(finished.error_message).toContain("OSError: [Errno 30] Read-only file system");
    expect(finished.error_message.split("\n").at(-1)).toMatch(/^OSError: \[Errno 30\]/);
    // accelerate's line naming the whole command line was printed, and the report still fitted.
    const log = readFileSync(join(workDirs[main]!, "jobs", job.job_id, "output.log"), "utf8");
    const longest = Math.max(...log.split(/\r?\n/).map((l) => l.length));
    expect(longest).toBeGreaterThan(1241);
    expect(output(main)).not.toContain("did not take the report");
    // Launched once: a job that ended on the box is never started again in its attempt.
    await new Promise((r) => setTimeout(r, 1000));
    expect(output(main).split(`job ${job.job_id} started`).length - 1).toBe(1);
    const all = await events(job.job_id);
    expect(all.find((e) => e.type === "training.error")).toMatchObject({ title: "Training failed: OSError", level: "error" });
    expect(all.filter((e) => e.type === "training.status").map((e) => e.data.status)).toEqual(["failed"]);
  });

  it("a report the edge refuses is never dropped: a shorter one follows, then a failure naming the refusal; the job ends and is not run again", async () => {
    // The runner reaches the edge through a proxy that refuses a job's first end reports as the edge would a bad one.
    const refuse = new Map<string, number>();
    const target = new URL(t.base);
    const proxy = createServer((req, res) => {
      const finish = /^\/api\/workers\/jobs\/([^/]+)\/finish$/.exec(req.url ?? "");
      const left = finish ? (refuse.get(finish[1]!) ?? 0) : 0;
      if (finish && left > 0) {
        refuse.set(finish[1]!, left - 1);
        req.resume();
        res
          .writeHead(422, { "content-type": "application/json" })
          .end(JSON.stringify({ detail: `refused by the test (${left} left)`, code: "validation_error" }));
        return;
      }
      const upstream = request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
        (answer: IncomingMessage) => {
          res.writeHead(answer.statusCode!, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(upstream);
    });
    // The runner's wake-up channel is a WebSocket: passed through as it is.
    proxy.on("upgrade", (req, socket, head) => {
      const upstream = connect(Number(target.port), target.hostname, () => {
        upstream.write(
          `${req.method} ${req.url} HTTP/1.1\r\n${Object.entries(req.headers)
            .map(([k, v]) => `${k}: ${v}`)
            .join("\r\n")}\r\n\r\n`,
        );
        upstream.write(head);
        socket.pipe(upstream).pipe(socket);
      });
      socket.on("error", () => upstream.destroy());
      upstream.on("error", () => socket.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    const created = await t.call("POST", "/api/admin/workers", { json: { name: "box-refused" }, auth: auth() });
    const file = join(temp("refused"), "runner.json");
    writeFileSync(file, JSON.stringify({ allow_raw_commands: true, sandbox: "off", work_dir: temp("refused-work") }));
    const runner = Object.assign(
      spawnRunner(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, created.body.token, [
        "--config",
        file,
        "--label",
        "box=refused",
      ]),
      { name: "refused" },
    );
    runners.push(runner);
    try {
      await until("the runner behind the proxy", async () => runner.output.includes("registered as worker"));
      const failing = JSON.stringify([process.execPath, "-e", "console.log('x'.repeat(5000)); process.exit(3)", "--"]);
      await env("refused-twice", { "--num_processes": 0, "--trainer_command": failing });
      await env("refused-once", { "--num_processes": 0, "--trainer_command": failing });
      const twice = (
        await t.call("POST", "/api/queue/submit", {
          json: { config_name: "refused-twice", target: "worker", worker_labels: { box: "refused" } },
          auth: auth(),
        })
      ).body;
      refuse.set(twice.job_id, 2);
      const once = (
        await t.call("POST", "/api/queue/submit", {
          json: { config_name: "refused-once", target: "worker", worker_labels: { box: "refused" } },
          auth: auth(),
        })
      ).body;
      refuse.set(once.job_id, 1);
      const first = await ended(twice.job_id);
      expect(first).toMatchObject({ status: "failed", attempt: 1 });
      expect(first.error_message).toBe("the edge refused this job's end report: 422 refused by the test (1 left)");
      const second = await ended(once.job_id);
      expect(second).toMatchObject({ status: "failed", attempt: 1 });
      expect(second.error_message).toBe("the trainer exited with code 3 (its full report was refused: 422 refused by the test (1 left))");
      expect(refuse.get(twice.job_id)).toBe(0);
      // Each ran once: a job that ended on the box is reported, never started again in its attempt.
      await new Promise((r) => setTimeout(r, 1000));
      for (const job of [twice, once]) expect(runner.output.split(`job ${job.job_id} started`).length - 1).toBe(1);
    } finally {
      await stopRunners([runner]);
      runners.splice(runners.indexOf(runner), 1);
      proxy.close();
    }
  });

  it("on request, validates and saves a checkpoint after its next step; a stop saves one more, then interrupts it: completed, the checkpoint listed", async () => {
    await envWithData("steered", {
      "--num_processes": 0,
      "--max_train_steps": 100000,
      "--standin_step_seconds": 0.05,
      "--validation_prompt": "a red cat",
    });
    const job = await submit("steered", main);
    await until("training", async () => (await events(job.job_id)).some((e) => e.type === "training.progress"));
    for (const path of ["validation", "checkpoint"])
      expect((await t.call("POST", `/api/training/${path}/run`, { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    const asked = await until("the validation and the checkpoint", async () => {
      const all = await events(job.job_id);
      return all.some((e) => e.type === "validation.completed") && all.some((e) => e.type === "checkpoint.saved") && all;
    });
    expect(asked.filter((e) => e.type === "validation.image").map((e) => e.images[0].mime_type)).toEqual(["image/png", "image/png"]);
    const first = asked.find((e) => e.type === "checkpoint.saved");
    expect((await t.call("POST", "/api/training/stop", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    const finished = await ended(job.job_id);
    expect(finished.status).toBe("completed");
    const all = await events(job.job_id);
    const requested = all.findIndex((e) => e.type === "training.stop_requested");
    expect(all[requested].data).toEqual({ checkpoint: true, wait_seconds: 2 });
    const kept = all.slice(requested).find((e) => e.type === "checkpoint.saved");
    expect(kept.data.step).toBeGreaterThan(first.data.step);
    // Then SIGINT to train.py: it reports interrupted and exits 0, and so does accelerate: no escalation.
    const after = all.slice(all.indexOf(kept)).map((e) => e.type);
    expect(after).toContain("training.stopping");
    expect(all.filter((e) => e.type === "training.status").map((e) => e.data)).toEqual([
      { status: "interrupted", step: expect.any(Number) },
    ]);
    expect(all.some((e) => e.type === "training.stop_escalated")).toBe(false);
    expect(output(main)).toContain(`job ${job.job_id} ended: exit code 0`);
    const listed = (await t.call("POST", "/api/training/checkpoints", { json: { job_id: job.job_id }, auth: auth() })).body.checkpoints;
    expect(listed.map((c: any) => c.step)).toEqual([first.data.step, kept.data.step]);
  });

  it("a stop before training began stops it without waiting for a checkpoint", async () => {
    // Its start-up (loading models, caching embeddings) takes a while; the stop comes during it.
    await envWithData("early", { "--num_processes": 0, "--max_train_steps": 100000, "--standin_startup_seconds": 30 });
    const job = await submit("early", main);
    await until("its start-up", async () => (await events(job.job_id)).some((e) => e.type === "training.stage"));
    // What the status says meanwhile: the trainer is up, and in which phase of its start-up.
    expect((await t.call("GET", `/api/training/status?job_id=${job.job_id}`, { auth: auth() })).body).toMatchObject({
      startup_stage: "starting",
      startup_phase: "Configuring data backends... (this may take a while!)",
      progress: null,
    });
    expect((await t.call("POST", "/api/training/stop", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    const finished = await ended(job.job_id);
    const all = await events(job.job_id);
    expect(all.find((e) => e.type === "training.stop_requested").data).toEqual({ checkpoint: false, signal: "SIGTERM" });
    expect(all.some((e) => e.type === "training.progress")).toBe(false);
    expect(finished.status).toBe("completed");
  });

  it.each(boxes)("a cancel kills the whole tree at once, accelerate, train.py and its children (%s box)", async (box) => {
    const marker = `standin-cancel-${box}-${Date.now()}`;
    await envWithData(`cancelled-${box}`, {
      "--num_processes": 0,
      "--max_train_steps": 100000,
      "--standin_ignore_signals": true,
      "--standin_marker": marker,
    });
    const job = await submit(`cancelled-${box}`, box);
    await until("the stand-in's child", async () => (await events(job.job_id)).some((e) => e.type === "standin.child"));
    expect(processesWith(`${marker}:child`)).toHaveLength(1);
    expect(processesWith(job.job_id).length).toBeGreaterThanOrEqual(2); // accelerate and train.py name its output directory
    const cancelled = Date.now();
    expect((await t.call("POST", "/api/training/cancel", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    await until(
      "every process of the job to be gone",
      async () => processesWith(job.job_id).length === 0 && processesWith(marker).length === 0,
    );
    // No grace period: killed, not asked.
    expect(Date.now() - cancelled).toBeLessThan(1500);
    expect((await events(job.job_id)).some((e) => e.type === "standin.signal")).toBe(false);
  });

  it.each(boxes)("a stop of a trainer that ignores it: checkpoint, SIGINT, SIGTERM, then the whole tree killed (%s box)", async (box) => {
    const marker = `standin-stubborn-${box}-${Date.now()}`;
    await envWithData(`stubborn-${box}`, {
      "--trainer": "standin_direct",
      "--num_processes": 0,
      "--max_train_steps": 100000,
      "--standin_ignore_signals": true,
      "--standin_marker": marker,
    });
    const job = await submit(`stubborn-${box}`, box);
    await until("training", async () => (await events(job.job_id)).some((e) => e.type === "training.progress"));
    expect(processesWith(`${marker}:child`)).toHaveLength(1);
    expect((await t.call("POST", "/api/training/stop", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    const finished = await ended(job.job_id);
    expect(finished.status, JSON.stringify(finished)).toBe("completed");
    const steps = (await events(job.job_id))
      .filter((e) => e.type.startsWith("training.stop") || e.type === "standin.signal" || (e.type === "checkpoint.saved" && e.data.step))
      .map((e) => (e.type === "checkpoint.saved" ? e.type : `${e.type}:${e.data?.signal ?? e.data?.checkpoint}`));
    expect(steps).toEqual([
      "training.stop_requested:true",
      "checkpoint.saved",
      "training.stopping:SIGINT",
      "standin.signal:SIGINT",
      "training.stop_escalated:SIGTERM",
      "standin.signal:SIGTERM",
      "training.stop_escalated:SIGKILL",
    ]);
    expect(processesWith(`${marker}:child`)).toEqual([]);
  });

  it("runs the scripts SimpleTuner would run itself only under the box's rules: declared ones by the runner, others refused, none by SimpleTuner", async () => {
    await envWithData("scripted", {
      "--num_processes": 0,
      "--max_train_steps": 4,
      "--checkpoint_step_interval": 2,
      "--validation_prompt": "a red cat",
      "--validation_step_interval": 4,
      "--validation_method": "external-script",
      "--validation_external_script": `${ECHO_ARGS} validate {local_checkpoint_path} {global_step}`,
      "--post_checkpoint_script": `${ECHO_ARGS} checkpoint {local_checkpoint_path} {global_step}`,
      "--post_upload_script": "/usr/bin/env touch /tmp/should-never-exist",
    });
    const job = await submit("scripted", main);
    expect((await ended(job.job_id)).status).toBe("completed");
    const all = await events(job.job_id);
    const out = join(workDirs[main]!, "jobs", job.job_id, "output");
    const ran = all.filter((e) => e.type === "script.output").map((e) => JSON.parse(e.message));
    expect(ran).toEqual(
      expect.arrayContaining([
        ["checkpoint", join(out, "checkpoint-2"), "2"],
        ["checkpoint", join(out, "checkpoint-4"), "4"],
        ["validate", join(out, "checkpoint-4"), "4"],
      ]),
    );
    // The undeclared post-upload script is refused each time SimpleTuner would have run it.
    const refused = all.filter((e) => e.type === "script.refused");
    expect(refused.length).toBeGreaterThanOrEqual(3);
    expect(refused[0].data).toEqual({ script: "post_upload", program: "/usr/bin/env" });
    expect(existsSync("/tmp/should-never-exist")).toBe(false);
    // SimpleTuner got none of them: only the do-nothing validation script the runner gives it.
    const own = all.filter((e) => e.type === "log" && /Running (post_checkpoint|post_upload|validation_external)_script/.test(e.message));
    expect(own.map((e) => e.message.replace(/^.*Running /, ""))).toEqual([
      "validation_external_script: true",
      "validation_external_script: true",
    ]);
  });

  it("a live run trains on its own view of the dataset, writing SimpleTuner's metadata there and nowhere else, with progress and an expected end", async () => {
    await envWithData("live", {
      "--num_processes": 0,
      "--max_train_steps": 30,
      "--standin_step_seconds": 0.1,
      "--checkpoint_step_interval": 10,
    });
    const job = await submit("live", main);
    const running = await until("steps and an expected end", async () => {
      const s = (await t.call("GET", `/api/training/status?job_id=${job.job_id}`, { auth: auth() })).body;
      return s.progress?.step >= 5 && s.expected_end_at && s;
    });
    expect(running).toMatchObject({
      state: "running",
      startup_stage: "training",
      expected_end_method: "progress",
      progress: { total_steps: 30 },
    });
    expect(Date.parse(running.expected_end_at)).toBeGreaterThan(Date.now() - 1000);
    expect((await ended(job.job_id)).status).toBe("completed");
    const view = join(workDirs[main]!, "jobs", job.job_id, "datasets", "0-live");
    const cache = join(workDirs[main]!, "cache", "datasets", "live");
    expect(
      readdirSync(view)
        .filter((n) => n.startsWith("aspect_ratio_bucket_"))
        .sort(),
    ).toEqual(["aspect_ratio_bucket_indices_live-images.json", "aspect_ratio_bucket_metadata_live-images.json"]);
    expect(readdirSync(cache).filter((n) => !/^img\d\.(png|txt)$/.test(n))).toEqual([]);
    expect(readFileSync(join(cache, "img3.txt"), "utf8")).toBe("a picture number 3");
    const all = await events(job.job_id);
    expect(all.filter((e) => e.type === "checkpoint.saved").map((e) => e.data.step)).toEqual([10, 20, 30]);
    expect(all.find((e) => e.type === "dataset.ready").data).toMatchObject({ path: "live", files: 16, view });
  });

  it("a trainer that replaced its signal file with a directory loses its commands, not the runner: the request answers 200 and the job's events say why", async () => {
    const box = main;
    const trainer = `
      const fs = require("node:fs");
      const file = process.env.SIMPLETUNER_ACCELERATE_SIGNAL_FILE;
      fs.rmSync(file); fs.mkdirSync(file); fs.writeFileSync(file + "/keep", "x");
      console.log(JSON.stringify({ type: "swapped" }));
      setTimeout(() => {}, 60000);`;
    await env("swapper", { "--num_processes": 0, "--trainer_command": JSON.stringify([process.execPath, "-e", trainer, "--"]) });
    const job = await submit("swapper", box);
    await until("the swap", async () => (await events(job.job_id)).some((e) => e.type === "swapped"));
    expect((await t.call("POST", "/api/training/validation/run", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    const undelivered = await until("the runner to say so", async () =>
      (await events(job.job_id)).find((e) => e.type === "command.undelivered"),
    );
    expect(undelivered).toMatchObject({
      level: "warning",
      title: "The validation request could not be handed to the trainer: its signal file cannot be written",
      data: { command: "validation" },
    });
    // The runner goes on: the stop still reaches the trainer (node dies of SIGINT: completed).
    expect((await t.call("POST", "/api/training/stop", { json: { job_id: job.job_id }, auth: auth() })).status).toBe(200);
    expect((await ended(job.job_id)).status).toBe("completed");
  });

  it.skipIf(!HAS_BWRAP)("a sandboxed trainer cannot write through its view into the shared cache, nor see another job's", async () => {
    const other = await submit("live", main);
    await until("the other job to train", async () => (await events(other.job_id)).some((e) => e.type === "training.progress"));
    const probe = `
      const fs = require("node:fs"), path = require("node:path");
      const [config] = process.argv.slice(1).filter((a, i, all) => all[i - 1] === "--data_backend_config");
      const view = JSON.parse(fs.readFileSync(config, "utf8"))[0].instance_data_dir;
      const tryIt = (f) => { try { return f() ?? "done"; } catch (e) { return e.code; } };
      const out = {
        through_link: tryIt(() => fs.writeFileSync(path.join(view, "img0.txt"), "overwritten")),
        new_file: tryIt(() => fs.writeFileSync(path.join(view, "mine.json"), "{}")),
        replace_link: tryIt(() => { fs.writeFileSync(path.join(view, ".tmp"), "x"); fs.renameSync(path.join(view, ".tmp"), path.join(view, "img1.txt")); }),
        other_jobs: tryIt(() => fs.readdirSync(${JSON.stringify(join(workDirs[main]!, "jobs"))}).join(",")),
      };
      console.log(JSON.stringify({ type: "probe", data: out }));`;
    await envWithData("probe", { "--num_processes": 0, "--trainer_command": JSON.stringify([process.execPath, "-e", probe, "--"]) });
    const job = await submit("probe", main);
    expect((await ended(job.job_id)).status).toBe("completed");
    const result = (await events(job.job_id)).find((e) => e.type === "probe").data;
    // Its own view takes new files and replaced links; the files behind the links are read-only.
    expect(result).toEqual({ through_link: "EROFS", new_file: "done", replace_link: "done", other_jobs: job.job_id });
    const cache = join(workDirs[main]!, "cache", "datasets", "probe");
    expect(readFileSync(join(cache, "img0.txt"), "utf8")).toBe("a picture number 0");
    expect(readFileSync(join(cache, "img1.txt"), "utf8")).toBe("a picture number 1");
    expect((await ended(other.job_id)).status).toBe("completed");
  });
});

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
