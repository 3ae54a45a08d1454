// Cloud jobs against Replicate as it documents itself (issue 27, items 1, 3, 4 and the budget of
// Build 5), over real HTTP: the real local stack against the fake Replicate
// (test/fakes/fake-replicate.ts). What the user sees is asserted: the job's status and reason,
// its cost, its events, and what reached the provider (a training created once per job).
import { fakeReplicateSettings } from "../helpers/fake-provider";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { budgetVerdict } from "../../edge/cloud/budget";
import { signWebhook, startFakeReplicate, type FakeReplicate, type Training } from "../fakes/fake-replicate";
import { until } from "../helpers/wait";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

const TOKEN = "r8_behaviourtesttoken0123456789abcd";
const RATE = 0.0014; // gpu-a100-large, the default hardware
const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5e2b3b40000000049454e44ae426082",
  "hex",
);
const NORMAL = { startingMs: 150, processingMs: 900, logEveryMs: 200 } as const;

let t: TestStack;
let fake: FakeReplicate;
let admin: { key: string; cookie: string };
let alice: { key: string; id: number };

const call = async (method: string, path: string, key: string, json?: unknown) =>
  t.call(method, path, { auth: { key }, ...(json === undefined ? {} : { json }) });
const job = async (id: string) => (await call("GET", `/api/cloud/jobs/${id}`, alice.key)).body;
const ended = (id: string) =>
  until(
    `${id} to end with a final cost`,
    async () => {
      const j = await job(id);
      return ["completed", "failed", "cancelled"].includes(j.status) && j.cost_final && j.phase === "finished" ? j : null;
    },
    { timeoutMs: 30_000 },
  );
async function submit(body: Record<string, unknown> = {}): Promise<string> {
  const reply = await call("POST", "/api/cloud/jobs/submit", alice.key, { config_name: "faces", ...body });
  expect(reply.status, reply.text).toBe(200);
  return reply.body.job_id as string;
}
const trainingOf = (id: string) => [...fake.trainings.values()].find((x) => x.input.service_job_id === id);
const processing = (id: string) =>
  until(`${id} to process at the provider`, () => (trainingOf(id)?.status === "processing" ? trainingOf(id)! : null));
const since = (before: number, method: string, path: RegExp) =>
  fake.requests.slice(before).filter((r) => r.method === method && path.test(r.path));
const CREATE = /^\/v1\/models\/[^/]+\/[^/]+\/versions\/[^/]+\/trainings$/;
/** A webhook signed as Replicate signs it (Standard Webhooks, an HMAC of the fake's own). */
async function signedWebhook(msgId: string, body: string) {
  const at = Math.floor(Date.now() / 1000);
  return t.call("POST", "/api/webhooks/replicate", {
    body,
    headers: {
      "content-type": "application/json",
      "webhook-id": msgId,
      "webhook-timestamp": String(at),
      "webhook-signature": signWebhook(fake.webhookSecret, msgId, at, body),
    },
  });
}
const events = async (id: string) =>
  (await call("GET", `/api/training/events?job_id=${id}`, alice.key)).body.events as { type: string; [k: string]: unknown }[];

beforeAll(async () => {
  fake = await startFakeReplicate({ token: TOKEN, run: NORMAL });
  t = await startTestStack(undefined, { REPLICATE_API_TOKEN: TOKEN });
  admin = await setUpAdmin(t);
  alice = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "alice");
  const setup = [
    await call("PUT", "/api/cloud/providers/replicate", admin.key, fakeReplicateSettings(fake, { http_timeout: 2 })),
    await call("PUT", "/api/cloud/settings", admin.key, { public_url: t.base, poll_interval_seconds: 1, consent_mode: "allow" }),
    await call("POST", "/api/queue/concurrency", admin.key, { user_max_concurrent: 10 }),
    await call("PUT", "/api/queue/approval-rules", admin.key, { cloud_cost_threshold: null }),
    await call("POST", "/api/configs/environments", alice.key, { name: "faces", model_family: "flux", model_type: "lora" }),
  ];
  for (const reply of setup) expect(reply.status, reply.text).toBeLessThan(300);
  const form = new FormData();
  form.set("target_path", "faces");
  form.append("files[]", new Blob([new Uint8Array(PNG)]), "001.png");
  form.append("files[]", new Blob(["a face"]), "001.txt");
  const uploaded = await t.call("POST", "/api/datasets/upload", { body: form, auth: { key: alice.key } });
  expect(uploaded.status, uploaded.text).toBe(201);
}, 60_000);
afterAll(async () => {
  await Promise.all([t?.stop(), fake?.stop()]);
});

describe("every training status Replicate documents", () => {
  it("a training aborted before it started ends the job failed with the reason, billing nothing, and its archive is deleted", async () => {
    fake.setRunScript({ ...NORMAL, startingMs: 300, outcome: "aborted" });
    try {
      const id = await submit();
      const done = await ended(id);
      expect(done).toMatchObject({ status: "failed", provider_status: "aborted", cost_usd: 0, cost_final: true, billed_seconds: 0 });
      expect(done.error_message).toMatch(/aborted the training before it started running.*nothing was billed/);
      await until("the archive to be deleted", async () => (await job(id)).archive_deleted);
      expect(fake.files.size).toBe(0);
    } finally {
      fake.setRunScript(NORMAL);
    }
  });

  it("a status the client does not know ends the job failed after a bounded number of reports, naming it, with a cancel sent", async () => {
    fake.setRunScript({ ...NORMAL, outcome: "manual" });
    try {
      const id = await submit();
      const training = await processing(id);
      const before = fake.requests.length;
      fake.setStatus(training.id, "paused");
      const done = await ended(id);
      expect(done.status).toBe("failed");
      expect(done.error_message).toMatch(/status as "paused", which this service does not know, 5 times/);
      expect(since(before, "POST", new RegExp(`^/v1/trainings/${training.id}/cancel$`)).length).toBe(1);
      expect(since(before, "GET", new RegExp(`^/v1/trainings/${training.id}$`)).length).toBeGreaterThanOrEqual(4);
    } finally {
      fake.setRunScript(NORMAL);
    }
  });

  it("webhooks with a status the client does not know are counted the same way: the job fails after 5, never applied", async () => {
    fake.setRunScript({ ...NORMAL, outcome: "manual" });
    // No poll for minutes: only the webhooks move the job.
    await call("PUT", "/api/cloud/settings", admin.key, { poll_interval_seconds: 300 });
    try {
      const id = await submit();
      const training = await processing(id);
      await until("the training id to be recorded", async () => (await job(id)).provider_job_id === training.id);
      const body = JSON.stringify({ ...training, status: "rebooting" });
      for (let i = 0; i < 5; i++) {
        expect((await job(id)).status).toBe("running");
        const hook = await signedWebhook(`msg_unknown_${id}_${i}`, body);
        expect(hook.status, hook.text).toBe(202);
      }
      const done = await ended(id);
      expect(done.status).toBe("failed");
      expect(done.error_message).toMatch(/status as "rebooting", which this service does not know, 5 times/);
      expect(fake.trainings.get(training.id)!.status).toBe("canceled");
    } finally {
      await call("PUT", "/api/cloud/settings", admin.key, { poll_interval_seconds: 1 });
      fake.setRunScript(NORMAL);
    }
  });

  it("cancelling a job whose status the client does not know ends it cancelled, without looping", async () => {
    fake.setRunScript({ ...NORMAL, outcome: "manual" });
    try {
      const id = await submit();
      const training = await processing(id);
      fake.setStatus(training.id, "paused");
      const cancel = await call("POST", `/api/cloud/jobs/${id}/cancel`, alice.key);
      expect([cancel.status, cancel.body.status]).toEqual([200, "cancelled"]);
      const done = await ended(id);
      expect(done.status).toBe("cancelled");
      expect(done.phase).toBe("finished");
    } finally {
      fake.setRunScript(NORMAL);
    }
  });
});

describe("throttling and lost answers", () => {
  it("a throttled upload and a throttled create are sent again after Retry-After: the job completes with one training", async () => {
    const before = fake.requests.length;
    fake.failNext("files.create", { status: 429, retryAfter: "1" });
    fake.failNext("trainings.create", { status: 429, retryAfter: "1" });
    const id = await submit();
    const done = await ended(id);
    expect(done.status).toBe("completed");
    expect(since(before, "POST", /^\/v1\/files$/).length).toBe(2);
    expect(since(before, "POST", CREATE).length).toBe(2);
    expect([...fake.trainings.values()].filter((x) => x.input.service_job_id === id).length).toBe(1);
  });

  it("a create whose answer was lost is never sent again: the job fails saying what to check, and the archive is deleted", async () => {
    const before = fake.requests.length;
    fake.loseNextAnswer("trainings.create");
    const id = await submit();
    const done = await ended(id);
    expect(done.status).toBe("failed");
    expect(done.error_message).toMatch(/answer to the training create was lost.*not sent again.*dashboard/);
    expect(since(before, "POST", CREATE).length).toBe(1);
    expect([...fake.trainings.values()].filter((x) => x.input.service_job_id === id).length).toBe(1);
    await until("the archive to be deleted", async () => (await job(id)).archive_deleted);
  });

  it("a job that fails after its upload has its archive deleted at the provider", async () => {
    const before = fake.requests.length;
    fake.failNext("trainings.create", { status: 422, detail: "destination: the model acme/faces does not exist" });
    const id = await submit();
    const done = await ended(id);
    expect(done.status).toBe("failed");
    expect(done.error_message).toContain("Replicate answered 422: destination: the model acme/faces does not exist");
    const uploads = since(before, "POST", /^\/v1\/files$/);
    expect(uploads.length).toBe(1);
    await until("the archive to be deleted", async () => (await job(id)).archive_deleted);
    expect(since(before, "DELETE", /^\/v1\/files\//).length).toBe(1);
    expect(fake.files.size).toBe(0);
  });
});

describe("money enforced while a job runs", () => {
  it("polling: a job is cancelled at the provider once its billed cost reaches what is left of the spending limit", async () => {
    const rates = (await call("GET", "/api/cloud/rates", admin.key)).body;
    fake.setRunScript({ ...NORMAL, outcome: "manual" });
    try {
      // $1 a second, so that two billed seconds make a visible sum.
      expect((await call("PUT", "/api/cloud/rates", admin.key, { ...rates, "gpu-a100-large": 1 })).status).toBe(200);
      expect((await call("PUT", "/api/cloud/settings", admin.key, { spending_limit_usd: 100_000, spending_period: "month" })).status).toBe(
        200,
      );
      const id = await submit();
      const training = await processing(id);
      const estimate = (await job(id)).estimated_cost as number;
      // The limit lowered while it runs: what is left for it is $2.
      const dry = await call("POST", "/api/cloud/jobs/submit", alice.key, { config_name: "faces", dry_run: true });
      const others = dry.body.estimate.spending.committed_usd - estimate;
      expect((await call("PUT", "/api/cloud/settings", admin.key, { spending_limit_usd: others + 2 })).status).toBe(200);
      const done = await ended(id);
      expect(done.status).toBe("cancelled");
      expect(done.error_message).toMatch(
        /^cancelled by the service: its billed cost \$[\d.]+ reached what was left for it \(\$2\.00\) of the month's spending limit of \$[\d.]+;/,
      );
      expect(fake.trainings.get(training.id)!.status).toBe("canceled");
      const budget = (await events(id)).find((e) => e.type === "cloud.budget_exceeded")!;
      expect(budget).toMatchObject({ reason: "spending_limit", budget_usd: 2 });
      expect(budget.cost_usd as number).toBeGreaterThanOrEqual(2);
      expect(done.cost_usd).toBeGreaterThan(0);
    } finally {
      await call("PUT", "/api/cloud/settings", admin.key, { spending_limit_usd: null });
      await call("PUT", "/api/cloud/rates", admin.key, rates);
      fake.setRunScript(NORMAL);
    }
  });

  it("webhook: a status update showing the billed cost past the approved estimate cancels the job at once", async () => {
    fake.setRunScript({ ...NORMAL, outcome: "manual" });
    // No poll for minutes: only the webhook can move the job.
    await call("PUT", "/api/cloud/settings", admin.key, { poll_interval_seconds: 300 });
    try {
      const id = await submit();
      const training = await processing(id);
      await until("the training id to be recorded", async () => (await job(id)).provider_job_id === training.id);
      // Replicate's clock says the run started two hours ago: 7200 s x $0.0014 = $10.08, past the $5.04 estimate.
      const body = JSON.stringify({
        ...training,
        logs: "step 1\n",
        started_at: new Date(Date.now() - 7_200_000).toISOString(),
      } satisfies Training);
      const hook = await signedWebhook(`msg_budget_${id}`, body);
      expect(hook.status, hook.text).toBe(202);
      const done = await ended(id);
      expect(done.status).toBe("cancelled");
      expect(done.error_message).toMatch(/^cancelled by the service: its billed cost \$10\.08 reached its approved estimate of \$5\.04/);
      expect(fake.trainings.get(training.id)!.status).toBe("canceled");
      expect((await events(id)).find((e) => e.type === "cloud.budget_exceeded")).toMatchObject({
        reason: "estimate",
        cost_usd: 10.08,
        budget_usd: 5.04,
        estimate_usd: 3600 * RATE,
      });
      const entry = (await call("GET", `/api/queue/jobs/${id}`, alice.key)).body;
      expect(entry.error_message).toBe(done.error_message);
    } finally {
      await call("PUT", "/api/cloud/settings", admin.key, { poll_interval_seconds: 1 });
      fake.setRunScript(NORMAL);
    }
  });
});

describe("budgetVerdict", () => {
  const figures = { costUsd: 1, estimateUsd: 5, limitUsd: null, period: "month", committedUsd: 0 } as const;

  it("is null while the cost is under the estimate, and before anything is billed", () => {
    expect(budgetVerdict(figures)).toBeNull();
    expect(budgetVerdict({ ...figures, costUsd: 0, estimateUsd: 0 })).toBeNull();
  });

  it("reaching the estimate exactly counts", () => {
    expect(budgetVerdict({ ...figures, costUsd: 5 })).toMatchObject({ reason: "estimate", capUsd: 5, costUsd: 5 });
  });

  it("holds the cost against what is left of the limit once the others' commitments are taken off", () => {
    // Committed $68: this job's $60 estimate and $8 of others; a $10 limit leaves it $2.
    const over = { costUsd: 2, estimateUsd: 60, limitUsd: 10, period: "week", committedUsd: 68 } as const;
    expect(budgetVerdict(over)).toMatchObject({ reason: "spending_limit", capUsd: 2 });
    expect(budgetVerdict({ ...over, costUsd: 1.9999 })).toBeNull();
    // A limit with room for more than the estimate: the estimate is the budget.
    expect(budgetVerdict({ ...over, limitUsd: 1000, costUsd: 60 })).toMatchObject({ reason: "estimate", capUsd: 60 });
  });
});
