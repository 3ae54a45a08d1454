// Cloud training end to end over real HTTP: the real local stack (workerd, libSQL, R2, the jobs'
// Durable Objects) against a fake Replicate that implements the provider's documented API and
// signs its webhooks, a fake model hub and a fake S3 store. Summary and consent before any upload,
// exclusions, the 100 MB cap, the spending limit, approvals, tracking by webhook and by polling,
// per-second cost, cancel billing, results in each destination, the circuit breaker, and the
// provider token absent from everything the service says.
import { fakeReplicateSettings } from "../helpers/fake-provider";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeHub, type FakeHub } from "../fakes/fake-hub";
import { startFakeObjectStore, type FakeObjectStore } from "../fakes/fake-object-store";
import { signWebhook, startFakeReplicate, type FakeReplicate } from "../fakes/fake-replicate";
import { until } from "../helpers/wait";
import { createUserWithKey, setUpAdmin, startTestStack, type Reply, type TestStack } from "../helpers/stack";

const TOKEN = "r8_cloudtesttoken0123456789abcdef";
const HF_TOKEN = "hf_cloudtesthubtoken0123456789";
const S3_KEY = "AKIAPUBLISHTEST0001";
const S3_SECRET = "publish-secret-value-0123456789";
const RATE = 0.0014; // gpu-a100-large, the default hardware
const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5e2b3b40000000049454e44ae426082",
  "hex",
);

let t: TestStack;
let fake: FakeReplicate;
let hub: FakeHub;
let store: FakeObjectStore;
let admin: { key: string; cookie: string };
let alice: { key: string; id: number };
let bob: { key: string; id: number };
let viewer: { key: string };
/** Every answer the service gave in this file: the provider token must be in none of them. */
const answers: string[] = [];

async function call(method: string, path: string, key: string, json?: unknown): Promise<Reply> {
  const reply = await t.call(method, path, { auth: { key }, ...(json === undefined ? {} : { json }) });
  answers.push(reply.text, JSON.stringify([...reply.headers]));
  return reply;
}
const submit = (body: Record<string, unknown>, key = alice.key) =>
  call("POST", "/api/cloud/jobs/submit", key, { config_name: "faces", ...body });
const job = async (id: string, key = alice.key) => (await call("GET", `/api/cloud/jobs/${id}`, key)).body;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ended = (id: string, key = alice.key) =>
  until(`${id} to end with a final cost`, async () => {
    const j = await job(id, key);
    return ["completed", "failed", "cancelled"].includes(j.status) && j.cost_final && j.archive_deleted !== undefined ? j : null;
  });
/** Submits with the confirmation of the current summary (consent mode ask). */
async function confirmedSubmit(body: Record<string, unknown> = {}, key = alice.key): Promise<Reply> {
  const dry = await submit({ ...body, dry_run: true }, key);
  expect(dry.status).toBe(200);
  return submit({ ...body, confirm_summary: dry.body.summary.summary_id }, key);
}
async function upload(target: string, files: [Buffer | string, string][], key = alice.key): Promise<void> {
  const form = new FormData();
  form.set("target_path", target);
  for (const [bytes, name] of files) form.append("files[]", new Blob([typeof bytes === "string" ? bytes : new Uint8Array(bytes)]), name);
  const reply = await t.call("POST", "/api/datasets/upload", { body: form, auth: { key } });
  if (reply.status !== 201) throw new Error(`upload ${target}: ${reply.status} ${reply.text}`);
}
async function metrics(): Promise<string> {
  return (await call("GET", "/api/cloud/metrics/prometheus", admin.key)).text;
}

beforeAll(async () => {
  [fake, hub, store] = await Promise.all([
    startFakeReplicate({ token: TOKEN, run: { startingMs: 150, processingMs: 1200, logEveryMs: 200 } }),
    startFakeHub({ token: HF_TOKEN }),
    startFakeObjectStore({ buckets: ["models"], accessKeyId: S3_KEY }),
  ]);
  t = await startTestStack(undefined, {
    REPLICATE_API_TOKEN: TOKEN,
    HF_TOKEN,
    PUBLISH_S3_ACCESS_KEY_ID: S3_KEY,
    PUBLISH_S3_SECRET_ACCESS_KEY: S3_SECRET,
    CIRCUIT_BREAKER_RESET_SECONDS: "2",
  });
  admin = await setUpAdmin(t);
  alice = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "alice");
  bob = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "bob");
  viewer = await createUserWithKey(t, { cookie: admin.cookie }, "viewer", "vera");
  const setup = [
    await call("PUT", "/api/cloud/providers/replicate", admin.key, fakeReplicateSettings(fake, { http_timeout: 2 })),
    await call("PUT", "/api/cloud/settings", admin.key, {
      public_url: t.base,
      poll_interval_seconds: 1,
      publishing: {
        hub: { enabled: true, endpoint: hub.url },
        s3: { enabled: true, endpoint_url: store.url, bucket: "models", region: "us-east-1", prefix: "runs/" },
      },
    }),
    await call("POST", "/api/queue/concurrency", admin.key, { user_max_concurrent: 10 }),
    await call("PUT", "/api/cloud/metrics/config", admin.key, {
      prometheus_enabled: true,
      prometheus_categories: ["jobs", "circuit_breakers", "provider"],
    }),
    await call("PUT", "/api/queue/approval-rules", admin.key, { cloud_cost_threshold: null }),
    await call("POST", "/api/configs/environments", alice.key, { name: "faces", model_family: "flux", model_type: "lora" }),
  ];
  for (const reply of setup) expect(reply.status, reply.text).toBeLessThan(300);
  await upload("faces", [
    [PNG, "001.png"],
    ["a face", "001.txt"],
    ["SECRET=1", ".env.txt"],
    ["id", "id_rsa.txt"],
  ]);
  await upload("faces/.git", [["ref: refs/heads/main", "HEAD.txt"]]);
}, 60_000);
afterAll(async () => {
  await Promise.all([t?.stop(), fake?.stop(), hub?.stop(), store?.stop()]);
});

describe("the summary and estimate before anything is uploaded", () => {
  it("a dry run lists what would be uploaded, what is excluded, and the cost; it stores and uploads nothing", async () => {
    const before = fake.requests.length;
    const dry = await submit({ dry_run: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({ success: true, dry_run: true, job_id: null, status: "dry_run", consent_mode: "ask" });
    expect(dry.body.summary).toMatchObject({ files: 2, bytes: PNG.length + 6, archive_limit_bytes: 100 * 1000 * 1000 });
    expect(dry.body.summary.datasets).toEqual([{ id: expect.any(String), path: "datasets/faces", files: 2, bytes: PNG.length + 6 }]);
    expect(dry.body.summary.excluded.map((e: { path: string }) => e.path).sort()).toEqual(
      ["datasets/faces/.env.txt", "datasets/faces/.git/HEAD.txt", "datasets/faces/id_rsa.txt"].sort(),
    );
    expect(dry.body.estimate).toMatchObject({
      hardware: "gpu-a100-large",
      rate_usd_per_second: RATE,
      expected_seconds: 3600,
      estimated_cost_usd: 5.04,
      spending: null,
    });
    expect(dry.body.message).toContain(dry.body.summary.summary_id);
    expect(fake.requests.length).toBe(before);
    expect((await call("GET", "/api/queue?include_completed=true", admin.key)).body.jobs).toEqual([]);
  });

  it("with consent Always Ask, a submission without the confirmation of this exact summary is refused", async () => {
    const missing = await submit({});
    expect(missing.status).toBe(409);
    expect(missing.body.code).toBe("consent_required");
    const stale = await submit({ confirm_summary: "0".repeat(32) });
    expect(stale.status).toBe(409);
    expect(stale.body.code).toBe("summary_changed");
    expect(fake.trainings.size).toBe(0);
  });

  it("refuses a viewer, an unknown environment, the managed service and an unknown provider, storing nothing", async () => {
    expect((await submit({ dry_run: true }, viewer.key)).status).toBe(403);
    expect((await call("POST", "/api/cloud/jobs/submit", alice.key, { config_name: "nope", dry_run: true })).status).toBe(404);
    const managed = await submit({ provider: "managed", dry_run: true });
    expect([managed.status, managed.body.code]).toEqual([422, "provider_coming_soon"]);
    expect((await submit({ provider: "elsewhere", dry_run: true })).status).toBe(422);
    expect((await submit({ destination: { type: "ftp" }, dry_run: true })).status).toBe(422);
    expect((await submit({ max_runtime_minutes: 0, dry_run: true })).status).toBe(422);
  });
});

describe("a cloud job from submission to its results", () => {
  it("goes pending -> running -> completed, uploads only the confirmed files, logs live, costs billed seconds x rate, delivers to the storage endpoint and deletes the archive", async () => {
    const submitted = await confirmedSubmit();
    expect(submitted.status, submitted.text).toBe(200);
    const id = submitted.body.job_id as string;
    expect(id).toMatch(/^cloud-[0-9a-f]{12}$/);
    expect(submitted.body.status).toBe("running");

    const running = await until("the provider to run the job", async () => {
      const j = await job(id);
      return j.provider_status === "processing" ? j : null;
    });
    expect(running).toMatchObject({ status: "running", upload_progress: 1, cost_final: false, hardware: "gpu-a100-large" });
    const training = fake.trainings.get(running.provider_job_id)!;
    // The public URL is http://: Replicate sends webhooks to HTTPS addresses only, so the job is followed by polling.
    expect(training.webhook).toBeUndefined();
    expect(training.input).toMatchObject({ service_job_id: id, result_destination: "storage", result_s3_bucket: id });
    expect(JSON.stringify(training.input)).not.toContain(TOKEN);
    // The cost ticks while it runs.
    const first = (await job(id)).cost_usd;
    await sleep(1100);
    expect((await job(id)).cost_usd).toBeGreaterThanOrEqual(first);

    const done = await ended(id);
    expect(done.status).toBe("completed");
    expect(done.provider_status).toBe("succeeded");
    const billed = fake.trainings.get(running.provider_job_id)!.metrics.predict_time!;
    expect(done.billed_seconds).toBeCloseTo(billed, 3);
    expect(done.cost_usd).toBeCloseTo(Math.round(billed * RATE * 10_000) / 10_000, 4);
    await until("the archive to be deleted at the provider", async () => (await job(id)).archive_deleted);
    expect(fake.files.size).toBe(0);
    // Exactly the confirmed files reached the archive: no .env, .git or key file.
    expect(fake.archiveEntries(running.provider_job_id).sort()).toEqual(
      ["config.json", "multidatabackend.json", "datasets/faces/001.png", "datasets/faces/001.txt"].sort(),
    );
    // Logs became job events.
    const events = (await call("GET", `/api/training/events?job_id=${id}`, alice.key)).body.events as { type: string; message?: string }[];
    expect(events.filter((e) => e.type === "log").length).toBeGreaterThan(2);
    // The model landed in the job's own bucket on the storage endpoint.
    const model = await t.call("GET", `/api/cloud/storage/${id}/model.safetensors`, { auth: { key: alice.key } });
    expect(model.status).toBe(200);
    expect((await call("GET", `/api/queue/position/${id}`, alice.key)).status).toBeLessThan(500);
  }, 40_000);

  it("answers another researcher 403 on the job, and refuses resuming it (resubmit instead)", async () => {
    const submitted = await confirmedSubmit();
    const id = submitted.body.job_id as string;
    expect((await call("GET", `/api/cloud/jobs/${id}`, bob.key)).status).toBe(403);
    expect((await call("POST", `/api/cloud/jobs/${id}/cancel`, bob.key)).status).toBe(403);
    await ended(id);
    expect((await call("POST", `/api/cloud/jobs/${id}/resume`, bob.key)).status).toBe(403);
    const resume = await call("POST", `/api/cloud/jobs/${id}/resume`, alice.key);
    expect([resume.status, resume.body.code]).toEqual([409, "resume_unsupported"]);
    expect((await call("GET", "/api/cloud/jobs/cloud-000000000000", alice.key)).status).toBe(404);
  }, 40_000);

  it("cancelling a running job cancels it at the provider and bills the time it ran", async () => {
    fake.setRunScript({ startingMs: 100, outcome: "manual", logEveryMs: 200 });
    try {
      const submitted = await confirmedSubmit();
      const id = submitted.body.job_id as string;
      const running = await until("processing", async () => ((await job(id)).provider_status === "processing" ? job(id) : null));
      // Started at the provider: expected to end when the run time its estimate assumed is up (the cost cap).
      const allowance = submitted.body.estimate.expected_seconds as number;
      const entry = await until("the expected end from the provider's start", async () => {
        const shown = (await call("GET", `/api/queue/jobs/${id}`, alice.key)).body;
        return Date.parse(shown.expected_end_at) === Date.parse(running.provider_started_at) + allowance * 1000 && shown;
      });
      expect(entry.expected_end_method).toBe("cost_cap");
      await sleep(1200);
      const cancel = await call("POST", `/api/cloud/jobs/${id}/cancel`, alice.key);
      expect(cancel.status).toBe(200);
      expect(cancel.body.status).toBe("cancelled");
      const done = await ended(id);
      expect(done.provider_status).toBe("canceled");
      const billed = fake.trainings.get(running.provider_job_id)!.metrics.predict_time!;
      expect(billed).toBeGreaterThan(1);
      expect(done.billed_seconds).toBeCloseTo(billed, 3);
      expect(done.cost_usd).toBeCloseTo(Math.round(billed * RATE * 10_000) / 10_000, 4);
      expect((await call("POST", `/api/cloud/jobs/${id}/cancel`, alice.key)).status).toBe(409);
      // Its lineage's cost is the provider's bill; a retry cannot resume at the provider: refused, nothing queued.
      expect((await call("GET", `/api/queue/jobs/${id}`, alice.key)).body.lineage.cost).toBeCloseTo(done.cost_usd, 4);
      const before = (await call("GET", "/api/queue?include_completed=true&limit=1000", alice.key)).body.jobs.length;
      const retried = await call("POST", `/api/queue/${id}/retry`, alice.key);
      expect([retried.status, retried.body.code]).toEqual([409, "resume_unsupported"]);
      expect((await call("GET", "/api/queue?include_completed=true&limit=1000", alice.key)).body.jobs.length).toBe(before);
    } finally {
      fake.setRunScript({ startingMs: 150, processingMs: 1200, logEveryMs: 200 });
    }
  }, 40_000);

  it("follows the job by polling alone when webhooks are off", async () => {
    fake.setSendWebhooks(false);
    try {
      const sent = fake.webhooks.length;
      const id = (await confirmedSubmit()).body.job_id as string;
      const done = await ended(id);
      expect(done.status).toBe("completed");
      expect(fake.webhooks.length).toBe(sent);
    } finally {
      fake.setSendWebhooks(true);
    }
  }, 40_000);

  it("refuses the model hub and the S3 publishing bucket as a cloud job's destination (no long-lived secret in a training's input), storing nothing", async () => {
    const trainings = fake.trainings.size;
    for (const destination of [{ type: "hub", repo_id: "alice/faces-lora" }, { type: "s3" }]) {
      const refused = await submit({ destination, dry_run: true });
      expect([refused.status, refused.body.code], refused.text).toEqual([422, "destination_unavailable"]);
    }
    expect(fake.trainings.size).toBe(trainings);
  });

  it("blocks a job whose estimate reaches the approval threshold until an admin approves it", async () => {
    await call("PUT", "/api/queue/approval-rules", admin.key, { cloud_cost_threshold: 5 });
    try {
      const before = fake.trainings.size;
      const blocked = await confirmedSubmit();
      expect(blocked.body.status).toBe("blocked");
      const id = blocked.body.job_id as string;
      await sleep(500);
      expect(fake.trainings.size).toBe(before);
      expect((await call("POST", `/api/queue/${id}/approve`, admin.key)).status).toBe(200);
      expect((await ended(id)).status).toBe("completed");
    } finally {
      await call("PUT", "/api/queue/approval-rules", admin.key, { cloud_cost_threshold: null });
    }
  }, 40_000);

  it("Never Upload refuses cloud training; Always Allow needs no confirmation", async () => {
    await call("PUT", "/api/cloud/settings", admin.key, { consent_mode: "never" });
    const never = await submit({ dry_run: true });
    expect([never.status, never.body.code]).toEqual([403, "cloud_uploads_disabled"]);
    await call("PUT", "/api/cloud/settings", admin.key, { consent_mode: "allow" });
    try {
      const allowed = await submit({});
      expect(allowed.status, allowed.text).toBe(200);
      await ended(allowed.body.job_id);
    } finally {
      await call("PUT", "/api/cloud/settings", admin.key, { consent_mode: "ask" });
    }
  }, 40_000);

  it("refuses an archive over 100 MB before anything is uploaded", async () => {
    const big = Buffer.alloc(51 * 1024 * 1024, 7);
    await call("POST", "/api/configs/environments", alice.key, { name: "huge", model_family: "flux", model_type: "lora" });
    await upload("huge", [[big, "a.png"]]);
    await upload("huge", [[big, "b.png"]]);
    const before = fake.requests.length;
    const refused = await call("POST", "/api/cloud/jobs/submit", alice.key, { config_name: "huge", confirm_summary: "x" });
    expect([refused.status, refused.body.code]).toEqual([413, "archive_too_large"]);
    expect(fake.requests.length).toBe(before);
  }, 60_000);
});

describe("providers, health and the circuit breaker", () => {
  it("lists each provider with its capabilities and whether its credentials validate", async () => {
    const list = (await t.call("GET", "/api/cloud/providers")).body.providers as any[];
    answers.push(JSON.stringify(list));
    expect(list.map((p) => [p.name, p.coming_soon])).toEqual([
      ["replicate", false],
      ["workers", false],
      ["managed", true],
    ]);
    expect(list[0]).toMatchObject({ supports_cost_tracking: true, supports_live_logs: true, credentials: { valid: true } });
    expect(list[2].credentials).toBeNull();
    const health = await t.call("GET", "/api/cloud/health?include_providers=true");
    expect(health.body.providers.find((p: any) => p.name === "replicate")).toMatchObject({
      status: "healthy",
      latency_ms: expect.any(Number),
    });
  });

  it("opens the breaker after 5 failed calls (state in the metrics), answers at once while open, and closes after it recovers", async () => {
    fake.setRunScript({ startingMs: 100, outcome: "manual" });
    const id = (await confirmedSubmit()).body.job_id as string;
    await until("processing", async () => (await job(id)).provider_status === "processing");
    fake.setOutage("500");
    await until("the breaker to open", async () => (await metrics()).includes('service_circuit_breaker_state{provider="replicate"} 2'), {
      timeoutMs: 30_000,
    });
    expect(await metrics()).toMatch(/service_circuit_breaker_failures_total\{provider="replicate"\} [5-9]/);
    const dry = await submit({ dry_run: true });
    expect(dry.status).toBe(200); // a dry run needs no provider call
    fake.setOutage(null);
    await until("the breaker to close", async () => (await metrics()).includes('service_circuit_breaker_state{provider="replicate"} 0'), {
      timeoutMs: 30_000,
    });
    const training = [...fake.trainings.values()].find((x) => x.input.service_job_id === id)!;
    await fake.finish(training.id, "succeeded");
    fake.setRunScript({ startingMs: 150, processingMs: 1200, logEveryMs: 200 });
    expect((await ended(id)).status).toBe("completed");
    expect(await metrics()).toMatch(/service_cost_usd_total [0-9.]+/);
  }, 60_000);
});

describe("cloud settings and rates", () => {
  const settings = async () => (await call("GET", "/api/cloud/settings", viewer.key)).body;
  const rates = async () => (await call("GET", "/api/cloud/rates", viewer.key)).body;

  it("are changed only by admins; a refused or invalid change leaves everything as it was", async () => {
    const [before, ratesBefore] = [await settings(), await rates()];
    expect((await call("PUT", "/api/cloud/settings", alice.key, { consent_mode: "allow", spending_limit_usd: 1e6 })).status).toBe(403);
    expect((await call("PUT", "/api/cloud/rates", alice.key, { "gpu-a100-large": 0 })).status).toBe(403);
    for (const bad of [
      { publishing: { s3: { bucket: null } } }, // enabled S3 without a bucket
      { public_url: "ftp://train.example.com" },
      { consent_mode: "sometimes" },
      { spending_limit_usd: -1 },
      { publishing: { hub: { token_secret: "../etc/passwd" } } },
      { surprise: true },
    ]) {
      const refused = await call("PUT", "/api/cloud/settings", admin.key, bad);
      expect(refused.status, JSON.stringify(bad)).toBe(422);
    }
    for (const bad of [{ "gpu-a100-large": -0.1 }, { "../gpu": 0.1 }, { "gpu-t4": "cheap" }]) {
      expect((await call("PUT", "/api/cloud/rates", admin.key, bad)).status, JSON.stringify(bad)).toBe(422);
    }
    expect(await settings()).toEqual(before);
    expect(await rates()).toEqual(ratesBefore);
  });

  it("takes nested publishing fields one by one, and a saved rates table replaces the defaults whole", async () => {
    const before = await settings();
    const saved = await call("PUT", "/api/cloud/settings", admin.key, { publishing: { s3: { prefix: "other/" } } });
    expect(saved.body.publishing).toEqual({ ...before.publishing, s3: { ...before.publishing.s3, prefix: "other/" } });
    await call("PUT", "/api/cloud/settings", admin.key, { publishing: { s3: { prefix: before.publishing.s3.prefix } } });
    const original = await rates();
    expect((await call("PUT", "/api/cloud/rates", admin.key, { "gpu-a100-large": 0.002 })).body).toEqual({ "gpu-a100-large": 0.002 });
    expect(await rates()).toEqual({ "gpu-a100-large": 0.002 });
    await call("PUT", "/api/cloud/rates", admin.key, original);
    expect(await rates()).toEqual(original);
  });

  it("refuses a destination that is not enabled, storing nothing", async () => {
    await call("PUT", "/api/cloud/settings", admin.key, { publishing: { hub: { enabled: false } } });
    try {
      const trainings = fake.trainings.size;
      const refused = await submit({ destination: { type: "hub", repo_id: "alice/x" }, confirm_summary: "x" });
      expect([refused.status, refused.body.code]).toEqual([422, "destination_unavailable"]);
      expect(fake.trainings.size).toBe(trainings);
      const mine = (await call("GET", "/api/queue/me", alice.key)).body;
      expect([mine.pending_count, mine.blocked_count, mine.running_count]).toEqual([0, 0, 0]);
    } finally {
      await call("PUT", "/api/cloud/settings", admin.key, { publishing: { hub: { enabled: true } } });
    }
  });
});

describe("worker orchestration", () => {
  it("queues the environment for the remote workers: nothing packaged, uploaded or billed", async () => {
    const before = fake.requests.length;
    const dry = await submit({ provider: "workers", dry_run: true });
    expect(dry.body).toMatchObject({ status: "dry_run", summary: { files: 0 }, estimate: { estimated_cost_usd: 0 } });
    const queued = await submit({ provider: "workers" });
    expect(queued.status, queued.text).toBe(200);
    expect(queued.body).toMatchObject({ success: true, status: "pending", job_id: expect.stringMatching(/^local-/) });
    expect(queued.body.message).toContain("no online worker");
    const entry = (await call("GET", `/api/queue/position/${queued.body.job_id}`, alice.key)).body;
    expect(entry).toMatchObject({ wait_reason: "no_matching_worker" });
    expect(fake.requests.length).toBe(before);
    expect((await call("POST", `/api/queue/${queued.body.job_id}/cancel`, alice.key)).status).toBe(200);
    // It is a queue job, not a cloud job: the cloud record answers 404.
    expect((await call("GET", `/api/cloud/jobs/${queued.body.job_id}`, alice.key)).body.code).toBe("not_a_cloud_job");
  });
});

describe("provider webhooks moving a job", () => {
  it("applies only webhooks signed with the provider's key (rotated keys included), fresh, untampered and once", async () => {
    fake.setRunScript({ startingMs: 100, outcome: "manual" });
    fake.setSendWebhooks(false);
    try {
      const id = (await confirmedSubmit()).body.job_id as string;
      const running = await until("processing", async () => ((await job(id)).provider_status === "processing" ? job(id) : null));
      const training = fake.trainings.get(running.provider_job_id)!;
      const body = JSON.stringify({
        ...training,
        status: "failed",
        error: "out of memory",
        completed_at: new Date().toISOString(),
        metrics: { predict_time: 1.5 },
      });
      const post = (headers: Record<string, string>, payload = body) =>
        t.call("POST", "/api/webhooks/replicate", { body: payload, headers: { "content-type": "application/json", ...headers } });
      const signed = (msgId: string, at: Date, secret = fake.webhookSecret) => ({
        "webhook-id": msgId,
        "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
        // Signed as Replicate signs, with an HMAC of the test's own (not the verifier's library).
        "webhook-signature": signWebhook(secret, msgId, Math.floor(at.getTime() / 1000), body),
      });
      const still = async () => expect((await job(id)).status).toBe("running");
      expect((await post({})).status).toBe(401); // no signature headers
      await still();
      expect((await post(signed("msg-old", new Date(Date.now() - 10 * 60_000)))).status).toBe(401); // 10 minutes old
      expect((await post(signed("msg-t", new Date()), body.replace("out of memory", "fine"))).status).toBe(401); // tampered
      const stranger = `whsec_${Buffer.from("not the provider's key at all").toString("base64")}`;
      expect((await post(signed("msg-x", new Date(), stranger))).status).toBe(401);
      await still();
      // A rotation: the admin saved the new key; the provider signs with both while it rolls over.
      const next = `whsec_${Buffer.from("the provider's rotated key 2").toString("base64")}`;
      expect((await call("PUT", "/api/cloud/providers/replicate", admin.key, { webhook_secret: next })).status).toBe(200);
      const now = new Date();
      const both = signed("msg-rot", now);
      both["webhook-signature"] = `${both["webhook-signature"]} ${signWebhook(next, "msg-rot", Math.floor(now.getTime() / 1000), body)}`;
      const accepted = await post(both);
      expect([accepted.status, accepted.body.duplicate]).toEqual([202, false]);
      const failed = await ended(id);
      expect(failed).toMatchObject({ status: "failed", provider_status: "failed", error_message: "out of memory" });
      expect(failed.cost_usd).toBeCloseTo(Math.round(1.5 * RATE * 10_000) / 10_000, 4);
      const replay = await post(both);
      expect([replay.status, replay.body.duplicate]).toEqual([202, true]);
      expect((await job(id)).status).toBe("failed");
      await call("PUT", "/api/cloud/providers/replicate", admin.key, { webhook_secret: fake.webhookSecret });
      await fake.finish(training.id, "succeeded").catch(() => {});
    } finally {
      fake.setSendWebhooks(true);
      fake.setRunScript({ startingMs: 150, processingMs: 1200, logEveryMs: 200 });
    }
  }, 40_000);
});

describe("secrets", () => {
  it("never shows the provider token in any answer, log line or audit entry", async () => {
    const audit = await call("GET", "/api/audit?limit=500", admin.key);
    for (const text of [...answers, audit.text, t.lines.join("\n")]) {
      expect(text).not.toContain(TOKEN);
      expect(text).not.toContain(HF_TOKEN);
      expect(text).not.toContain(S3_SECRET);
    }
  });
});
