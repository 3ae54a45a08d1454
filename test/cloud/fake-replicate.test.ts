import http from "node:http";
import type { AddressInfo } from "node:net";
import { zipSync, strToU8 } from "fflate";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ReplicateProvider } from "../../edge/cloud/providers/replicate";
import { startFakeHub, type FakeHub } from "../fakes/fake-hub";
import { closeServer, readBody, startFakeObjectStore, type FakeObjectStore } from "../fakes/fake-object-store";
import { safetensors, signWebhook, startFakeReplicate, type FakeReplicate, type Training } from "../fakes/fake-replicate";
import { until } from "../helpers/wait";

/** The fake answers within milliseconds: poll often, give up after 10 s. */
const waitFor = <T>(read: () => T | undefined | null | false, what: string) => until(what, read, { everyMs: 10, timeoutMs: 10_000 });

// The fake Replicate's own behaviour, which the cloud tests rely on: its run script, webhooks, billing and deliveries.

const TOKEN = "r8_fake_test_token_91c3";
const SECRET = `whsec_${Buffer.from("fake replicate test signing key!").toString("base64")}`;
const FAST = { startingMs: 50, processingMs: 700, logEveryMs: 100 } as const;

let fake: FakeReplicate;
let hub: FakeHub;
let store: FakeObjectStore;
let receiver: http.Server;
let receiverUrl = "";
const received: { headers: http.IncomingHttpHeaders; body: string }[] = [];

const replicate = () =>
  new ReplicateProvider({ baseUrl: fake.url, token: TOKEN, model: "acme/trainer:v1", destination: "acme/models", fetch });

const ended = (id: string) =>
  waitFor(
    () => ["succeeded", "failed", "canceled", "aborted"].includes(fake.trainings.get(id)!.status) && fake.trainings.get(id)!,
    `${id} to end`,
  );

/** A training created with a raw request (any webhook_events_filter, or none). */
async function create(body: Record<string, unknown>): Promise<Training> {
  const res = await fetch(`${fake.url}/v1/models/acme/trainer/versions/v1/trainings`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
    body: JSON.stringify({ destination: "acme/models", input: {}, ...body }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as Training;
}
const hooksOf = (id: string) => received.filter((r) => (JSON.parse(r.body) as Training).id === id);

function streamOf(bytes: Uint8Array): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      controller.enqueue(bytes);
      controller.close();
    },
  });
}

beforeAll(async () => {
  [fake, hub, store] = await Promise.all([
    startFakeReplicate({ token: TOKEN, webhookSecret: SECRET, run: FAST }),
    startFakeHub({ token: "hf_good" }),
    startFakeObjectStore({ buckets: ["models"] }),
  ]);
  receiver = http.createServer(async (req, res) => {
    received.push({ headers: req.headers, body: (await readBody(req)).toString("utf8") });
    res.writeHead(200).end();
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
});
afterAll(async () => {
  await fake.stop();
  await Promise.all([hub.stop(), store.stop(), closeServer(receiver)]);
});
beforeEach(() => {
  fake.setRunScript(FAST);
  fake.setSendWebhooks(true);
  received.length = 0;
});

describe("fake Replicate: a run", () => {
  it("goes starting -> processing -> succeeded with growing logs, predict_time only once it is over, then serves its weights", async () => {
    const created = await create({});
    // As Replicate documents an unfinished run: no logs yet (null), no metrics.
    expect([created.status, created.logs, created.metrics]).toEqual(["starting", null, {}]);
    const { id } = created;
    const statuses: string[] = [];
    const samples: { logs: number; billed: number | null }[] = [];
    for (;;) {
      const job = await replicate().get_job_status(id);
      if (statuses.at(-1) !== job.status) statuses.push(job.status);
      if (job.status === "processing") samples.push({ logs: job.logs.length, billed: job.billed_seconds });
      if (job.status === "succeeded") break;
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    expect(statuses).toEqual(["starting", "processing", "succeeded"]);
    expect(samples.at(-1)!.logs).toBeGreaterThan(samples[0]!.logs);
    // metrics.predict_time (the billed time) only once the run is over.
    expect(samples.every((s) => s.billed === null)).toBe(true);

    const done = await replicate().get_job_status(id);
    expect(done.billed_seconds).toBeGreaterThan(0);
    expect(done.started_at! <= done.completed_at!).toBe(true);
    expect(done.logs).toMatch(/step 1: loss/);
    expect(done.output).toEqual({ weights: `${fake.url}/v1/trainings/${id}/weights` });
    const weights = await fetch(`${fake.url}/v1/trainings/${id}/weights`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    expect(Buffer.from(await weights.arrayBuffer())).toEqual(safetensors(id));
  });

  it("fails with the script's error", async () => {
    fake.setRunScript({ ...FAST, outcome: "failed", error: "CUDA out of memory" });
    const { id } = await replicate().run_job({ job_id: "j2", input: {}, webhook_url: null });
    const training = await ended(id);
    expect([training.status, training.error, training.output]).toEqual(["failed", "CUDA out of memory", null]);
    expect(training.metrics.predict_time).toBeGreaterThan(0);
  });

  it("a manual run processes until the test finishes it", async () => {
    fake.setRunScript({ ...FAST, outcome: "manual" });
    const { id } = await replicate().run_job({ job_id: "j3", input: {}, webhook_url: null });
    await waitFor(() => (fake.trainings.get(id)!.logs ?? "").split("\n").length > 3, "three log lines");
    expect(fake.trainings.get(id)!.status).toBe("processing");
    await fake.finish(id, "succeeded");
    expect(fake.trainings.get(id)!.status).toBe("succeeded");
  });

  it("cancel bills the time processed so far, and billing stops there", async () => {
    fake.setRunScript({ ...FAST, outcome: "manual" });
    const { id } = await replicate().run_job({ job_id: "j4", input: {}, webhook_url: null });
    await waitFor(() => (fake.trainings.get(id)!.logs?.match(/step/g)?.length ?? 0) >= 3, "three log lines");
    const running = await replicate().get_job_status(id);
    expect(running.billed_seconds).toBeNull();
    const cancelled = await replicate().cancel_job(id);
    expect(cancelled.status).toBe("canceled");
    expect(cancelled.billed_seconds).toBeGreaterThan(0.2);
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect((await replicate().get_job_status(id)).billed_seconds).toBe(cancelled.billed_seconds);
    // A cancel during starting bills nothing.
    fake.setRunScript({ ...FAST, startingMs: 60_000 });
    const early = await replicate().run_job({ job_id: "j5", input: {}, webhook_url: null });
    expect((await replicate().cancel_job(early.id)).billed_seconds).toBe(0);
  });

  it("downloads and unzips the dataset archive it is given, recording its entries", async () => {
    const zip = zipSync({ "datasets/cats/1.png": strToU8("png"), "datasets/cats/1.txt": strToU8("a cat"), "config.json": strToU8("{}") });
    const file = await replicate().upload_file("dataset.zip", streamOf(zip), zip.length);
    const { id } = await replicate().run_job({ job_id: "j6", input: { dataset_archive: file.url }, webhook_url: null });
    expect((await ended(id)).status).toBe("succeeded");
    expect(fake.archiveEntries(id).sort()).toEqual(["config.json", "datasets/cats/1.png", "datasets/cats/1.txt"]);
    expect(fake.trainings.get(id)!.logs).toMatch(/^Dataset archive: 3 entries\n/);
  });

  it("fails a run whose dataset archive is gone or not a zip", async () => {
    const gone = await replicate().run_job({ job_id: "j7", input: { dataset_archive: `${fake.url}/v1/files/nope` }, webhook_url: null });
    expect((await ended(gone.id)).error).toBe("could not read the dataset archive: file nope not found");
    const text = await replicate().upload_file("x.zip", streamOf(strToU8("not a zip")), 9);
    const bad = await replicate().run_job({ job_id: "j8", input: { dataset_archive: text.url }, webhook_url: null });
    expect((await ended(bad.id)).status).toBe("failed");
  });
});

describe("fake Replicate: a run that never starts", () => {
  it("is aborted: no started_at, no logs, nothing billed, and its completed webhook says so", async () => {
    fake.setRunScript({ ...FAST, outcome: "aborted" });
    const { id } = await replicate().run_job({ job_id: "a1", input: {}, webhook_url: receiverUrl });
    const training = await ended(id);
    expect(training).toMatchObject({ status: "aborted", started_at: null, logs: null, metrics: {}, output: null });
    expect(training.completed_at).not.toBeNull();
    await waitFor(() => hooksOf(id).some((r) => (JSON.parse(r.body) as Training).status === "aborted"), "the completed webhook");
    const job = await replicate().get_job_status(id);
    expect([job.status, job.billed_seconds, job.logs]).toEqual(["aborted", null, ""]);
  });

  it("a status forced by a test (one Replicate might add) is served as it is", async () => {
    fake.setRunScript({ ...FAST, outcome: "manual" });
    const { id } = await replicate().run_job({ job_id: "a2", input: {}, webhook_url: null });
    fake.setStatus(id, "paused");
    const raw = await fetch(`${fake.url}/v1/trainings/${id}`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    expect(((await raw.json()) as Training).status).toBe("paused");
  });
});

describe("fake Replicate: throttling and lost answers", () => {
  it("answers 429 with Retry-After to the aimed route the given number of times, doing nothing for them", async () => {
    const trainings = fake.trainings.size;
    fake.failNext("trainings.create", { status: 429, times: 2, retryAfter: "3" });
    const post = () =>
      fetch(`${fake.url}/v1/models/acme/trainer/versions/v1/trainings`, {
        method: "POST",
        headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
        body: JSON.stringify({ destination: "acme/models", input: {} }),
      });
    for (let i = 0; i < 2; i++) {
      const res = await post();
      expect([res.status, res.headers.get("retry-after")]).toEqual([429, "3"]);
      expect(await res.json()).toEqual({
        title: "Request was throttled",
        detail: "Request was throttled. Expected available in 3 second.",
        status: 429,
      });
    }
    expect(fake.trainings.size).toBe(trainings);
    expect((await post()).status).toBe(201);
    expect(fake.trainings.size).toBe(trainings + 1);
  });

  it("carries out a request whose answer it then loses", async () => {
    const trainings = fake.trainings.size;
    fake.loseNextAnswer("trainings.create");
    const error = await replicate()
      .run_job({ job_id: "l1", input: {}, webhook_url: null })
      .catch((e: unknown) => e as Error);
    expect(error).toBeInstanceOf(Error);
    expect(fake.trainings.size).toBe(trainings + 1);
  });
});

describe("fake Replicate: webhooks", () => {
  it("posts each change signed per Standard Webhooks, verifiable with the library, ending with the completed training", async () => {
    const { id } = await create({ webhook: receiverUrl, webhook_events_filter: ["start", "output", "logs", "completed"] });
    await ended(id);
    await waitFor(() => received.some((r) => (JSON.parse(r.body) as Training).status === "succeeded"), "the completed webhook");

    const wh = new Webhook(SECRET);
    const payloads = received.map((r) =>
      wh.verify(r.body, {
        "webhook-id": String(r.headers["webhook-id"]),
        "webhook-timestamp": String(r.headers["webhook-timestamp"]),
        "webhook-signature": String(r.headers["webhook-signature"]),
      }),
    ) as Training[];
    expect(payloads[0]!.status).toBe("starting");
    expect(payloads.some((p) => p.status === "processing" && (p.logs ?? "").includes("step"))).toBe(true);
    // The whole training, as Replicate sends it: the input included.
    expect(payloads.every((p) => typeof p.input === "object" && p.input !== null)).toBe(true);
    expect(payloads.at(-1)).toMatchObject({ id, status: "succeeded", output: { weights: expect.any(String) } });
    expect(new Set(received.map((r) => r.headers["webhook-id"])).size).toBe(received.length);
    await waitFor(
      () => fake.webhooks.some((w) => w.event === "completed" && w.status === 200 && w.body.includes(id)),
      "the delivery record",
    );
    expect(() =>
      new Webhook(`whsec_${Buffer.from("another key entirely, not ours").toString("base64")}`).verify(received[0]!.body, {
        "webhook-id": String(received[0]!.headers["webhook-id"]),
        "webhook-timestamp": String(received[0]!.headers["webhook-timestamp"]),
        "webhook-signature": String(received[0]!.headers["webhook-signature"]),
      }),
    ).toThrow();
  });

  it("signs with an HMAC the verifying library accepts, and that this test computes the same way", async () => {
    const body = JSON.stringify({ id: "x", status: "starting" });
    const signature = signWebhook(SECRET, "msg_1", 1_700_000_000, body);
    const key = Buffer.from(SECRET.slice("whsec_".length), "base64");
    const { createHmac } = await import("node:crypto");
    expect(signature).toBe(`v1,${createHmac("sha256", key).update(`msg_1.1700000000.${body}`).digest("base64")}`);
    const at = new Date(1_700_000_000_000);
    expect(new Webhook(SECRET).sign("msg_1", at, body)).toBe(signature);
  });

  it("without a webhook_events_filter sends only output and completed (Replicate's default)", async () => {
    const { id } = await create({ webhook: receiverUrl });
    await ended(id);
    await waitFor(() => fake.webhooks.some((w) => w.event === "completed" && w.body.includes(id)), "the completed webhook");
    const events = fake.webhooks.filter((w) => w.body.includes(`"id":"${id}"`)).map((w) => w.event);
    expect(new Set(events)).toEqual(new Set(["output", "completed"]));
  });

  it("the service's client asks for start and completed only: no logs webhooks", async () => {
    const { id } = await replicate().run_job({ job_id: "w0", input: {}, webhook_url: receiverUrl });
    expect(fake.trainings.get(id)!.webhook_events_filter).toEqual(["start", "completed"]);
    await ended(id);
    await waitFor(() => fake.webhooks.some((w) => w.event === "completed" && w.body.includes(id)), "the completed webhook");
    expect(fake.webhooks.filter((w) => w.body.includes(`"id":"${id}"`)).map((w) => w.event)).toEqual(["start", "completed"]);
  });

  it("sends logs webhooks no more often than Replicate does (fewer than log lines)", async () => {
    fake.setRunScript({ ...FAST, processingMs: 1200, logEveryMs: 50 });
    const { id } = await create({ webhook: receiverUrl, webhook_events_filter: ["logs", "completed"] });
    const training = await ended(id);
    await waitFor(() => received.some((r) => (JSON.parse(r.body) as Training).status === "succeeded"), "the completed webhook");
    const lines = (training.logs ?? "").split("\n").filter((l) => l.startsWith("step")).length;
    const logHooks = fake.webhooks.filter((w) => w.event === "logs" && w.body.includes(`"id":"${id}"`)).length;
    expect(logHooks).toBeGreaterThan(0);
    expect(logHooks).toBeLessThan(lines);
  });

  it("sends nothing while webhooks are off, and only the filtered events otherwise", async () => {
    fake.setSendWebhooks(false);
    const quiet = await replicate().run_job({ job_id: "w3", input: {}, webhook_url: receiverUrl });
    await ended(quiet.id);
    expect(received.filter((r) => r.body.includes(quiet.id))).toEqual([]);

    fake.setSendWebhooks(true);
    const res = await fetch(`${fake.url}/v1/models/acme/trainer/versions/v1/trainings`, {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
      body: JSON.stringify({ destination: "acme/models", input: {}, webhook: receiverUrl, webhook_events_filter: ["completed"] }),
    });
    const { id } = (await res.json()) as Training;
    await ended(id);
    await waitFor(() => received.some((r) => r.body.includes(id)), "the completed webhook");
    expect(received.filter((r) => r.body.includes(id)).map((r) => (JSON.parse(r.body) as Training).status)).toEqual(["succeeded"]);
  });

  it("signs with a rotated secret from the rotation on", async () => {
    const rotated = `whsec_${Buffer.from("the rotated signing key of test!").toString("base64")}`;
    fake.setWebhookSecret(rotated);
    try {
      expect(await replicate().webhook_secret()).toBe(rotated);
      const { id } = await replicate().run_job({ job_id: "w4", input: {}, webhook_url: receiverUrl });
      await waitFor(() => received.find((r) => r.body.includes(id)), "the start webhook");
      const first = received.find((r) => r.body.includes(id))!;
      const headers = {
        "webhook-id": String(first.headers["webhook-id"]),
        "webhook-timestamp": String(first.headers["webhook-timestamp"]),
        "webhook-signature": String(first.headers["webhook-signature"]),
      };
      expect(() => new Webhook(rotated).verify(first.body, headers)).not.toThrow();
      expect(() => new Webhook(SECRET).verify(first.body, headers)).toThrow();
      await ended(id);
    } finally {
      fake.setWebhookSecret(SECRET);
    }
  });
});

describe("fake Replicate: deliveries", () => {
  it("puts the model in the S3 bucket the job's environment names, with its credentials", async () => {
    const env = {
      SERVICE_JOB_ID: "cloud-s3",
      RESULT_DESTINATION: "s3",
      RESULT_S3_ENDPOINT: store.url,
      RESULT_S3_BUCKET: "models",
      RESULT_S3_PREFIX: "runs/cloud-s3/",
      RESULT_S3_REGION: "auto",
      AWS_ACCESS_KEY_ID: "AKIDJOB",
      AWS_SECRET_ACCESS_KEY: "secret",
    };
    const { id } = await replicate().run_job({ job_id: "d1", input: { env }, webhook_url: null });
    const training = await ended(id);
    expect(training.status).toBe("succeeded");
    expect(training.output).toEqual({ weights: `${store.url}/models/runs/cloud-s3/model.safetensors` });
    const object = store.objects.get("models/runs/cloud-s3/model.safetensors")!;
    expect(object.bytes).toEqual(safetensors(id));
    expect(object.accessKeyId).toBe("AKIDJOB");
    expect(store.requests.at(-1)!.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDJOB\//);
  });

  it("reads the trainer's flat inputs (edge/cloud/trainer-input.ts) as the service sends them", async () => {
    const input = {
      service_job_id: "cloud-flat",
      result_destination: "storage",
      result_s3_endpoint: store.url,
      result_s3_bucket: "models",
      result_s3_prefix: "flat/",
      result_s3_region: "auto",
      result_s3_access_key_id: "AKIDFLAT",
      result_s3_secret_access_key: "secret",
    };
    const { id } = await replicate().run_job({ job_id: "d0", input, webhook_url: null });
    expect((await ended(id)).output).toEqual({ weights: `${store.url}/models/flat/model.safetensors` });
    expect(store.objects.get("models/flat/model.safetensors")!.accessKeyId).toBe("AKIDFLAT");
  });

  it("commits the model to the hub with the job's token", async () => {
    const env = {
      SERVICE_JOB_ID: "cloud-hub",
      RESULT_DESTINATION: "hub",
      HF_TOKEN: "hf_good",
      HUB_MODEL_ID: "acme/lora",
      HF_ENDPOINT: hub.url,
    };
    const { id } = await replicate().run_job({ job_id: "d2", input: { env }, webhook_url: null });
    expect((await ended(id)).status).toBe("succeeded");
    const commit = hub.commits.at(-1)!;
    expect(commit).toMatchObject({ repo: "acme/lora", revision: "main", summary: `Training ${id}` });
    expect(commit.files).toEqual([{ path: "model.safetensors", bytes: safetensors(id) }]);
    expect(hub.requests.at(-1)!.authorization).toBe("Bearer hf_good");
  });

  it("fails the run when the delivery is refused, with the reason", async () => {
    const commits = hub.commits.length;
    const badHub = { RESULT_DESTINATION: "hub", HF_TOKEN: "hf_bad", HUB_MODEL_ID: "acme/lora", HF_ENDPOINT: hub.url };
    const one = await replicate().run_job({ job_id: "d3", input: { env: badHub }, webhook_url: null });
    const failedHub = await ended(one.id);
    expect(failedHub.status).toBe("failed");
    expect(failedHub.error).toBe('Result delivery failed: the hub answered 401: {"error":"Invalid credentials in Authorization header"}');
    expect(hub.commits.length).toBe(commits);

    const badBucket = {
      RESULT_DESTINATION: "storage",
      RESULT_S3_ENDPOINT: store.url,
      RESULT_S3_BUCKET: "nope",
      RESULT_S3_PREFIX: "",
      RESULT_S3_REGION: "auto",
      AWS_ACCESS_KEY_ID: "AKID",
      AWS_SECRET_ACCESS_KEY: "secret",
    };
    const two = await replicate().run_job({ job_id: "d4", input: { env: badBucket }, webhook_url: null });
    expect((await ended(two.id)).error).toMatch(
      /^Result delivery failed: S3 PutObject of nope\/model\.safetensors at .* failed \(404\): NoSuchBucket/,
    );

    const three = await replicate().run_job({ job_id: "d5", input: { env: { RESULT_DESTINATION: "s3" } }, webhook_url: null });
    expect((await ended(three.id)).error).toBe("Result delivery failed: RESULT_S3_ENDPOINT is not set in the job's environment");
  });
});

describe("fake Replicate: what careless clients get", () => {
  it("refuses every /v1 route without the bearer token", async () => {
    for (const [method, path] of [
      ["GET", "/v1/account"],
      ["GET", "/v1/trainings"],
      ["POST", "/v1/files"],
      ["GET", "/v1/webhooks/default/secret"],
    ] as const) {
      const res = await fetch(`${fake.url}${path}`, { method, headers: { Authorization: "Bearer wrong" } });
      expect(res.status).toBe(401);
      expect(((await res.json()) as { detail: string }).detail).toBe("You did not pass a valid authentication token");
    }
  });

  it("answers 400 to a multipart body without a content part, and 422 to a training without a destination", async () => {
    const form = new FormData();
    form.append("other", new Blob(["x"]), "x.zip");
    const upload = await fetch(`${fake.url}/v1/files`, { method: "POST", headers: { Authorization: `Bearer ${TOKEN}` }, body: form });
    expect([upload.status, ((await upload.json()) as { detail: string }).detail]).toEqual([
      400,
      'The multipart body has no "content" part',
    ]);

    const training = await fetch(`${fake.url}/v1/models/acme/trainer/versions/v1/trainings`, {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
      body: JSON.stringify({ input: {} }),
    });
    expect(training.status).toBe(422);
  });

  it("finds the account's models and refuses a training into a model that does not exist (404), creating nothing", async () => {
    const get = (model: string) => fetch(`${fake.url}/v1/models/${model}`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    const own = await get("acme/faces");
    expect([own.status, ((await own.json()) as { owner: string }).owner]).toEqual([200, "acme"]);
    const elsewhere = await get("someone-else/faces");
    expect([elsewhere.status, await elsewhere.json()]).toEqual([404, { detail: "Not found.", status: 404 }]);
    const before = fake.trainings.size;
    const training = await fetch(`${fake.url}/v1/models/acme/trainer/versions/v1/trainings`, {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
      body: JSON.stringify({ destination: "someone-else/faces", input: {} }),
    });
    expect([training.status, ((await training.json()) as { detail: string }).detail]).toEqual([
      404,
      "The specified training destination does not exist",
    ]);
    expect(fake.trainings.size).toBe(before);
    expect(await replicate().model_exists("acme/faces")).toBe(true);
    expect(await replicate().model_exists("someone-else/faces")).toBe(false);
  });

  it("parses a multipart upload made by another client (FormData) byte-exact", async () => {
    const bytes = new Uint8Array(5000).map((_, i) => (i * 7) % 256);
    const form = new FormData();
    form.append("content", new Blob([bytes], { type: "application/zip" }), "d.zip");
    const res = await fetch(`${fake.url}/v1/files`, { method: "POST", headers: { Authorization: `Bearer ${TOKEN}` }, body: form });
    const file = (await res.json()) as { id: string; size: number; urls: { get: string } };
    expect([res.status, file.size]).toEqual([201, 5000]);
    expect(fake.files.get(file.id)!.bytes).toEqual(Buffer.from(bytes));
  });
});
