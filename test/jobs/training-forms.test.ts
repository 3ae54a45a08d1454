// The training forms and the events of a caller's next job, over real HTTP (issue 13). validate
// and start take the form as the whole configuration on top of the defaults, so a verdict never
// depends on what someone activated earlier; start writes it to the active environment and runs
// it. Events asked for before the caller has a job are an empty page, or a stream that waits for
// the job and then carries it; a waiting stream counts as one of the user's live streams.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { sseEvents, type SseEvent } from "../helpers/sse";
import { createUserWithKey, setUpAdmin, startTestStack, type Credentials, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let box: Credentials;
/** Alice's job, started from the form (another user's for the rest). */
let aliceJob: string;
const users: Record<string, Credentials & { id: number }> = {};

/** A complete form: the required options of an inline run, epochs (not steps), on the CPU. */
const FORM = {
  "--model_family": "flux",
  "--model_type": "lora",
  "--pretrained_model_name_or_path": "black-forest-labs/FLUX.1-dev",
  "--output_dir": "output",
  "--data_backend_config": "config/multidatabackend.json",
  "--num_train_epochs": "2",
  "--num_processes": "0",
  "--learning_rate": "0.0003",
  __active_tab__: "model",
};
/** FORM as start runs it: typed, on top of the defaults, the unused of epochs and steps at 0. */
const FORM_OPTIONS = {
  "--model_family": "flux",
  "--model_type": "lora",
  "--pretrained_model_name_or_path": "black-forest-labs/FLUX.1-dev",
  "--output_dir": "output",
  "--data_backend_config": "config/multidatabackend.json",
  "--num_train_epochs": 2,
  "--max_train_steps": 0,
  "--num_processes": 0,
  "--learning_rate": 0.0003,
  "--train_batch_size": 1,
  "--gradient_accumulation_steps": 1,
  "--lr_scheduler": "constant",
  "--seed": 42,
  "--validation_preview": false,
  "--report_to": "none",
};
const WITHOUT_FAMILY = Object.fromEntries(Object.entries(FORM).filter(([k]) => k !== "--model_family"));

/** A multipart form, as curl -F and HTML forms send it. */
function multipart(fields: Record<string, string>): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  return form;
}
const validate = (who: Credentials, fields: Record<string, string>) =>
  t.call("POST", "/api/training/validate", { body: multipart(fields), auth: who });
const start = (who: Credentials, fields: Record<string, string>) =>
  t.call("POST", "/api/training/start", { body: multipart(fields), auth: who });
const queue = async () =>
  ((await t.call("GET", "/api/queue?include_completed=true&limit=1000", { auth: { key: admin.key } })).body.jobs as any[]).map(
    (j) => `${j.job_id}:${j.status}`,
  );

async function environment(who: Credentials, name: string, config: Record<string, unknown>) {
  expect((await t.call("POST", "/api/configs/environments", { json: { name }, auth: who })).status).toBe(201);
  expect((await t.call("PUT", `/api/configs/${name}`, { json: { config }, auth: who })).status).toBe(200);
}
const activate = async (who: Credentials, name: string) =>
  expect((await t.call("POST", `/api/configs/${name}/activate`, { auth: who })).status).toBe(200);

/** The fake box reports two events of the job and its end. */
async function runOnBox(jobId: string) {
  const events = [
    { seq: 0, event: { type: "training.started", title: "Training started", data: { total_steps: 2 } } },
    { seq: 1, event: { type: "training.progress", title: "Step 1/2", data: { step: 1, total_steps: 2, loss: 0.5 } } },
  ];
  expect((await t.call("POST", `/api/workers/jobs/${jobId}/events`, { json: { attempt: 1, events }, auth: box })).status).toBe(200);
  expect(
    (await t.call("POST", `/api/workers/jobs/${jobId}/finish`, { json: { status: "completed", exit_code: 0 }, auth: box })).status,
  ).toBe(200);
}

const streamUrl = (query = "") => `${t.base}/api/training/events/stream${query}`;
/** Reads a whole text/event-stream body, comments included. */
async function readAll(response: Response): Promise<string> {
  return await response.text();
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  for (const name of ["alice", "bob", "carol", "dave", "erin", "frank", "gina"])
    users[name] = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", name);
  // A GPU box the test drives itself: it is assigned the jobs, reports their events and ends.
  const worker = await t.call("POST", "/api/admin/workers", { json: { name: "box" }, auth: { key: admin.key } });
  box = { bearer: worker.body.token };
  const gpus = [{ index: 0, uuid: "GPU-0", name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }];
  expect((await t.call("POST", "/api/workers/register", { json: { role: "local", gpus, hostname: "box-1" }, auth: box })).status).toBe(200);
  expect(
    (await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 20 }, auth: { key: admin.key } })).status,
  ).toBe(200);
});
afterAll(async () => {
  await t?.stop();
});

describe("validate", () => {
  it("judges the form alone: the active environment's options neither fill a gap nor conflict", async () => {
    const alice = users.alice!;
    await environment(alice, "alice-active", { "--model_family": "flux", "--model_type": "lora", "--max_train_steps": 100 });
    await activate(alice, "alice-active");

    const missing = await validate(alice, WITHOUT_FAMILY);
    expect(missing.status).toBe(200);
    expect(missing.body).toMatchObject({ valid: false, message: "1 problem found", environment: "alice-active", active_tab: "model" });
    expect(missing.body.errors).toEqual([
      { field: "--model_family", message: "required: the form is the whole configuration (nothing is taken from an environment)" },
    ]);

    // Epochs in the form, steps in the environment: no conflict, the form's epochs are used.
    const valid = await validate(alice, FORM);
    expect(valid.body).toEqual({
      valid: true,
      message: "Configuration Valid",
      errors: [],
      environment: "alice-active",
      active_tab: "model",
      options: FORM_OPTIONS,
    });
  });

  it("gives the same verdict with another environment active and with none; only the environment start would write to differs", async () => {
    const bob = users.bob!;
    const verdicts: unknown[][] = [];
    const forms = [FORM, WITHOUT_FAMILY, { ...FORM, "--max_train_steps": "10" }];
    const judge = async (expected: string) => {
      const replies = await Promise.all(forms.map((f) => validate(bob, f)));
      for (const r of replies) expect(r.body.environment).toBe(expected);
      verdicts.push(replies.map((r) => ({ valid: r.body.valid, errors: r.body.errors, options: r.body.options })));
    };
    await judge(`inline-run-${bob.id}`); // nothing active
    await environment(bob, "bob-steps", { "--model_family": "sdxl", "--max_train_steps": 500, "--learning_rate": 0.5 });
    await activate(bob, "bob-steps");
    await judge("bob-steps");
    await environment(bob, "bob-epochs", { "--num_train_epochs": 9, "--output_dir": "elsewhere", "--lora_rank": 64 });
    await activate(bob, "bob-epochs");
    await judge("bob-epochs");
    // Deleting it leaves nothing active again.
    expect((await t.call("DELETE", "/api/configs/bob-epochs", { auth: bob })).status).toBe(200);
    await judge(`inline-run-${bob.id}`);
    expect(verdicts[1]).toEqual(verdicts[0]);
    expect(verdicts[2]).toEqual(verdicts[0]);
    expect(verdicts[3]).toEqual(verdicts[0]);
    expect((verdicts[0] as { valid: boolean }[]).map((v) => v.valid)).toEqual([true, false, false]);
  });

  it("names both fields when epochs and steps are both set, and steps when neither is", async () => {
    const both = await validate(users.alice!, { ...FORM, "--max_train_steps": "10" });
    expect(both.body.errors).toEqual([
      { field: "--num_train_epochs", message: "set either --num_train_epochs or --max_train_steps; the other must be 0" },
      { field: "--max_train_steps", message: "set either --max_train_steps or --num_train_epochs; the other must be 0" },
    ]);
    const neither = await validate(users.alice!, { ...FORM, "--num_train_epochs": "0" });
    expect(neither.body.errors).toEqual([
      { field: "--max_train_steps", message: "set --max_train_steps or --num_train_epochs (a positive number)" },
    ]);
    const empty = await validate(users.alice!, {});
    expect(empty.body.errors.map((e: { field: string }) => e.field)).toEqual([
      "--model_family",
      "--model_type",
      "--pretrained_model_name_or_path",
      "--output_dir",
      "--data_backend_config",
      "--max_train_steps",
    ]);
  });

  it("refuses what is not a form of options with a 4xx, and a mask with nothing stored behind it is a field problem", async () => {
    const alice = users.alice!;
    const array = await t.call("POST", "/api/training/validate", { json: [FORM], auth: alice });
    expect([array.status, array.body.code]).toEqual([422, "invalid_request"]);
    const text = await t.call("POST", "/api/training/validate", {
      body: "--model_family=flux",
      headers: { "content-type": "text/plain" },
      auth: alice,
    });
    expect(text.status).toBe(415);
    const nested = await t.call("POST", "/api/training/validate", { json: { ...FORM, "--model_family": { $ne: null } }, auth: alice });
    expect([nested.status, nested.body.code]).toEqual([422, "invalid_request"]);
    const file = multipart(FORM);
    file.set("--model_family", new Blob(["flux"]), "family.txt");
    expect((await t.call("POST", "/api/training/validate", { body: file, auth: alice })).status).toBe(422);
    const masked = await validate(alice, { ...FORM, "--hub_token": "********" });
    expect(masked.body.valid).toBe(false);
    expect(masked.body.errors).toEqual([
      { field: "--hub_token", message: "the mask stands for a stored value, and alice-active has none here: send the real value" },
    ]);
    const viewer = await createUserWithKey(t, { cookie: admin.cookie }, "viewer", "vince");
    expect((await validate(viewer, FORM)).status).toBe(403);
    expect((await t.call("POST", "/api/training/validate", { body: multipart(FORM) })).status).toBe(401);
  });
});

describe("start", () => {
  it("refuses an invalid form with 422 per field: nothing saved, nothing queued", async () => {
    const alice = users.alice!;
    const before = { env: (await t.call("GET", "/api/configs/alice-active", { auth: alice })).body, jobs: await queue() };
    const refused = await start(alice, { ...WITHOUT_FAMILY, "--max_train_steps": "10" });
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({ code: "invalid_configuration", detail: "3 problems found" });
    expect(refused.body.errors).toEqual([
      { path: "form.--model_family", message: "required: the form is the whole configuration (nothing is taken from an environment)" },
      { path: "form.--num_train_epochs", message: "set either --num_train_epochs or --max_train_steps; the other must be 0" },
      { path: "form.--max_train_steps", message: "set either --max_train_steps or --num_train_epochs; the other must be 0" },
    ]);
    expect((await t.call("GET", "/api/configs/alice-active", { auth: alice })).body).toEqual(before.env);
    expect(await queue()).toEqual(before.jobs);
  });

  it("writes the form on top of the defaults to the active environment and runs exactly that", async () => {
    const alice = users.alice!;
    const started = await start(alice, FORM);
    expect(started.status).toBe(200);
    expect(started.body).toMatchObject({ success: true, status: "running", environment: "alice-active" });
    const jobId = started.body.job_id as string;
    aliceJob = jobId;
    // The environment's own --max_train_steps 100 is gone: the form replaced its options.
    expect((await t.call("GET", "/api/configs/alice-active", { auth: alice })).body.config).toEqual(FORM_OPTIONS);
    expect((await t.call("GET", `/api/training/config?job_id=${jobId}`, { auth: alice })).body).toMatchObject({
      config_name: "alice-active",
      config: FORM_OPTIONS,
    });
    const assignments = (await t.call("POST", "/api/workers/heartbeat", { json: {}, auth: box })).body.assignments as any[];
    expect(assignments.find((a) => a.job_id === jobId).config).toEqual(FORM_OPTIONS);
    await runOnBox(jobId);
  });
});

describe("events before a job", () => {
  it("polling answers 200 with an empty page and no job", async () => {
    const carol = users.carol!;
    for (const query of ["", "?since_index=7", "?limit=3"]) {
      const page = await t.call("GET", `/api/training/events${query}`, { auth: carol });
      expect(page.status).toBe(200);
      expect(page.body).toEqual({ job_id: null, status: null, events: [], next_index: 0, next_cursor: null });
    }
  });

  it("a named job stays 404 when unknown and 403 when another user's, polled or streamed", async () => {
    const carol = users.carol!;
    for (const path of ["/api/training/events", "/api/training/events/stream"]) {
      const unknown = await t.call("GET", `${path}?job_id=local-000000000000`, { auth: carol });
      expect([unknown.status, unknown.body.code], path).toEqual([404, "not_found"]);
      const other = await t.call("GET", `${path}?job_id=${aliceJob}`, { auth: carol });
      expect([other.status, other.body.code], path).toEqual([403, "not_your_job"]);
    }
  });

  it("an SSE stream opened before the first job waits, then delivers that job's events and its end", async () => {
    const carol = users.carol!;
    const response = await fetch(streamUrl(), { headers: { "x-api-key": carol.key! } });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const reader = response.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain(": waiting for your next job to start\n\n");
    reader.releaseLock();

    const started = await start(carol, FORM);
    expect(started.body.status).toBe("running");
    await runOnBox(started.body.job_id);
    const received: SseEvent[] = [];
    for await (const event of sseEvents(response.body!)) received.push(event);
    expect(received.map((e) => [e.id, e.event, e.data.type ?? e.data.status])).toEqual([
      ["0", "message", "training.started"],
      ["1", "message", "training.progress"],
      [null, "end", "completed"],
    ]);
    expect(received[1]!.data).toMatchObject({ index: 1, data: { step: 1, loss: 0.5 } });
  });

  it("a WebSocket opened before the first job waits, then delivers that job's events and its end", async () => {
    const dave = users.dave!;
    const socket = new WebSocket(streamUrl().replace("http", "ws"), { headers: { "x-api-key": dave.key! } });
    const messages: any[] = [];
    const closed = new Promise<{ code: number; reason: string }>((resolve, reject) => {
      socket.on("message", (data) => messages.push(JSON.parse(String(data))));
      socket.on("close", (code, reason) => resolve({ code, reason: String(reason) }));
      socket.on("error", reject);
    });
    await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
    const started = await start(dave, FORM);
    await runOnBox(started.body.job_id);
    expect(await closed).toEqual({ code: 1000, reason: "job completed" });
    expect(messages.map((m) => m.type)).toEqual(["training.started", "training.progress", "end"]);
    expect(messages[2]).toEqual({ type: "end", status: "completed" });
  });

  it("a waiting stream ends after wait_seconds with a comment (SSE) or a close reason (WebSocket)", async () => {
    const erin = users.erin!;
    const response = await fetch(streamUrl("?wait_seconds=1"), { headers: { "x-api-key": erin.key! } });
    expect(response.status).toBe(200);
    const text = await readAll(response);
    expect(text.startsWith("retry: 2000\n\n: waiting for your next job to start\n\n")).toBe(true);
    expect(text.endsWith(": no job of yours started within 1 s; connect again to go on waiting\n\n")).toBe(true);

    const socket = new WebSocket(streamUrl("?wait_seconds=1").replace("http", "ws"), { headers: { "x-api-key": erin.key! } });
    const messages: unknown[] = [];
    socket.on("message", (data) => messages.push(String(data)));
    const closed = await new Promise<{ code: number; reason: string }>((resolve, reject) => {
      socket.on("close", (code, reason) => resolve({ code, reason: String(reason) }));
      socket.on("error", reject);
    });
    expect(closed).toEqual({ code: 1000, reason: "no job of yours started within 1 s; connect again to go on waiting" });
    expect(messages).toEqual([]);
  });

  it("refuses a wait outside 1 to 300 s with 422", async () => {
    for (const wait of ["0", "301", "soon", "1.5"]) {
      const refused = await t.call("GET", `/api/training/events/stream?wait_seconds=${wait}`, { auth: users.erin! });
      expect([refused.status, refused.body.code], wait).toEqual([422, "invalid_request"]);
    }
  });

  it("waiting streams count as the user's live streams: the 11th is 429, and an ended one frees its place", async () => {
    const frank = users.frank!;
    const waiting = await Promise.all(
      Array.from({ length: 10 }, () => fetch(streamUrl("?wait_seconds=3"), { headers: { "x-api-key": frank.key! } })),
    );
    expect(waiting.map((r) => r.status)).toEqual(Array(10).fill(200));
    for (const request of [streamUrl(), streamUrl("?wait_seconds=1")]) {
      const refused = await fetch(request, { headers: { "x-api-key": frank.key! } });
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("15");
      expect(await refused.json()).toEqual({
        code: "too_many_watchers",
        detail: "You already have 10 live event streams, the most one user has: close one, or poll GET /api/training/events",
      });
    }
    // Another user is not held back by frank's.
    const other = await fetch(streamUrl("?wait_seconds=1"), { headers: { "x-api-key": users.gina!.key! } });
    expect(other.status).toBe(200);
    await readAll(other);
    // Each ends after its wait and gives its place back.
    for (const r of waiting) expect(await readAll(r)).toContain("no job of yours started within 3 s");
    const again = await fetch(streamUrl("?wait_seconds=1"), { headers: { "x-api-key": frank.key! } });
    expect(again.status).toBe(200);
    await readAll(again);
  });
});

describe("the active job", () => {
  it("is the caller's: a queued job is what status shows, the last started one what events show, and nothing running is 400 for control", async () => {
    const gina = users.gina!;
    const first = await start(gina, FORM);
    await runOnBox(first.body.job_id);
    expect(
      (await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 0 }, auth: { key: admin.key } })).status,
    ).toBe(200);
    try {
      const queued = await start(gina, FORM);
      expect(queued.body.status).toBe("queued");
      expect((await t.call("GET", "/api/training/status", { auth: gina })).body).toMatchObject({
        state: "queued",
        job_id: queued.body.job_id,
      });
      expect((await t.call("GET", "/api/training/events", { auth: gina })).body).toMatchObject({
        job_id: first.body.job_id,
        status: "completed",
      });
      const stop = await t.call("POST", "/api/training/stop", { json: {}, auth: gina });
      expect([stop.status, stop.body.code]).toEqual([400, "no_active_job"]);
      const checkpoints = await t.call("POST", "/api/training/checkpoints", { json: {}, auth: gina });
      expect([checkpoints.status, checkpoints.body.code]).toEqual([400, "no_active_job"]);
      await t.call("POST", "/api/training/cancel", { json: { job_id: queued.body.job_id }, auth: gina });
    } finally {
      await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 20 }, auth: { key: admin.key } });
    }
  });
});
