import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  parseModelRef,
  parseTraining,
  REPLICATE_WEBHOOKS,
  ReplicateProvider,
  retryAfterMs,
  type ReplicateOptions,
} from "../../edge/cloud/providers/replicate";
import { webhookReader } from "../../edge/cloud/registry";
import { ProviderError, UnknownStatusError } from "../../edge/cloud/types";
import { closeServer } from "../fakes/fake-object-store";
import { startFakeReplicate, type FakeReplicate } from "../fakes/fake-replicate";
import { until } from "../helpers/wait";

/** The fake answers within milliseconds: poll often, give up after 10 s. */
const waitFor = <T>(read: () => T | undefined | null | false, what: string) => until(what, read, { everyMs: 10, timeoutMs: 10_000 });

// The hosted provider's client against the fake Replicate over real HTTP, with the global fetch as its OutboundFetch.

const TOKEN = "r8_client_test_token_5f2a";
let fake: FakeReplicate;

function client(overrides: Partial<ReplicateOptions> = {}) {
  return new ReplicateProvider({
    baseUrl: fake.url,
    token: TOKEN,
    model: "acme/trainer:v1",
    destination: "acme/models",
    fetch,
    ...overrides,
  });
}

async function providerError(call: Promise<unknown>): Promise<ProviderError> {
  const error = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ProviderError);
  return error as ProviderError;
}

function streamOf(bytes: Uint8Array, chunk = 16 * 1024): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(at, at + chunk));
      at += chunk;
    },
  });
}

beforeAll(async () => {
  fake = await startFakeReplicate({ token: TOKEN, run: { outcome: "manual", startingMs: 50, logEveryMs: 50 }, pageSize: 2 });
});
afterAll(async () => {
  await fake.stop();
});

describe("ReplicateProvider", () => {
  it("names itself replicate, with cost tracking and live logs", () => {
    const replicate = client();
    expect([replicate.provider_name, replicate.supports_cost_tracking, replicate.supports_live_logs]).toEqual(["replicate", true, true]);
  });

  it("validates credentials: the account when the token is good, a refusal (not a throw) when it is not", async () => {
    const good = await client().validate_credentials();
    expect(good).toMatchObject({ valid: true, message: "account acme (organization)" });
    expect(good.latency_ms).toBeGreaterThanOrEqual(0);

    const refused = await client({ token: "r8_wrong" }).validate_credentials();
    expect(refused).toMatchObject({ valid: false, message: "the API token was refused" });

    const before = fake.requests.length;
    expect(await client({ token: "" }).validate_credentials()).toEqual({ valid: false, message: "no API token is set", latency_ms: 0 });
    expect(fake.requests.length).toBe(before);
  });

  it("reports an unreachable provider as invalid credentials with the reason, without throwing", async () => {
    fake.setOutage("refuse");
    try {
      const check = await client().validate_credentials();
      expect(check.valid).toBe(false);
      expect(check.message).toMatch(/^Replicate could not be reached: /);
    } finally {
      fake.setOutage(null);
    }
  });

  it("creates a training on the model version with the destination, input, webhook and events filter, and the documented headers", async () => {
    const job = await client().run_job({
      job_id: "cloud-1",
      input: { config: "{}", dataset_archive: null },
      webhook_url: "https://svc.example/api/webhooks/replicate",
    });
    expect(job).toMatchObject({ status: "starting", logs: "", billed_seconds: null, started_at: null, completed_at: null, error: null });
    const request = fake.requests.at(-1)!;
    expect(request.method).toBe("POST");
    expect(request.path).toBe("/v1/models/acme/trainer/versions/v1/trainings");
    expect(request.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(request.headers["user-agent"]).toBe("training-service");
    expect(request.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(request.bodyBytes.toString())).toEqual({
      destination: "acme/models",
      input: { config: "{}", dataset_archive: null },
      webhook: "https://svc.example/api/webhooks/replicate",
      // Replicate's default would be output and completed; the service asks for start and completed, never logs (polls read them).
      webhook_events_filter: ["start", "completed"],
    });
    expect(fake.trainings.get(job.id)?.webhook).toBe("https://svc.example/api/webhooks/replicate");
  });

  it("asks for no webhook when the job has no webhook URL (polling only)", async () => {
    const job = await client().run_job({ job_id: "cloud-2", input: {}, webhook_url: null });
    const sent = JSON.parse(fake.requests.at(-1)!.bodyBytes.toString()) as Record<string, unknown>;
    expect(sent).toEqual({ destination: "acme/models", input: {} });
    expect(fake.trainings.get(job.id)?.webhook).toBeUndefined();
  });

  it("refuses to run with a model or destination it cannot name, before any request, saying which setting to fix", async () => {
    const before = fake.requests.length;
    const badModel = await providerError(client({ model: "acme/trainer" }).run_job({ job_id: "x", input: {}, webhook_url: null }));
    expect(badModel.message).toBe(
      'The training model must be a Replicate model version "owner/name:version", not "acme/trainer" (the provider\'s training_model setting)',
    );
    expect([badModel.status, badModel.countsAsFailure]).toEqual([null, false]);
    const badDestination = await providerError(client({ destination: "../x" }).run_job({ job_id: "x", input: {}, webhook_url: null }));
    expect(badDestination.message).toMatch(/training_destination/);
    expect(fake.requests.length).toBe(before);
  });

  it("reads a training's status, billed seconds and logs while it runs, and cancels it billing the time used", async () => {
    const replicate = client();
    const job = await replicate.run_job({ job_id: "cloud-3", input: {}, webhook_url: null });
    await waitFor(() => fake.trainings.get(job.id)?.logs?.includes("step 2"), "two log lines");
    const running = await replicate.get_job_status(job.id);
    expect(running.status).toBe("processing");
    expect(running.started_at).not.toBeNull();
    // Replicate gives metrics.predict_time once the run is over.
    expect(running.billed_seconds).toBeNull();
    expect(await replicate.get_job_logs(job.id)).toMatch(/^step 1: .*\nstep 2: /);

    const cancelled = await replicate.cancel_job(job.id);
    expect(cancelled.status).toBe("canceled");
    expect(cancelled.billed_seconds).toBeGreaterThan(0);
    expect(cancelled.completed_at).not.toBeNull();
    expect(fake.requests.at(-1)).toMatchObject({ method: "POST", path: `/v1/trainings/${job.id}/cancel` });
    // Billing stopped at the cancel.
    expect((await replicate.get_job_status(job.id)).billed_seconds).toBe(cancelled.billed_seconds);
  });

  it("lists trainings newest first, following next pages up to the limit", async () => {
    const replicate = client();
    for (let i = 0; i < 3; i++) await replicate.run_job({ job_id: `list-${i}`, input: { i }, webhook_url: null });
    const newest = [...fake.trainings.keys()].reverse();

    const pagesBefore = fake.requests.filter((r) => r.path === "/v1/trainings").length;
    const three = await replicate.list_jobs(3);
    expect(three.map((j) => j.id)).toEqual(newest.slice(0, 3));
    expect(fake.requests.filter((r) => r.path === "/v1/trainings").length - pagesBefore).toBe(2);

    expect((await replicate.list_jobs()).map((j) => j.id)).toEqual(newest);
    expect(await replicate.list_jobs(0)).toEqual([]);
  });

  it("streams a file upload as multipart that arrives byte-exact with an exact content-length, reporting progress up to its size", async () => {
    const bytes = new Uint8Array(randomBytes(300_000));
    const progress: number[] = [];
    const file = await client().upload_file('data "set".zip', streamOf(bytes), bytes.length, (sent) => progress.push(sent));

    expect(file.size).toBe(bytes.length);
    expect(file.url).toBe(`${fake.url}/v1/files/${file.id}`);
    const stored = fake.files.get(file.id)!;
    expect(Buffer.compare(stored.bytes, Buffer.from(bytes))).toBe(0);
    expect(stored.name).toBe("data %22set%22.zip");
    expect(stored.contentType).toBe("application/zip");
    const request = fake.requests.at(-1)!;
    expect(request.headers["content-length"]).toBe(String(request.bodyBytes.length));
    expect(request.headers["transfer-encoding"]).toBeUndefined();
    expect(request.headers["content-type"]).toMatch(/^multipart\/form-data; boundary=/);
    expect(progress.at(-1)).toBe(bytes.length);
    expect(progress).toEqual([...progress].sort((a, b) => a - b));

    const download = await fetch(`${file.url}/download`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    expect(Buffer.compare(Buffer.from(await download.arrayBuffer()), Buffer.from(bytes))).toBe(0);
  });

  it("fails an upload whose body is shorter or longer than announced, storing nothing", async () => {
    const filesBefore = fake.files.size;
    const short = await providerError(client().upload_file("a.zip", streamOf(new Uint8Array(100)), 200));
    expect([short.message, short.status, short.countsAsFailure]).toEqual([
      "The upload body had 100 bytes, not the 200 announced",
      null,
      false,
    ]);
    const long = await providerError(client().upload_file("b.zip", streamOf(new Uint8Array(300)), 200));
    expect([long.message, long.status, long.countsAsFailure]).toEqual([
      "The upload body is longer than the 200 bytes announced",
      null,
      false,
    ]);
    expect(fake.files.size).toBe(filesBefore);
  });

  it("deletes a file, and a file already gone counts as deleted", async () => {
    const replicate = client();
    const file = await replicate.upload_file("c.zip", streamOf(new Uint8Array(10)), 10);
    await replicate.delete_file(file.id);
    expect(fake.files.has(file.id)).toBe(false);
    expect(fake.requests.at(-1)).toMatchObject({ method: "DELETE", path: `/v1/files/${file.id}` });
    await expect(replicate.delete_file(file.id)).resolves.toBeUndefined();
  });

  it("reads the webhook signing secret", async () => {
    expect(await client().webhook_secret()).toBe(fake.webhookSecret);
  });
});

describe("ReplicateProvider errors", () => {
  it("a refused token is a 401 ProviderError, not counted by the breaker, without the token", async () => {
    const error = await providerError(client({ token: "r8_wrong_secret" }).get_job_status("abc"));
    expect(error.message).toBe("Replicate answered 401: You did not pass a valid authentication token");
    expect([error.status, error.countsAsFailure]).toEqual([401, false]);
    expect(error.message).not.toContain("r8_wrong_secret");
  });

  it("an unknown training is a 404 ProviderError not counted by the breaker", async () => {
    const error = await providerError(client().get_job_status("no-such-training"));
    expect([error.message, error.status, error.countsAsFailure]).toEqual(["Replicate answered 404: Not found", 404, false]);
  });

  it("a path-like id stays one path segment", async () => {
    const error = await providerError(client().get_job_status("../account"));
    expect(error.status).toBe(404);
    expect(fake.requests.at(-1)!.path).toBe("/v1/trainings/..%2Faccount");
  });

  it("a 500 and a dropped connection are counted by the breaker", async () => {
    fake.setOutage("500");
    try {
      const error = await providerError(client().list_jobs());
      expect([error.message, error.status, error.countsAsFailure]).toEqual([
        "Replicate answered 500: Internal server error (simulated outage)",
        500,
        true,
      ]);
    } finally {
      fake.setOutage(null);
    }
    fake.setOutage("refuse");
    try {
      const error = await providerError(client().get_job_status("abc"));
      expect(error.message).toMatch(/^Replicate could not be reached: /);
      expect([error.status, error.countsAsFailure]).toEqual([null, true]);
    } finally {
      fake.setOutage(null);
    }
  });

  describe("against a provider (or proxy) answering what it should not", () => {
    let server: http.Server;
    let base = "";
    let reply: (req: http.IncomingMessage, res: http.ServerResponse) => void = () => {};
    beforeAll(async () => {
      server = http.createServer((req, res) => reply(req, res));
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(() => closeServer(server));

    it("a 200 that is not JSON is a ProviderError counted by the breaker", async () => {
      reply = (_req, res) => res.writeHead(200, { "Content-Type": "text/html" }).end("<html>Captive portal</html>");
      const error = await providerError(client({ baseUrl: base }).get_job_status("abc"));
      expect(error.message).toBe("Replicate answered 200 with a body that is not JSON: <html>Captive portal</html>");
      expect([error.status, error.countsAsFailure]).toEqual([200, true]);
    });

    it("a training answer without an id or with an unknown status is a ProviderError, never a crash", async () => {
      reply = (_req, res) => res.writeHead(200).end(JSON.stringify({ status: "processing" }));
      expect((await providerError(client({ baseUrl: base }).get_job_status("abc"))).message).toBe("Replicate's training has no id");
      reply = (_req, res) => res.writeHead(200).end(JSON.stringify({ id: "abc", status: "exploded" }));
      const error = await providerError(client({ baseUrl: base }).get_job_status("abc"));
      expect(error.message).toBe('Replicate\'s training abc has an unknown status "exploded"');
      expect([error.status, error.countsAsFailure]).toEqual([200, true]);
      // Typed, so the cloud job can count such reports and give up rather than ask for ever.
      expect(error).toBeInstanceOf(UnknownStatusError);
      expect([(error as UnknownStatusError).trainingId, (error as UnknownStatusError).reported]).toEqual(["abc", '"exploded"']);
    });

    it("a 502 HTML page becomes a short detail", async () => {
      reply = (_req, res) => res.writeHead(502).end(`<html><body>Bad gateway${" ".repeat(1000)}${"x".repeat(1000)}</body></html>`);
      const error = await providerError(client({ baseUrl: base }).cancel_job("abc"));
      expect(error.message.length).toBeLessThan(400);
      expect(error.message).toMatch(/^Replicate answered 502: <html><body>Bad gateway x+\.\.\.$/);
      expect([error.status, error.countsAsFailure]).toEqual([502, true]);
    });

    it("never repeats the token even when the provider echoes it", async () => {
      reply = (req, res) => res.writeHead(400).end(JSON.stringify({ detail: `bad header ${req.headers.authorization}` }));
      const error = await providerError(client({ baseUrl: base }).get_job_status("abc"));
      expect(error.message).toBe("Replicate answered 400: bad header Bearer ***");
      const check = await client({ baseUrl: base }).validate_credentials();
      expect(check.message).not.toContain(TOKEN);
    });

    it("follows a next page only on its own API root, so the token never goes to another host", async () => {
      const paths: string[] = [];
      reply = (req, res) => {
        paths.push(req.url!);
        const next = req.url === "/v1/trainings" ? "https://elsewhere.example/v1/trainings?cursor=abc" : null;
        res.writeHead(200).end(JSON.stringify({ results: [{ id: `t${paths.length}`, status: "succeeded" }], next }));
      };
      const jobs = await client({ baseUrl: base }).list_jobs();
      expect(jobs.map((j) => j.id)).toEqual(["t1", "t2"]);
      expect(paths).toEqual(["/v1/trainings", "/v1/trainings?cursor=abc"]);
    });

    it("a webhook secret answer without a whsec_ key is a ProviderError", async () => {
      reply = (_req, res) => res.writeHead(200).end(JSON.stringify({ key: "plain" }));
      expect((await providerError(client({ baseUrl: base }).webhook_secret())).message).toBe(
        "Replicate's webhook secret answer has no whsec_ key",
      );
    });
  });
});

describe("parseTraining", () => {
  const base = { id: "t1", logs: "a\nb\n", created_at: "2026-11-24T10:00:00.000Z" };

  it.each(["starting", "processing", "succeeded", "failed", "canceled", "aborted"] as const)("reads a %s training", (status) => {
    expect(parseTraining({ ...base, status }).status).toBe(status);
  });

  it("reads billed seconds, times, output and error as the documented fields say", () => {
    expect(
      parseTraining({
        ...base,
        status: "succeeded",
        started_at: "2026-11-24T10:00:01.000Z",
        completed_at: "2026-11-24T10:05:00.000Z",
        metrics: { predict_time: 299.25 },
        output: { weights: "https://x/weights.tar" },
        error: null,
      }),
    ).toEqual({
      id: "t1",
      status: "succeeded",
      logs: "a\nb\n",
      billed_seconds: 299.25,
      created_at: "2026-11-24T10:00:00.000Z",
      started_at: "2026-11-24T10:00:01.000Z",
      completed_at: "2026-11-24T10:05:00.000Z",
      output: { weights: "https://x/weights.tar" },
      error: null,
    });
  });

  it("reads the null logs and empty metrics of a run that has not logged or ended yet", () => {
    expect(parseTraining({ id: "t3", status: "starting", logs: null, metrics: {} })).toMatchObject({ logs: "", billed_seconds: null });
  });

  it("tolerates missing optional fields and unreadable metrics", () => {
    expect(parseTraining({ id: "t2", status: "starting" })).toEqual({
      id: "t2",
      status: "starting",
      logs: "",
      billed_seconds: null,
      created_at: null,
      started_at: null,
      completed_at: null,
      output: null,
      error: null,
    });
    expect(parseTraining({ id: "t2", status: "processing", metrics: { predict_time: -1 } }).billed_seconds).toBeNull();
    expect(parseTraining({ id: "t2", status: "processing", metrics: { predict_time: "3" } }).billed_seconds).toBeNull();
    expect(parseTraining({ id: "t2", status: "failed", error: { message: "OOM" } }).error).toBe('{"message":"OOM"}');
  });

  it.each([null, [], "text", 3, {}, { id: "", status: "starting" }, { id: "t", status: "running" }, { id: 5, status: "starting" }])(
    "throws a ProviderError on %j",
    (body) => {
      expect(() => parseTraining(body)).toThrow(ProviderError);
    },
  );
});

describe("parseModelRef", () => {
  it("splits owner/name:version", () => {
    expect(parseModelRef("acme/sdxl-trainer:39ed52f2")).toEqual({ owner: "acme", name: "sdxl-trainer", version: "39ed52f2" });
  });
  it.each(["", "acme", "acme/trainer", "acme/trainer:", "a/b/c:v", "acme/trainer:v1?x=1"])("refuses %j", (model) => {
    expect(() => parseModelRef(model)).toThrow(ProviderError);
  });
});

describe("ReplicateProvider retries, as Replicate's official clients do", () => {
  let waits: number[] = [];
  const retrying = (overrides: Partial<ReplicateOptions> = {}) =>
    client({ retry: { sleep: async (ms) => void waits.push(ms) }, ...overrides });
  const since = (before: number, method: string, path: RegExp) =>
    fake.requests.slice(before).filter((r) => r.method === method && path.test(r.path));
  const CREATE = /\/trainings$/;

  it("a throttled GET is tried again after the Retry-After the provider gave, then answers", async () => {
    waits = [];
    const { id } = await client().run_job({ job_id: "r1", input: {}, webhook_url: null });
    const before = fake.requests.length;
    fake.failNext("trainings.get", { status: 429, times: 2, retryAfter: "2" });
    expect((await retrying().get_job_status(id)).id).toBe(id);
    expect(waits).toEqual([2000, 2000]);
    expect(since(before, "GET", /^\/v1\/trainings\//).length).toBe(3);
  });

  it("503 and 504 on a GET and on the (idempotent) cancel are tried again with a doubling backoff when no Retry-After is given", async () => {
    waits = [];
    const { id } = await client().run_job({ job_id: "r2", input: {}, webhook_url: null });
    fake.failNext("trainings.get", { status: 503, times: 1 });
    fake.failNext("trainings.get", { status: 504, times: 1 });
    expect((await retrying().get_job_status(id)).id).toBe(id);
    expect(waits.length).toBe(2);
    expect(waits[0]).toBeGreaterThanOrEqual(500);
    expect(waits[1]).toBeGreaterThanOrEqual(1000);
    fake.failNext("trainings.cancel", { status: 503, times: 1, retryAfter: "1" });
    expect((await retrying().cancel_job(id)).status).toBe("canceled");
  });

  it("a throttled training create is sent again (a 429 was not acted on): one training, two requests", async () => {
    waits = [];
    const before = fake.requests.length;
    const trainings = fake.trainings.size;
    fake.failNext("trainings.create", { status: 429, retryAfter: "1" });
    const job = await retrying().run_job({ job_id: "r3", input: {}, webhook_url: null });
    expect(fake.trainings.size).toBe(trainings + 1);
    expect(fake.trainings.has(job.id)).toBe(true);
    expect(since(before, "POST", CREATE).length).toBe(2);
    expect(waits).toEqual([1000]);
  });

  it("a create answered 503 or 504 is never sent again: it may have been acted on", async () => {
    for (const status of [503, 504]) {
      waits = [];
      const before = fake.requests.length;
      fake.failNext("trainings.create", { status, retryAfter: "1" });
      const error = await providerError(retrying().run_job({ job_id: "r4", input: {}, webhook_url: null }));
      expect([error.status, error.unprocessed, error.countsAsFailure]).toEqual([status, false, true]);
      expect(since(before, "POST", CREATE).length).toBe(1);
      expect(waits).toEqual([]);
    }
  });

  it("a create whose answer is lost is not sent again, and says it may have been acted on", async () => {
    const before = fake.requests.length;
    const trainings = fake.trainings.size;
    fake.loseNextAnswer("trainings.create");
    const error = await providerError(retrying().run_job({ job_id: "r5", input: {}, webhook_url: null }));
    expect([error.status, error.unprocessed]).toEqual([null, false]);
    expect(since(before, "POST", CREATE).length).toBe(1);
    expect(fake.trainings.size).toBe(trainings + 1);
  });

  it("a Retry-After past the retry window ends the call at once, with the wait for the caller and `unprocessed`", async () => {
    waits = [];
    const before = fake.requests.length;
    fake.failNext("trainings.create", { status: 429, retryAfter: "3600" });
    const error = await providerError(retrying().run_job({ job_id: "r6", input: {}, webhook_url: null }));
    expect(error.message).toBe("Replicate answered 429: Request was throttled. Expected available in 3600 second.");
    expect([error.status, error.unprocessed, error.retryInSeconds, error.countsAsFailure]).toEqual([429, true, 3600, false]);
    expect(since(before, "POST", CREATE).length).toBe(1);
    expect(waits).toEqual([]);
  });

  it("a credential check is tried once: a throttled account call says so at once instead of waiting", async () => {
    waits = [];
    const before = fake.requests.length;
    fake.failNext("any", { status: 429, retryAfter: "5" });
    const check = await retrying().validate_credentials();
    expect(check.valid).toBe(false);
    expect(check.message).toContain("Replicate answered 429");
    expect(waits).toEqual([]);
    expect(since(before, "GET", /^\/v1\/account$/).length).toBe(1);
    // The account itself, for the submission's destination check, is retried like any GET.
    fake.failNext("any", { status: 429, retryAfter: "1" });
    expect(await retrying().account()).toEqual({ username: "acme", type: "organization" });
    expect(waits).toEqual([1000]);
  });

  it("gives up after 5 tries in all, saying so", async () => {
    waits = [];
    const before = fake.requests.length;
    fake.failNext("trainings.get", { status: 429, times: 5, retryAfter: "0" });
    const error = await providerError(retrying().get_job_status("abc"));
    expect(error.message).toMatch(/^Replicate answered 429 \(after 5 tries\): Request was throttled/);
    expect(fake.requests.length - before).toBe(5);
    expect(waits).toEqual([0, 0, 0, 0]);
  });

  it("a throttled upload is sent again whole from a body it opens afresh; a plain stream is sent once", async () => {
    waits = [];
    const bytes = new Uint8Array(randomBytes(50_000));
    let opened = 0;
    fake.failNext("files.create", { status: 429, retryAfter: "1" });
    const before = fake.requests.length;
    const file = await retrying().upload_file("d.zip", () => (opened++, streamOf(bytes)), bytes.length);
    expect(opened).toBe(2);
    expect(since(before, "POST", /^\/v1\/files$/).length).toBe(2);
    expect(Buffer.compare(fake.files.get(file.id)!.bytes, Buffer.from(bytes))).toBe(0);

    fake.failNext("files.create", { status: 429, retryAfter: "1" });
    const once = await providerError(retrying().upload_file("e.zip", streamOf(bytes), bytes.length));
    expect([once.status, once.unprocessed, once.retryInSeconds]).toEqual([429, true, 1]);
  });
});

describe("retryAfterMs", () => {
  const now = Date.parse("2026-11-27T10:00:00Z");
  it.each([
    ["2", 2000],
    [" 0 ", 0],
    ["1.5", 1500],
    ["Fri, 27 Nov 2026 10:00:30 GMT", 30_000],
    ["Fri, 27 Nov 2026 09:00:00 GMT", 0],
    ["soon", null],
    ["", null],
    [null, null],
  ] as const)("reads %j as %j ms", (header, ms) => {
    expect(retryAfterMs(header, now)).toBe(ms);
  });
});

describe("Replicate's webhook payloads", () => {
  it("name the training they are about, and read as the training they carry", () => {
    const payload = { id: "t1", status: "processing", logs: "step 1\n", metrics: { predict_time: 2.5 } };
    expect(REPLICATE_WEBHOOKS.runId(payload)).toBe("t1");
    expect(REPLICATE_WEBHOOKS.job(payload)).toEqual(parseTraining(payload));
    for (const other of [{ id: 7 }, {}, null, "t1", []]) expect(REPLICATE_WEBHOOKS.runId(other)).toBeNull();
    expect(() => REPLICATE_WEBHOOKS.job({ id: "t1", status: "paused" })).toThrow(UnknownStatusError);
  });

  it("are read by the hosted provider's reader; worker orchestration, the managed service and unknown names have none", () => {
    expect(webhookReader("replicate")).toBe(REPLICATE_WEBHOOKS);
    expect(webhookReader("workers")).toBeNull();
    expect(webhookReader("managed")).toBeNull();
    expect(webhookReader("nope")).toBeNull();
  });
});
