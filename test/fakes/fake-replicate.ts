import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { createHash, createHmac, randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { unzipSync } from "fflate";
import { closeServer, readBody } from "./fake-object-store";

/*
 * A fake Replicate for tests: the documented endpoints the client uses (account, files,
 * trainings create/list/get/cancel, webhook secret), each behind the bearer token, and a
 * simulated trainer that runs each training on a script: starting, processing with growing logs,
 * then succeeded (its model delivered where the training's input says), failed, or aborted.
 * Written from Replicate's own published material, not from the service's client:
 * - statuses: the OpenAPI document (https://api.replicate.com/openapi.json,
 *   schemas_training_response.status: starting, processing, succeeded, failed, canceled, and
 *   aborted, "terminated before it started running"), and replicate-javascript's index.d.ts;
 * - `logs` is null until the run logs something, and `metrics.predict_time` (the billed time) is
 *   given once the run is over (https://replicate.com/docs/topics/webhooks/receive-webhook shows
 *   `"logs": null, "metrics": {}` on an unfinished run);
 * - webhooks: the body is the whole training, `input` included; without webhook_events_filter
 *   only `output` and `completed` are sent ("By default, we will send requests to your webhook
 *   URL whenever there are new outputs or the prediction has finished", same page); `logs` and
 *   `output` at most every 500 ms; each signed per Standard Webhooks
 *   (https://replicate.com/docs/topics/webhooks/verify-webhook): `webhook-id`,
 *   `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`
 *   keyed with the base64 part of the `whsec_` secret - computed here with node:crypto, not with
 *   the library the service verifies with, so a shared mistake cannot hide;
 * - throttling: `429 {"detail": "Request was throttled. ..."}` with `Retry-After`, injected with
 *   failNext (503 and 504 likewise), and a create whose answer is lost (loseNextAnswer).
 */

/** Replicate's documented training statuses. */
export type TrainingStatus = "starting" | "processing" | "succeeded" | "failed" | "canceled" | "aborted";
const WEBHOOK_EVENTS = ["start", "output", "logs", "completed"] as const;
type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];
/** What Replicate sends when a create names no webhook_events_filter. */
export const DEFAULT_WEBHOOK_EVENTS: readonly WebhookEvent[] = ["output", "completed"];
/** The routes failNext and loseNextAnswer can aim at. */
export type FakeRoute = "files.create" | "trainings.create" | "trainings.get" | "trainings.cancel" | "any";

/**
 * A Standard Webhooks signature, as Replicate makes it: `v1,` and the base64 HMAC-SHA256 of
 * "{id}.{timestamp}.{body}" keyed with the base64-decoded part of the secret after `whsec_`.
 *
 * @example
 * signWebhook("whsec_c2VjcmV0", "msg_1", 1700000000, "{}"); // "v1,..."
 */
export function signWebhook(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${timestampSeconds}.${body}`).digest("base64")}`;
}

/** How a simulated training runs. */
export interface RunScript {
  /** Time in "starting" before processing begins (default 200 ms). */
  startingMs?: number;
  /** Time processing before the outcome (default 1500 ms); ignored with outcome "manual". */
  processingMs?: number;
  /** A log line every this often while processing (default 200 ms). */
  logEveryMs?: number;
  /**
   * "manual": processing lasts until the test calls finish() (default "succeeded"). "aborted":
   * the run never starts: after startingMs it is aborted (no started_at, nothing billed).
   */
  outcome?: "succeeded" | "failed" | "manual" | "aborted";
  /** The training's error when the outcome is "failed". */
  error?: string;
}

/** A training as Replicate answers it. */
export interface Training {
  id: string;
  model: string;
  version: string;
  destination: string;
  input: Record<string, unknown>;
  /** A TrainingStatus; tests may force another string (setStatus) to stand for one Replicate adds later. */
  status: TrainingStatus | (string & {});
  /** null until the run logs something. */
  logs: string | null;
  output: { weights: string } | null;
  error: string | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  webhook?: string;
  webhook_events_filter: WebhookEvent[];
  urls: { get: string; cancel: string };
  metrics: { predict_time?: number };
}

export interface FakeReplicate {
  url: string;
  /** The signing secret (whsec_...) GET /v1/webhooks/default/secret answers. */
  webhookSecret: string;
  /** `at`: when the request arrived (performance.timeOrigin + performance.now(), ms). */
  requests: { method: string; path: string; headers: http.IncomingHttpHeaders; bodyBytes: Buffer; at: number }[];
  trainings: Map<string, Training>;
  files: Map<string, { name: string; bytes: Buffer; contentType: string }>;
  /** Every webhook sent: the event, the delivery's answer status (null: not delivered) and the body as sent. */
  webhooks: { event: WebhookEvent; url: string; status: number | null; body: string }[];
  setSendWebhooks(on: boolean): void;
  /** refuse: connections are dropped; 500: every request answers 500; hang: requests never answer. */
  setOutage(mode: null | "refuse" | "500" | "hang"): void;
  /** The script of trainings created from now on. */
  setRunScript(run: RunScript): void;
  /**
   * The next `times` (default 1) requests to `route` answer `status` (429: "Request was
   * throttled", 503, 504, or any other) with a Retry-After header when `retryAfter` is given;
   * nothing is done for them.
   */
  failNext(route: FakeRoute, options: { status: number; times?: number; retryAfter?: string; detail?: string }): void;
  /** The next request to `route` is carried out (a training is created), then its connection is dropped unanswered. */
  loseNextAnswer(route: FakeRoute): void;
  /** Forces a training's status (its run stops): a status Replicate may add one day, for clients' tests. */
  setStatus(id: string, status: string): void;
  /** Rotates the signing secret (webhooks sent from now on use it). */
  setWebhookSecret(secret: string): void;
  /** The entry names of the dataset archive the training downloaded ([] when none). */
  archiveEntries(trainingId: string): string[];
  /** Ends a running training (any script; the way "manual" ones end). */
  finish(id: string, outcome: "succeeded" | "failed", error?: string): Promise<void>;
  stop(): Promise<void>;
}

interface RunState {
  script: Required<Omit<RunScript, "error">> & { error: string };
  timers: Set<NodeJS.Timeout>;
  processingSince: number | null;
  archiveEntries: string[];
  lastThrottledAt: number;
  pendingWebhook: NodeJS.Timeout | null;
  sending: Promise<void>;
}

/** The fake's account (GET /v1/account). */
const ACCOUNT = "acme";
const MODEL_PATH = /^\/v1\/models\/([\w.-]+)\/([\w.-]+)$/;
const TRAINING_PATH = /^\/v1\/models\/([\w.-]+)\/([\w.-]+)\/versions\/([\w.-]+)\/trainings$/;

function routeOf(method: string, path: string): Exclude<FakeRoute, "any"> | null {
  if (method === "POST" && path === "/v1/files") return "files.create";
  if (method === "POST" && TRAINING_PATH.test(path)) return "trainings.create";
  if (method === "GET" && /^\/v1\/trainings\/[\w-]+$/.test(path)) return "trainings.get";
  if (method === "POST" && /^\/v1\/trainings\/[\w-]+\/cancel$/.test(path)) return "trainings.cancel";
  return null;
}

const DEFAULT_RUN = {
  startingMs: 200,
  processingMs: 1500,
  logEveryMs: 200,
  outcome: "succeeded",
  error: "the trainer exited with status 1",
} as const;
// Replicate sends logs and output webhooks at most this often.
const THROTTLE_MS = 500;

/**
 * Starts the fake on 127.0.0.1 (a free port).
 *
 * @example
 * const replicate = await startFakeReplicate({ token: "r8_test", sendWebhooks: true });
 * // point the provider's api_base_url at replicate.url, submit, then:
 * [...replicate.trainings.values()][0]?.status; // "succeeded" after about 1.7 s
 */
export async function startFakeReplicate(options: {
  token: string;
  webhookSecret?: string;
  sendWebhooks?: boolean;
  run?: RunScript;
  /** Trainings per page of GET /v1/trainings (default 100, like Replicate). */
  pageSize?: number;
  /**
   * The models that exist besides the account's own (`owner/name`), as GET /v1/models/{owner}/{name}
   * finds them. The fake's account ("acme") owns a model of every name, as if an admin created
   * each one at replicate.com/create; `missingModels` names those of its own that do not exist.
   */
  models?: string[];
  missingModels?: string[];
}): Promise<FakeReplicate> {
  let secret = options.webhookSecret ?? `whsec_${randomBytes(24).toString("base64")}`;
  let sendWebhooks = options.sendWebhooks ?? true;
  let outage: null | "refuse" | "500" | "hang" = null;
  let runScript: RunScript = options.run ?? {};
  const pageSize = options.pageSize ?? 100;
  const trainings = new Map<string, Training>();
  const runs = new Map<string, RunState>();
  const otherModels = new Set(options.models ?? []);
  const missingModels = new Set(options.missingModels ?? []);
  const modelExists = (model: string) => (model.startsWith(`${ACCOUNT}/`) ? !missingModels.has(model) : otherModels.has(model));
  const files = new Map<string, { name: string; bytes: Buffer; contentType: string }>();
  const requests: FakeReplicate["requests"] = [];
  const webhooks: FakeReplicate["webhooks"] = [];
  const failures: { route: FakeRoute; status: number; times: number; retryAfter?: string; detail?: string }[] = [];
  const lost: FakeRoute[] = [];
  let base = "";

  // metrics.predict_time is set when the run ends (end()), never while it runs.
  const view = (t: Training): Training => ({ ...t, metrics: { ...t.metrics } });

  const later = (run: RunState, ms: number, fn: () => void) => {
    const timer = setTimeout(() => {
      run.timers.delete(timer);
      fn();
    }, ms);
    run.timers.add(timer);
  };
  const clearRun = (run: RunState) => {
    for (const timer of run.timers) clearTimeout(timer);
    run.timers.clear();
  };

  const send = (t: Training, run: RunState, event: WebhookEvent) => {
    const url = t.webhook;
    if (!url) return;
    run.sending = run.sending.then(async () => {
      const body = JSON.stringify(view(t));
      const id = `msg_${randomBytes(12).toString("hex")}`;
      const timestamp = Math.floor(Date.now() / 1000);
      const signature = signWebhook(secret, id, timestamp, body);
      let status: number | null = null;
      try {
        const response = await fetch(url, {
          method: "POST",
          body,
          headers: {
            "Content-Type": "application/json",
            "webhook-id": id,
            "webhook-timestamp": String(timestamp),
            "webhook-signature": signature,
          },
          signal: AbortSignal.timeout(10_000),
        });
        status = response.status;
        await response.arrayBuffer();
      } catch {}
      webhooks.push({ event, url, status, body });
    });
  };

  const emit = (t: Training, event: WebhookEvent) => {
    const run = runs.get(t.id);
    if (!run || !t.webhook || !sendWebhooks || !t.webhook_events_filter.includes(event)) return;
    if (event === "start" || event === "completed") {
      if (run.pendingWebhook) clearTimeout(run.pendingWebhook);
      run.pendingWebhook = null;
      return send(t, run, event);
    }
    if (run.pendingWebhook) return;
    const wait = run.lastThrottledAt + THROTTLE_MS - Date.now();
    const fire = () => {
      run.pendingWebhook = null;
      run.lastThrottledAt = Date.now();
      if (t.status === "starting" || t.status === "processing") send(t, run, event);
    };
    if (wait <= 0) return fire();
    run.pendingWebhook = setTimeout(fire, wait);
  };

  const log = (t: Training, line: string) => {
    t.logs = `${t.logs ?? ""}${line}\n`;
    emit(t, "logs");
  };

  const end = (t: Training, run: RunState, status: "succeeded" | "failed" | "canceled" | "aborted", error: string | null) => {
    clearRun(run);
    const now = Date.now();
    t.status = status;
    t.error = error;
    t.completed_at = new Date(now).toISOString();
    // Billed: the time it processed (a run aborted or cancelled before it started: none).
    t.metrics = status === "aborted" ? {} : { predict_time: run.processingSince ? (now - run.processingSince) / 1000 : 0 };
    // The final output goes out at once (not throttled), just before completed.
    if (t.output && t.webhook && sendWebhooks && t.webhook_events_filter.includes("output")) {
      if (run.pendingWebhook) clearTimeout(run.pendingWebhook);
      run.pendingWebhook = null;
      send(t, run, "output");
    }
    emit(t, "completed");
  };

  const finish = async (t: Training, run: RunState, outcome: "succeeded" | "failed", error?: string) => {
    if (t.status !== "processing" && t.status !== "starting") return;
    clearRun(run);
    if (outcome === "failed") {
      log(t, `Error: ${error ?? run.script.error}`);
      return end(t, run, "failed", error ?? run.script.error);
    }
    try {
      const weights = await deliver(t, base);
      if (t.status !== "processing" && t.status !== "starting") return;
      t.output = { weights };
      log(t, `Model delivered: ${weights}`);
      end(t, run, "succeeded", null);
    } catch (problem) {
      if (t.status !== "processing" && t.status !== "starting") return;
      const message = `Result delivery failed: ${(problem as Error).message}`;
      log(t, message);
      end(t, run, "failed", message);
    }
  };

  const startProcessing = async (t: Training, run: RunState) => {
    if (t.status !== "starting") return;
    if (run.script.outcome === "aborted") return end(t, run, "aborted", null);
    t.status = "processing";
    t.started_at = new Date().toISOString();
    run.processingSince = Date.now();
    const archive = t.input.dataset_archive;
    if (typeof archive === "string" && archive) {
      try {
        const bytes = await download(archive);
        run.archiveEntries = Object.keys(unzipSync(new Uint8Array(bytes)));
        log(t, `Dataset archive: ${run.archiveEntries.length} entries`);
      } catch (problem) {
        log(t, `Error: could not read the dataset archive: ${(problem as Error).message}`);
        return end(t, run, "failed", `could not read the dataset archive: ${(problem as Error).message}`);
      }
    }
    if (t.status !== "processing") return;
    let step = 0;
    const tick = () => {
      step += 1;
      log(t, `step ${step}: loss ${(1 / (1 + step)).toFixed(4)}`);
      later(run, run.script.logEveryMs, tick);
    };
    later(run, run.script.logEveryMs, tick);
    if (run.script.outcome !== "manual")
      later(run, run.script.processingMs, () => void finish(t, run, run.script.outcome as "succeeded" | "failed"));
  };

  // The trainer reads the service's archive from this fake's own file hosting; any other URL over HTTP.
  const download = async (url: string): Promise<Buffer> => {
    const own = new RegExp(`^${base.replace(/[.]/g, "\\.")}/v1/files/([\\w-]+)(?:/download)?$`).exec(url);
    if (own) {
      const file = files.get(own[1]!);
      if (!file) throw new Error(`file ${own[1]} not found`);
      return file.bytes;
    }
    const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    if (!response.ok) throw new Error(`GET ${url} answered ${response.status}`);
    return Buffer.from(await response.arrayBuffer());
  };

  const server = http.createServer(async (req, res) => {
    if (outage === "refuse") return req.socket.destroy();
    if (outage === "hang") return;
    const url = new URL(req.url ?? "/", "http://replicate");
    // A client that gives up mid-body (an upload it aborted) gets no answer.
    const arrived = performance.timeOrigin + performance.now();
    const bodyBytes = await readBody(req).catch(() => null);
    if (!bodyBytes) return;
    requests.push({ method: req.method ?? "", path: url.pathname, headers: req.headers, bodyBytes, at: arrived });
    const route = routeOf(req.method ?? "GET", url.pathname);
    const aimed = (r: FakeRoute) => r === "any" || r === route;
    const failure = failures.find((f) => aimed(f.route));
    if (failure && req.headers.authorization === `Bearer ${options.token}`) {
      if (--failure.times <= 0) failures.splice(failures.indexOf(failure), 1);
      const title = failure.status === 429 ? "Request was throttled" : (http.STATUS_CODES[failure.status] ?? "Error");
      const detail =
        failure.detail ??
        (failure.status === 429 ? `Request was throttled. Expected available in ${failure.retryAfter ?? "1"} second.` : title);
      res.writeHead(failure.status, {
        "Content-Type": "application/problem+json",
        ...(failure.retryAfter !== undefined ? { "Retry-After": failure.retryAfter } : {}),
      });
      return res.end(JSON.stringify({ title, detail, status: failure.status }));
    }
    const loseAt = lost.findIndex(aimed);
    const answer = (status: number, value?: unknown) => {
      if (loseAt >= 0) {
        // Carried out, but the answer never arrives: the connection drops.
        lost.splice(loseAt, 1);
        return req.socket.destroy();
      }
      if (value === undefined) {
        res.writeHead(status);
        return res.end();
      }
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify(value));
    };
    const problem = (status: number, detail: string) => answer(status, { title: http.STATUS_CODES[status], detail, status });
    if (outage === "500") return problem(500, "Internal server error (simulated outage)");
    if (!url.pathname.startsWith("/v1/")) return problem(404, "Not found");
    if (req.headers.authorization !== `Bearer ${options.token}`) return problem(401, "You did not pass a valid authentication token");

    const method = req.method ?? "GET";
    const path = url.pathname;
    let m: RegExpExecArray | null;

    if (method === "GET" && path === "/v1/account")
      return answer(200, { type: "organization", username: ACCOUNT, name: "Acme", github_url: null });
    // A model (Replicate's "Get a model"): 404 {"detail": "Not found."} for one that does not exist.
    if (method === "GET" && (m = MODEL_PATH.exec(path))) {
      const model = `${m[1]}/${m[2]}`;
      if (!modelExists(model)) return answer(404, { detail: "Not found.", status: 404 });
      return answer(200, {
        url: `https://replicate.com/${model}`,
        owner: m[1],
        name: m[2],
        description: null,
        visibility: "private",
        github_url: null,
        paper_url: null,
        license_url: null,
        run_count: 0,
        cover_image_url: null,
        default_example: null,
        latest_version: null,
      });
    }
    if (method === "GET" && path === "/v1/webhooks/default/secret") return answer(200, { key: secret });

    if (method === "POST" && path === "/v1/files") {
      const boundary = /boundary=(?:"([^"]+)"|([^;\s]+))/.exec(req.headers["content-type"] ?? "");
      if (!boundary) return problem(400, "Expected a multipart/form-data body");
      let parts: MultipartPart[];
      try {
        parts = parseMultipart(bodyBytes, boundary[1] ?? boundary[2]!);
      } catch (error) {
        return problem(400, `The multipart body is malformed: ${(error as Error).message}`);
      }
      const content = parts.find((p) => p.name === "content");
      if (!content) return problem(400, 'The multipart body has no "content" part');
      const id = randomId();
      const name = content.filename ?? "file";
      const contentType = content.contentType ?? "application/octet-stream";
      files.set(id, { name, bytes: content.bytes, contentType });
      return answer(201, fileView(base, id, name, contentType, content.bytes));
    }
    if ((m = /^\/v1\/files\/([\w-]+)(\/download)?$/.exec(path))) {
      const file = files.get(m[1]!);
      if (!file) return problem(404, "Not found");
      if (method === "DELETE" && !m[2]) {
        files.delete(m[1]!);
        return answer(204);
      }
      if (method === "GET" && m[2]) {
        res.writeHead(200, { "Content-Type": file.contentType, "Content-Length": file.bytes.length });
        return res.end(file.bytes);
      }
      if (method === "GET") return answer(200, fileView(base, m[1]!, file.name, file.contentType, file.bytes));
    }

    if (method === "POST" && (m = TRAINING_PATH.exec(path))) {
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(bodyBytes.toString("utf8")) as Record<string, unknown>;
      } catch {
        return problem(400, "The body is not JSON");
      }
      if (typeof body.destination !== "string" || !/^[\w.-]+\/[\w.-]+$/.test(body.destination))
        return problem(422, "destination: must be a model owner/name");
      // Replicate pushes a training's version into a model that exists (and the caller owns).
      if (!modelExists(body.destination)) return problem(404, "The specified training destination does not exist");
      if (typeof body.input !== "object" || body.input === null || Array.isArray(body.input))
        return problem(422, "input: must be an object");
      if (body.webhook !== undefined && (typeof body.webhook !== "string" || !/^https?:\/\//.test(body.webhook)))
        return problem(422, "webhook: must be an http(s) URL");
      const filter = body.webhook_events_filter ?? [...DEFAULT_WEBHOOK_EVENTS];
      if (!Array.isArray(filter) || filter.some((e) => !WEBHOOK_EVENTS.includes(e as WebhookEvent)))
        return problem(422, `webhook_events_filter: must list some of ${WEBHOOK_EVENTS.join(", ")}`);
      const id = randomId();
      const training: Training = {
        id,
        model: `${m[1]}/${m[2]}`,
        version: m[3]!,
        destination: body.destination,
        input: body.input as Record<string, unknown>,
        status: "starting",
        logs: null,
        output: null,
        error: null,
        created_at: new Date().toISOString(),
        started_at: null,
        completed_at: null,
        ...(body.webhook ? { webhook: body.webhook as string } : {}),
        webhook_events_filter: filter as WebhookEvent[],
        urls: { get: `${base}/v1/trainings/${id}`, cancel: `${base}/v1/trainings/${id}/cancel` },
        metrics: {},
      };
      const run: RunState = {
        script: { ...DEFAULT_RUN, ...runScript },
        timers: new Set(),
        processingSince: null,
        archiveEntries: [],
        lastThrottledAt: 0,
        pendingWebhook: null,
        sending: Promise.resolve(),
      };
      trainings.set(id, training);
      runs.set(id, run);
      answer(201, view(training));
      emit(training, "start");
      later(run, run.script.startingMs, () => void startProcessing(training, run));
      return;
    }
    if (method === "GET" && path === "/v1/trainings") {
      const all = [...trainings.values()].reverse();
      const cursor = Math.max(0, Number.parseInt(url.searchParams.get("cursor") ?? "0", 10) || 0);
      const page = all.slice(cursor, cursor + pageSize);
      const next = cursor + pageSize < all.length ? `${base}/v1/trainings?cursor=${cursor + pageSize}` : null;
      return answer(200, { previous: null, next, results: page.map(view) });
    }
    if ((m = /^\/v1\/trainings\/([\w-]+)(\/cancel|\/weights)?$/.exec(path))) {
      const training = trainings.get(m[1]!);
      const run = runs.get(m[1]!);
      if (!training || !run) return problem(404, "Not found");
      if (method === "GET" && !m[2]) return answer(200, view(training));
      if (method === "GET" && m[2] === "/weights" && training.status === "succeeded") {
        res.writeHead(200, { "Content-Type": "application/octet-stream" });
        return res.end(safetensors(training.id));
      }
      if (method === "POST" && m[2] === "/cancel") {
        if (training.status === "starting" || training.status === "processing") {
          log(training, "Training canceled");
          end(training, run, "canceled", null);
        }
        return answer(200, view(training));
      }
    }
    problem(404, "Not found");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url: base,
    get webhookSecret() {
      return secret;
    },
    requests,
    trainings,
    files,
    webhooks,
    setSendWebhooks: (on) => void (sendWebhooks = on),
    setOutage: (mode) => void (outage = mode),
    setRunScript: (run) => void (runScript = run),
    failNext: (route, { status, times = 1, retryAfter, detail }) => void failures.push({ route, status, times, retryAfter, detail }),
    loseNextAnswer: (route) => void lost.push(route),
    setStatus: (id, status) => {
      const training = trainings.get(id);
      const run = runs.get(id);
      if (!training || !run) throw new Error(`no training ${id}`);
      clearRun(run);
      training.status = status;
    },
    setWebhookSecret: (value) => void (secret = value),
    archiveEntries: (id) => [...(runs.get(id)?.archiveEntries ?? [])],
    finish: async (id, outcome, error) => {
      const training = trainings.get(id);
      const run = runs.get(id);
      if (!training || !run) throw new Error(`no training ${id}`);
      await finish(training, run, outcome, error);
    },
    stop: async () => {
      for (const run of runs.values()) {
        clearRun(run);
        if (run.pendingWebhook) clearTimeout(run.pendingWebhook);
      }
      await Promise.all([...runs.values()].map((r) => r.sending));
      await closeServer(server);
    },
  };
}

/** A tiny but valid safetensors file (no tensors, the training id in its metadata): what a delivery uploads. */
export function safetensors(trainingId: string): Buffer {
  const header = Buffer.from(JSON.stringify({ __metadata__: { training: trainingId } }));
  const size = Buffer.alloc(8);
  size.writeBigUInt64LE(BigInt(header.length));
  return Buffer.concat([size, header]);
}

/*
 * The trainer's delivery, per the trainer's input contract (edge/cloud/trainer-input.ts: flat
 * inputs result_destination, result_s3_endpoint, ..., result_s3_access_key_id and
 * result_s3_secret_access_key) or, for clients that still send one, an `env` map of the
 * variables (RESULT_DESTINATION, RESULT_S3_*, AWS_*, HF_TOKEN, HUB_MODEL_ID, HF_ENDPOINT);
 * throws with the reason on failure.
 */
const FLAT_INPUTS: Record<string, string> = {
  result_destination: "RESULT_DESTINATION",
  result_s3_endpoint: "RESULT_S3_ENDPOINT",
  result_s3_bucket: "RESULT_S3_BUCKET",
  result_s3_prefix: "RESULT_S3_PREFIX",
  result_s3_region: "RESULT_S3_REGION",
  result_s3_access_key_id: "AWS_ACCESS_KEY_ID",
  result_s3_secret_access_key: "AWS_SECRET_ACCESS_KEY",
};

async function deliver(t: Training, base: string): Promise<string> {
  const env = { ...((t.input.env ?? {}) as Record<string, string>) };
  for (const [input, variable] of Object.entries(FLAT_INPUTS))
    if (typeof t.input[input] === "string") env[variable] = t.input[input] as string;
  const model = safetensors(t.id);
  const need = (name: string) => {
    const value = env[name];
    if (!value) throw new Error(`${name} is not set in the job's environment`);
    return value;
  };
  switch (env.RESULT_DESTINATION) {
    case undefined:
      return `${base}/v1/trainings/${t.id}/weights`;
    case "storage":
    case "s3": {
      const endpoint = need("RESULT_S3_ENDPOINT");
      const bucket = need("RESULT_S3_BUCKET");
      const key = `${env.RESULT_S3_PREFIX ?? ""}model.safetensors`;
      const client = new S3Client({
        endpoint,
        region: env.RESULT_S3_REGION || "us-east-1",
        forcePathStyle: true,
        credentials: { accessKeyId: need("AWS_ACCESS_KEY_ID"), secretAccessKey: need("AWS_SECRET_ACCESS_KEY") },
        maxAttempts: 1,
      });
      try {
        await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: model, ContentType: "application/octet-stream" }));
      } catch (error) {
        const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
        throw new Error(
          `S3 PutObject of ${bucket}/${key} at ${endpoint} failed${status ? ` (${status})` : ""}: ${(error as Error).name}: ${(error as Error).message}`,
        );
      } finally {
        client.destroy();
      }
      return `${endpoint.replace(/\/+$/, "")}/${bucket}/${key}`;
    }
    case "hub": {
      const endpoint = need("HF_ENDPOINT").replace(/\/+$/, "");
      const repo = need("HUB_MODEL_ID");
      const body = [
        { key: "header", value: { summary: `Training ${t.id}`, description: "" } },
        { key: "file", value: { content: model.toString("base64"), path: "model.safetensors", encoding: "base64" } },
      ]
        .map((line) => JSON.stringify(line))
        .join("\n");
      let response: Response;
      try {
        response = await fetch(`${endpoint}/api/models/${repo}/commit/main`, {
          method: "POST",
          body,
          headers: { Authorization: `Bearer ${need("HF_TOKEN")}`, "Content-Type": "application/x-ndjson" },
          signal: AbortSignal.timeout(10_000),
        });
      } catch (error) {
        throw new Error(`the hub at ${endpoint} could not be reached: ${(error as Error).message}`);
      }
      if (!response.ok) throw new Error(`the hub answered ${response.status}: ${(await response.text()).slice(0, 200)}`);
      return `${endpoint}/${repo}/resolve/main/model.safetensors`;
    }
    default:
      throw new Error(`unknown RESULT_DESTINATION ${env.RESULT_DESTINATION}`);
  }
}

interface MultipartPart {
  name: string | null;
  filename: string | null;
  contentType: string | null;
  bytes: Buffer;
}

function parseMultipart(body: Buffer, boundary: string): MultipartPart[] {
  const delimiter = Buffer.from(`--${boundary}`);
  const between = Buffer.from(`\r\n--${boundary}`);
  let at = body.indexOf(delimiter);
  if (at !== 0) throw new Error("it does not start with the boundary");
  const parts: MultipartPart[] = [];
  for (;;) {
    at += delimiter.length;
    const after = body.subarray(at, at + 2).toString("latin1");
    if (after === "--") return parts;
    if (after !== "\r\n") throw new Error("a boundary is not followed by CRLF");
    at += 2;
    const headerEnd = body.indexOf("\r\n\r\n", at);
    if (headerEnd < 0) throw new Error("a part has no end of headers");
    const headers = new Map(
      body
        .subarray(at, headerEnd)
        .toString("utf8")
        .split("\r\n")
        .map((line) => [line.slice(0, line.indexOf(":")).trim().toLowerCase(), line.slice(line.indexOf(":") + 1).trim()] as const),
    );
    const next = body.indexOf(between, headerEnd + 4);
    if (next < 0) throw new Error("a part has no closing boundary");
    const disposition = headers.get("content-disposition") ?? "";
    parts.push({
      name: /\bname="([^"]*)"/.exec(disposition)?.[1] ?? null,
      filename: /\bfilename="([^"]*)"/.exec(disposition)?.[1] ?? null,
      contentType: headers.get("content-type") ?? null,
      bytes: body.subarray(headerEnd + 4, next),
    });
    at = next + 2;
  }
}

function fileView(base: string, id: string, name: string, contentType: string, bytes: Buffer) {
  const created = new Date();
  return {
    id,
    name,
    content_type: contentType,
    size: bytes.length,
    etag: createHash("md5").update(bytes).digest("hex"),
    checksums: { sha256: createHash("sha256").update(bytes).digest("hex") },
    metadata: {},
    created_at: created.toISOString(),
    expires_at: new Date(created.getTime() + 86_400_000).toISOString(),
    urls: { get: `${base}/v1/files/${id}` },
  };
}

function randomId(): string {
  return randomBytes(13)
    .toString("base64url")
    .toLowerCase()
    .replace(/[^a-z0-9]/g, "0");
}
