// Who reads what, over real HTTP (issue 12): a job's events, status, checkpoints, webhook
// deliveries and configuration are for its owner, leads and admins; everyone else sees only the
// queue's public fields. Secret-looking options never appear in any response, for any level.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PUBLIC_QUEUE_FIELDS } from "../../shared/schemas/queue";
import { MASK } from "../../shared/secrets-mask";
import { createUserWithKey, setUpAdmin, startTestStack, type Credentials, type Reply, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: Credentials;
let alice: Credentials;
let bob: Credentials;
let lead: Credentials;
let viewer: Credentials;
let box: Credentials;
let jobId: string;

const SIGNING_SECRET = "whsec_d0NotLeakThisSigningSecret";
const HUB_TOKEN = "hf_d0NotLeakThisHubToken";
const BEARER = "Bearer d0NotLeakThisHeader";
const SECRETS = [SIGNING_SECRET, HUB_TOKEN, BEARER];
const WEBHOOKS = JSON.stringify([
  {
    webhook_type: "raw",
    callback_url: "https://hooks.example.invalid/in",
    signing_secret: SIGNING_SECRET,
    headers: { Authorization: BEARER },
  },
]);
const CONFIG = {
  "--model_family": "flux",
  "--model_type": "lora",
  "--num_processes": 1,
  "--max_train_steps": 10,
  "--trainer": "demo",
  "--hub_token": HUB_TOKEN,
  "--webhook_config": WEBHOOKS,
};
const MASKED_CONFIG = {
  ...CONFIG,
  "--hub_token": MASK,
  "--webhook_config": JSON.stringify([
    { webhook_type: "raw", callback_url: "https://hooks.example.invalid/in", signing_secret: MASK, headers: { Authorization: MASK } },
  ]),
};

// Every answer a user (not the runner, which must get the real values) received in this file.
const seen: Reply[] = [];
async function call(method: string, path: string, auth: Credentials, json?: unknown): Promise<Reply> {
  const reply = await t.call(method, path, { auth, ...(json === undefined ? {} : { json }) });
  seen.push(reply);
  return reply;
}
const assignment = async (id: string) =>
  ((await t.call("POST", "/api/workers/heartbeat", { json: {}, auth: box })).body.assignments as any[]).find((a) => a.job_id === id);

beforeAll(async () => {
  t = await startTestStack();
  const first = await setUpAdmin(t);
  admin = { key: first.key };
  alice = { key: (await createUserWithKey(t, { cookie: first.cookie }, "researcher", "alice")).key };
  bob = { key: (await createUserWithKey(t, { cookie: first.cookie }, "researcher", "bob")).key };
  lead = { key: (await createUserWithKey(t, { cookie: first.cookie }, "lead", "lena")).key };
  viewer = { key: (await createUserWithKey(t, { cookie: first.cookie }, "viewer", "vic")).key };
  const worker = await t.call("POST", "/api/admin/workers", { json: { name: "box" }, auth: admin });
  box = { bearer: worker.body.token };
  const gpus = [{ index: 0, uuid: "GPU-0", name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }];
  expect((await t.call("POST", "/api/workers/register", { json: { role: "local", gpus, hostname: "box-1" }, auth: box })).status).toBe(200);
  await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 4 }, auth: admin });

  expect((await call("POST", "/api/configs/environments", alice, { name: "secret-env" })).status).toBe(201);
  expect((await call("PUT", "/api/configs/secret-env", alice, { config: CONFIG })).status).toBe(200);
  const submitted = await call("POST", "/api/queue/submit", alice, {
    config_name: "secret-env",
    target: "local",
    metadata: { note: "alice's private note" },
  });
  expect(submitted.body).toMatchObject({ success: true, status: "running" });
  jobId = submitted.body.job_id;
  const events = [
    { seq: 0, event: { type: "training.progress", data: { step: 1, total_steps: 10, percent: 10, loss: 0.5 } } },
    { seq: 1, event: { type: "checkpoint.saved", data: { path: "output/checkpoint-1", step: 1 } } },
  ];
  expect((await t.call("POST", `/api/workers/jobs/${jobId}/events`, { json: { attempt: 1, events }, auth: box })).status).toBe(200);
});
afterAll(async () => {
  await t?.stop();
});

const reads = (id: string) =>
  [
    ["GET", `/api/training/events?job_id=${id}`],
    ["GET", `/api/training/events/stream?job_id=${id}`],
    ["GET", `/api/training/status?job_id=${id}`],
    ["POST", "/api/training/checkpoints"],
    ["GET", `/api/training/webhooks?job_id=${id}`],
    ["GET", `/api/training/config?job_id=${id}`],
  ] as const;
const read = (method: string, path: string, auth: Credentials) =>
  call(method, path, auth, method === "POST" ? { job_id: jobId } : undefined);

describe("another user's job", () => {
  it("refuses its events (before any stream opens), status, checkpoints, webhooks and config to a researcher and a viewer", async () => {
    const eventsBefore = (await read("GET", `/api/training/events?job_id=${jobId}`, alice)).body.events;
    for (const who of [bob, viewer]) {
      for (const [method, path] of reads(jobId)) {
        const reply = await read(method, path, who);
        expect(reply.status, `${method} ${path}`).toBe(403);
        expect(reply.headers.get("content-type")).toContain("application/json");
        expect(reply.body).toEqual({
          code: "not_your_job",
          detail: `Job ${jobId} is another user's: its events, status, checkpoints, webhooks and configuration are for its owner, leads and admins (GET /api/queue shows its public fields)`,
        });
      }
    }
    expect((await read("GET", `/api/training/events?job_id=${jobId}`, alice)).body.events).toEqual(eventsBefore);
  });

  it("is never the default job of someone who may not read it", async () => {
    const events = await call("GET", "/api/training/events", bob);
    expect([events.status, events.body]).toEqual([200, { job_id: null, status: null, events: [], next_index: 0, next_cursor: null }]);
    // The stream waits for the viewer's own next job, not alice's running one: nothing comes.
    const stream = await call("GET", "/api/training/events/stream?wait_seconds=1", viewer);
    expect(stream.status).toBe(200);
    expect(stream.text).toBe(
      "retry: 2000\n\n: waiting for your next job to start\n\n: no job of yours started within 1 s; connect again to go on waiting\n\n",
    );
    const status = await call("GET", "/api/training/status", bob);
    expect(status.body).toMatchObject({ state: "idle", job_id: null });
    const checkpoints = await call("POST", "/api/training/checkpoints", bob, {});
    expect(checkpoints.status).toBe(400);
  });

  it("shows in the queue listing with the public fields only", async () => {
    for (const who of [bob, viewer]) {
      const listed = ((await call("GET", "/api/queue?include_completed=true", who)).body.jobs as any[]).find((j) => j.job_id === jobId);
      expect(Object.keys(listed).sort()).toEqual([...PUBLIC_QUEUE_FIELDS].sort());
      expect(listed).toMatchObject({ job_id: jobId, owner: "alice", status: "running", position: null, wait_reason: null });
    }
    const position = await call("GET", `/api/queue/position/${jobId}`, bob);
    expect(position.status).toBe(200);
    expect(position.body).toMatchObject({ job_id: jobId, status: "running" });
  });
});

describe("the job's owner and leads", () => {
  it("read its events, status, checkpoints, webhooks and config, and see it in full in the queue", async () => {
    for (const who of [alice, lead, admin]) {
      for (const [method, path] of reads(jobId)) {
        if (path.includes("/stream")) continue; // an open stream; its refusal is what matters here
        const reply = await read(method, path, who);
        expect(reply.status, `${method} ${path}`).toBe(200);
      }
      const events = await read("GET", `/api/training/events?job_id=${jobId}`, who);
      expect(events.body.events.map((e: { type: string }) => e.type)).toEqual(["training.progress", "checkpoint.saved"]);
      expect((await read("GET", `/api/training/status?job_id=${jobId}`, who)).body).toMatchObject({
        job_id: jobId,
        config_name: "secret-env",
        startup_stage: "training",
      });
      expect((await read("POST", "/api/training/checkpoints", who)).body.checkpoints).toEqual([
        { name: "checkpoint-1", path: "output/checkpoint-1", step: 1, saved_at: expect.any(String) },
      ]);
      const listed = ((await call("GET", "/api/queue", who)).body.jobs as any[]).find((j) => j.job_id === jobId);
      expect(listed).toMatchObject({ config_name: "secret-env", metadata: { note: "alice's private note" }, allocated_gpus: [0] });
    }
    // Without job_id, the owner's own running job is the default.
    expect((await call("GET", "/api/training/events", alice)).body.job_id).toBe(jobId);
    expect((await call("GET", "/api/training/status", alice)).body.job_id).toBe(jobId);
  });

  it("get the job's snapshot with secrets masked; the runner gets the real values", async () => {
    const shown = await call("GET", `/api/training/config?job_id=${jobId}`, lead);
    expect(shown.body.config).toEqual(MASKED_CONFIG);
    expect((await assignment(jobId)).config).toEqual(CONFIG);
  });
});

describe("secret-looking options", () => {
  it("are masked in every environment answer and export, for an admin too", async () => {
    for (const who of [admin, alice, viewer]) {
      expect((await call("GET", "/api/configs/secret-env", who)).body.config).toEqual(MASKED_CONFIG);
      expect((await call("GET", "/api/configs/secret-env/export", who)).body.config).toEqual(MASKED_CONFIG);
    }
    expect((await call("PUT", "/api/configs/secret-env", alice, { description: "with secrets" })).body.config).toEqual(MASKED_CONFIG);
    expect((await call("GET", "/api/configs/", admin)).status).toBe(200);
  });

  it("sent back as the mask keep the stored values, at the same place inside --webhook_config too", async () => {
    const shown = (await call("GET", "/api/configs/secret-env", alice)).body.config;
    // (On the CPU, so the next job starts beside the first.)
    const saved = await call("PUT", "/api/configs/secret-env", alice, {
      config: { ...shown, "--max_train_steps": 20, "--num_processes": 0 },
    });
    expect(saved.status).toBe(200);
    expect(saved.body.config).toEqual({ ...MASKED_CONFIG, "--max_train_steps": 20, "--num_processes": 0 });

    // A form sending the mask back is valid, and its answer masks the merged options.
    expect((await call("POST", "/api/configs/secret-env/activate", alice)).status).toBe(200);
    // The form is the whole configuration: what the environment shows, masks included, plus the required options.
    const required = {
      "--pretrained_model_name_or_path": "black-forest-labs/FLUX.1-dev",
      "--output_dir": "output",
      "--data_backend_config": "config/multidatabackend.json",
    };
    const validated = await call("POST", "/api/training/validate", alice, { ...shown, ...required, "--max_train_steps": "7" });
    expect(validated.body).toMatchObject({ valid: true, environment: "secret-env" });
    expect(validated.body.options).toMatchObject({
      "--hub_token": MASK,
      "--webhook_config": MASKED_CONFIG["--webhook_config"],
      "--max_train_steps": 7,
    });

    // What runs is the real thing: a job submitted now carries the stored secrets.
    const next = await call("POST", "/api/queue/submit", alice, { config_name: "secret-env", target: "local" });
    expect(next.body).toMatchObject({ success: true, status: "running" });
    const given = await assignment(next.body.job_id);
    expect(given.config).toEqual({ ...CONFIG, "--max_train_steps": 20, "--num_processes": 0 });
  });

  it("sent as the mask where nothing is stored are refused with 422 naming the place, and nothing is saved", async () => {
    const before = (await call("GET", "/api/configs/secret-env", alice)).body;
    const reply = await call("PUT", "/api/configs/secret-env", alice, { config: { ...before.config, "--wandb_api_key": MASK } });
    expect(reply.status).toBe(422);
    expect(reply.body).toMatchObject({
      code: "mask_without_value",
      errors: [{ path: "body.config.--wandb_api_key", message: expect.any(String) }],
    });
    expect((await call("GET", "/api/configs/secret-env", alice)).body).toEqual(before);
  });

  it("never appeared in any answer a user got in this file, nor in the service's logs", () => {
    expect(seen.length).toBeGreaterThan(50);
    for (const reply of seen) for (const secret of SECRETS) expect(reply.text).not.toContain(secret);
    for (const secret of SECRETS) expect(t.lines.filter((line) => line.includes(secret))).toEqual([]);
  });
});
