import { CircuitOpenError } from "../breaker";
import {
  PROVIDER_STATUSES,
  ProviderError,
  UnknownStatusError,
  type CredentialCheck,
  type FileHostingProvider,
  type OutboundFetch,
  type ProviderFile,
  type ProviderJob,
  type ProviderStatus,
  type RunSpec,
  type WebhookReader,
} from "../types";

/*
 * The hosted provider's client (Replicate's HTTP API: https://replicate.com/docs/reference/http): Replicate's
 * HTTP API for files, trainings, the account and the webhook secret. Worker code: fetch and Web
 * streams only. Every request goes through the OutboundFetch it is given (timeout, breaker, TLS,
 * proxy); every failure is a ProviderError whose message never holds the token.
 */

export interface ReplicateOptions {
  /** The API root, without /v1 ("https://api.replicate.com", a proxy, or a test double). */
  baseUrl: string;
  token: string;
  /** The trainer: "owner/name:version". Checked when a job is run, so an unset model still lets credentials be validated. */
  model: string;
  /** The model the training creates its versions in: "owner/name" (Replicate requires one). */
  destination: string;
  fetch: OutboundFetch;
  /** How throttled and unavailable answers are retried (RETRY_POLICY when left out). */
  retry?: Partial<RetryPolicy>;
}

/**
 * Retries as Replicate's official clients do: replicate-python's RetryTransport
 * (https://github.com/replicate/replicate-python/blob/main/replicate/client.py: 429, 503 and 504
 * on idempotent methods, Retry-After honoured, else exponential backoff) and
 * replicate-javascript's withAutomaticRetries
 * (https://github.com/replicate/replicate-javascript/blob/main/lib/util.js: 429 on any method,
 * since a throttled request was not processed; 500 ms doubling, 100 ms jitter, 5 tries). Here:
 * 429 on every call (the file upload and the training create included: a 429 means the request
 * was not acted on, so it cannot start a second run), 503 and 504 on idempotent calls only (GET,
 * DELETE, and the cancel, which Replicate applies once however often it is asked). A training
 * create that got no answer, a timeout or another 5xx is never repeated. All tries of one call
 * fit within `windowMs`: a Retry-After that would pass it ends the call at once with a
 * ProviderError carrying retryInSeconds, for the caller to try again later.
 */
export interface RetryPolicy {
  /** Tries of one call, the first included. */
  attempts: number;
  /** The longest one call may spend waiting between tries. */
  windowMs: number;
  /** The first wait without a Retry-After; it doubles each try. */
  backoffMs: number;
  /** Waits `ms` (tests may pass their own). */
  sleep: (ms: number) => Promise<void>;
}

export const RETRY_POLICY: RetryPolicy = {
  attempts: 5,
  windowMs: 30_000,
  backoffMs: 500,
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

const IDEMPOTENT_METHODS = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);
/*
 * Replicate's default is output and completed only ("By default, we will send requests to your
 * webhook URL whenever there are new outputs or the training has finished",
 * https://replicate.com/docs/topics/webhooks/receive-webhook). The service asks for start (the
 * run was taken up) and completed (its end, with the final billed time); a training's output is
 * its weights, sent with completed. `logs` is not asked for: it would post the whole cumulative
 * log every 500 ms; the polls read the logs instead.
 */
export const WEBHOOK_EVENTS = ["start", "completed"] as const;
// Enough of a provider's error body to say what went wrong, not a whole HTML error page.
const DETAIL_CHARS = 300;

/**
 * The hosted provider (Replicate) as a cloud provider client with file hosting.
 *
 * @example
 * const replicate = new ReplicateProvider({ baseUrl: "https://api.replicate.com", token, model: "acme/trainer:0a1b", destination: "acme/models", fetch });
 * const file = await replicate.upload_file("dataset.zip", () => openArchive(), size); // reopened if throttled
 * const job = await replicate.run_job({ job_id, input: { dataset_archive: file.url }, webhook_url });
 */
export class ReplicateProvider implements FileHostingProvider {
  readonly provider_name = "replicate";
  readonly supports_cost_tracking = true;
  readonly supports_live_logs = true;
  readonly #options: ReplicateOptions;
  readonly #base: string;

  readonly #retry: RetryPolicy;

  constructor(options: ReplicateOptions) {
    this.#options = options;
    this.#retry = { ...RETRY_POLICY, ...options.retry };
    this.#base = options.baseUrl.replace(/\/+$/, "");
  }

  /** Never throws: a refused token or an unreachable provider is `valid: false` with the reason. */
  async validate_credentials(): Promise<CredentialCheck> {
    const started = Date.now();
    if (!this.#options.token) return { valid: false, message: "no API token is set", latency_ms: 0 };
    try {
      // One try: a health check says what is true now rather than wait out a throttle.
      const { username, type } = await this.account({ once: true });
      return { valid: true, message: `account ${username ?? "?"} (${type})`, latency_ms: Date.now() - started };
    } catch (error) {
      const latency_ms = Date.now() - started;
      if (error instanceof ProviderError && (error.status === 401 || error.status === 403))
        return { valid: false, message: "the API token was refused", latency_ms };
      return { valid: false, message: this.#redact((error as Error).message), latency_ms };
    }
  }

  /** The account the API token belongs to (GET /v1/account): its username (null if it gave none) and type. */
  async account(options: { once?: boolean } = {}): Promise<{ username: string | null; type: string }> {
    const account = asObject(await this.#request("GET", "/v1/account", { once: options.once }), "account");
    return {
      username: typeof account.username === "string" && account.username ? account.username : null,
      type: typeof account.type === "string" ? account.type : "account",
    };
  }

  /** Whether a model (`owner/name`) exists and the token sees it (Replicate's "Get a model": 404 otherwise). */
  async model_exists(model: string): Promise<boolean> {
    const [owner = "", name = ""] = model.split("/");
    try {
      await this.#json("GET", `/v1/models/${enc(owner)}/${enc(name)}`);
      return true;
    } catch (error) {
      if (error instanceof ProviderError && error.status === 404) return false;
      throw error;
    }
  }

  async list_jobs(limit = 50): Promise<ProviderJob[]> {
    const jobs: ProviderJob[] = [];
    let url: string | null = `${this.#base}/v1/trainings`;
    const seen = new Set<string>();
    while (url && jobs.length < limit && !seen.has(url)) {
      seen.add(url);
      const page = asObject(await this.#json("GET", url), "trainings page");
      if (!Array.isArray(page.results)) throw new ProviderError("Replicate's trainings page has no results list", 200, true);
      if (!page.results.length) break;
      for (const item of page.results) {
        if (jobs.length >= limit) break;
        jobs.push(this.#training({ status: 200, body: item }));
      }
      url = typeof page.next === "string" && page.next ? this.#sameOrigin(page.next) : null;
    }
    return jobs;
  }

  /**
   * Creates the training: one request, repeated only after a 429 (not acted on). Any failure
   * that may have been acted on (no answer, a timeout, a 5xx) throws with `unprocessed` false:
   * the caller must not send it again.
   */
  async run_job(spec: RunSpec): Promise<ProviderJob> {
    const model = parseModelRef(this.#options.model);
    if (!/^[A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*$/.test(this.#options.destination))
      throw new ProviderError(
        `The training destination must be a Replicate model "owner/name", not "${this.#options.destination}" (the provider's training_destination setting)`,
        null,
        false,
        { unprocessed: true },
      );
    const body: Record<string, unknown> = { destination: this.#options.destination, input: spec.input };
    if (spec.webhook_url) {
      body.webhook = spec.webhook_url;
      body.webhook_events_filter = [...WEBHOOK_EVENTS];
    }
    const path = `/v1/models/${enc(model.owner)}/${enc(model.name)}/versions/${enc(model.version)}/trainings`;
    return this.#training(await this.#json("POST", path, body));
  }

  async cancel_job(job_id: string): Promise<ProviderJob> {
    // A cancel is applied once however often it is asked: retried like a GET.
    return this.#training(await this.#request("POST", `/v1/trainings/${enc(job_id)}/cancel`, { idempotent: true }));
  }

  async get_job_logs(job_id: string): Promise<string> {
    return (await this.get_job_status(job_id)).logs;
  }

  async get_job_status(job_id: string): Promise<ProviderJob> {
    return this.#training(await this.#json("GET", `/v1/trainings/${enc(job_id)}`));
  }

  /**
   * Streams the file as multipart. `body` is a function that opens the file's bytes afresh, so
   * that a throttled upload (429) can be sent again; a stream given as it is is sent once.
   */
  async upload_file(
    name: string,
    body: ReadableStream<Uint8Array> | (() => ReadableStream<Uint8Array>),
    size: number,
    onProgress?: (sent: number) => void,
  ): Promise<ProviderFile> {
    const boundary = `----training-service-${crypto.randomUUID()}`;
    const preamble = new TextEncoder().encode(
      `--${boundary}\r\nContent-Disposition: form-data; name="content"; filename="${formFilename(name)}"\r\nContent-Type: application/zip\r\n\r\n`,
    );
    const epilogue = new TextEncoder().encode(`\r\n--${boundary}--\r\n`);
    const length = preamble.byteLength + size + epilogue.byteLength;
    const open = () => {
      let stream = multipartStream(preamble, typeof body === "function" ? body() : body, size, epilogue, onProgress);
      // workerd sends a stream chunked unless it goes through a FixedLengthStream; Node's fetch honours the header.
      const Fixed = (globalThis as { FixedLengthStream?: new (length: number) => TransformStream<Uint8Array, Uint8Array> })
        .FixedLengthStream;
      if (Fixed) stream = stream.pipeThrough(new Fixed(length));
      return stream;
    };
    const answer = asObject(
      await this.#request("POST", "/v1/files", {
        body: typeof body === "function" ? open : open(),
        headers: { "Content-Type": `multipart/form-data; boundary=${boundary}`, "Content-Length": String(length) },
      }),
      "file",
    );
    const urls = typeof answer.urls === "object" && answer.urls !== null ? (answer.urls as Record<string, unknown>) : {};
    if (typeof answer.id !== "string" || typeof urls.get !== "string")
      throw new ProviderError("Replicate's answer to the upload has no file id or urls.get", 201, true);
    return { id: answer.id, url: urls.get, size: typeof answer.size === "number" ? answer.size : size };
  }

  async delete_file(file_id: string): Promise<void> {
    try {
      await this.#request("DELETE", `/v1/files/${enc(file_id)}`);
    } catch (error) {
      if (error instanceof ProviderError && error.status === 404) return;
      throw error;
    }
  }

  async webhook_secret(): Promise<string> {
    const answer = asObject(await this.#json("GET", "/v1/webhooks/default/secret"), "webhook secret");
    if (typeof answer.key !== "string" || !answer.key.startsWith("whsec_"))
      throw new ProviderError("Replicate's webhook secret answer has no whsec_ key", 200, true);
    return answer.key;
  }

  #training({ status, body }: Answer): ProviderJob {
    try {
      return parseTraining(body);
    } catch (error) {
      const message = this.#redact((error as Error).message);
      if (error instanceof UnknownStatusError) throw new UnknownStatusError(error.trainingId, error.reported, status, message);
      // A 2xx the client cannot read means the provider (or a proxy before it) is not working: the breaker counts it.
      throw new ProviderError(message, status, true);
    }
  }

  async #json(method: string, pathOrUrl: string, body?: unknown): Promise<Answer> {
    const init =
      body === undefined ? {} : { body: JSON.stringify(body), headers: { "Content-Type": "application/json" } as Record<string, string> };
    return this.#request(method, pathOrUrl, init);
  }

  /** One call, with the retries of RetryPolicy: `body` may be a function that makes the body afresh for each try. */
  async #request(
    method: string,
    pathOrUrl: string,
    init: { body?: BodyInit | (() => BodyInit); headers?: Record<string, string>; idempotent?: boolean; once?: boolean } = {},
  ): Promise<Answer> {
    const url = pathOrUrl.startsWith("/") ? this.#base + pathOrUrl : pathOrUrl;
    const idempotent = init.idempotent ?? IDEMPOTENT_METHODS.has(method);
    // A stream given as it is is read by the first try: nothing is left to send again.
    const replayable = !(init.body instanceof ReadableStream);
    const policy = this.#retry;
    const deadline = Date.now() + policy.windowMs;
    for (let attempt = 1; ; attempt++) {
      const body = typeof init.body === "function" ? init.body() : init.body;
      let response: Response;
      try {
        response = await this.#options.fetch(url, {
          method,
          body,
          headers: { Authorization: `Bearer ${this.#options.token}`, "User-Agent": "training-service", ...init.headers },
          // Node's fetch needs it to send a stream; workerd ignores it.
          ...(body instanceof ReadableStream ? { duplex: "half" } : {}),
        } as RequestInit);
      } catch (error) {
        // Our own upload stream's refusal (a body of the wrong length) reaches here as fetch's cause.
        const cause = (error as { cause?: unknown }).cause;
        if (cause instanceof ProviderError) throw cause;
        if (error instanceof ProviderError)
          throw new ProviderError(this.#redact(error.message), error.status, error.countsAsFailure, {
            retryInSeconds: error instanceof CircuitOpenError ? error.retryAfterSeconds : error.retryInSeconds,
            // An open breaker refused the call before anything was sent.
            unprocessed: error instanceof CircuitOpenError || error.unprocessed,
          });
        throw new ProviderError(this.#redact(`Replicate could not be reached: ${(error as Error).message}`), null, true);
      }
      const text = await response.text().catch(() => "");
      if (!response.ok) {
        const status = response.status;
        const retryable = status === 429 || (idempotent && (status === 503 || status === 504));
        const asked = retryable ? retryAfterMs(response.headers.get("Retry-After"), Date.now()) : null;
        const wait = asked ?? policy.backoffMs * 2 ** (attempt - 1) + Math.floor(Math.random() * 100);
        if (retryable && replayable && !init.once && attempt < policy.attempts && Date.now() + wait <= deadline) {
          await policy.sleep(wait);
          continue;
        }
        const tries = attempt > 1 ? ` (after ${attempt} tries)` : "";
        throw new ProviderError(this.#redact(`Replicate answered ${status}${tries}: ${errorDetail(text)}`), status, status >= 500, {
          ...(retryable ? { retryInSeconds: Math.max(1, Math.ceil((asked ?? wait) / 1000)) } : {}),
        });
      }
      return this.#answer(response.status, text);
    }
  }

  #answer(status: number, text: string): Answer {
    if (status === 204 || !text) return { status, body: null };
    try {
      return { status, body: JSON.parse(text) as unknown };
    } catch {
      throw new ProviderError(this.#redact(`Replicate answered ${status} with a body that is not JSON: ${snippet(text)}`), status, true);
    }
  }

  // A `next` link is followed only on the configured API root: the token never goes to another host.
  #sameOrigin(next: string): string | null {
    if (next.startsWith(this.#base + "/")) return next;
    if (next.startsWith("/")) return this.#base + next;
    const at = next.indexOf("/v1/");
    return at >= 0 ? this.#base + next.slice(at) : null;
  }

  // Real tokens are 40 characters; a shorter "token" would blank out ordinary words.
  #redact(message: string): string {
    return this.#options.token.length >= 8 ? message.split(this.#options.token).join("***") : message;
  }
}

/**
 * A training object (API answer or webhook payload) as a ProviderJob; throws ProviderError on a shape it cannot read.
 *
 * @example
 * parseTraining({ id: "t1", status: "processing", logs: "step 1", metrics: { predict_time: 2.5 } }).billed_seconds; // 2.5
 */
export function parseTraining(body: unknown): ProviderJob {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new ProviderError("Replicate's training is not a JSON object", null, false);
  const t = body as Record<string, unknown>;
  if (typeof t.id !== "string" || !t.id) throw new ProviderError("Replicate's training has no id", null, false);
  if (!PROVIDER_STATUSES.includes(t.status as ProviderStatus)) {
    const reported = JSON.stringify(t.status) ?? "(none)";
    throw new UnknownStatusError(
      t.id,
      reported.slice(0, 60),
      null,
      `Replicate's training ${t.id} has an unknown status ${reported.slice(0, 60)}`,
    );
  }
  const metrics = typeof t.metrics === "object" && t.metrics !== null ? (t.metrics as Record<string, unknown>) : {};
  const predict = metrics.predict_time;
  return {
    id: t.id,
    status: t.status as ProviderStatus,
    logs: typeof t.logs === "string" ? t.logs : "",
    billed_seconds: typeof predict === "number" && Number.isFinite(predict) && predict >= 0 ? predict : null,
    created_at: timestamp(t.created_at),
    started_at: timestamp(t.started_at),
    completed_at: timestamp(t.completed_at),
    output: t.output ?? null,
    error: t.error === null || t.error === undefined ? null : typeof t.error === "string" ? t.error : JSON.stringify(t.error),
  };
}

/**
 * Replicate's webhook payloads: each is the whole training, as its API answers it.
 *
 * @example
 * REPLICATE_WEBHOOKS.runId({ id: "t1", status: "processing" }); // "t1"
 */
export const REPLICATE_WEBHOOKS: WebhookReader = {
  runId: (payload) => {
    const id = typeof payload === "object" && payload !== null ? (payload as { id?: unknown }).id : undefined;
    return typeof id === "string" ? id : null;
  },
  job: parseTraining,
};

/**
 * Splits a Replicate model reference; throws a ProviderError naming the setting when it is not "owner/name:version".
 *
 * @example
 * parseModelRef("acme/trainer:0a1b"); // { owner: "acme", name: "trainer", version: "0a1b" }
 */
export function parseModelRef(model: string): { owner: string; name: string; version: string } {
  const match = /^([A-Za-z0-9][\w.-]*)\/([A-Za-z0-9][\w.-]*):([A-Za-z0-9][\w.-]*)$/.exec(model);
  if (!match)
    throw new ProviderError(
      `The training model must be a Replicate model version "owner/name:version", not "${model}" (the provider's training_model setting)`,
      null,
      false,
    );
  return { owner: match[1]!, name: match[2]!, version: match[3]! };
}

function multipartStream(
  preamble: Uint8Array,
  body: ReadableStream<Uint8Array>,
  size: number,
  epilogue: Uint8Array,
  onProgress?: (sent: number) => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let sent = 0;
  let stage: "preamble" | "body" | "done" = "preamble";
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (stage === "preamble") {
        stage = "body";
        controller.enqueue(preamble);
        return;
      }
      if (stage === "done") return;
      const { done, value } = await reader.read();
      if (done) {
        stage = "done";
        // The content-length was promised up front: a short body must fail the upload, not send a truncated file.
        if (sent !== size)
          return controller.error(new ProviderError(`The upload body had ${sent} bytes, not the ${size} announced`, null, false));
        controller.enqueue(epilogue);
        controller.close();
        return;
      }
      sent += value.byteLength;
      if (sent > size) {
        stage = "done";
        await reader.cancel().catch(() => {});
        return controller.error(new ProviderError(`The upload body is longer than the ${size} bytes announced`, null, false));
      }
      controller.enqueue(value);
      onProgress?.(sent);
    },
    async cancel(reason) {
      await reader.cancel(reason).catch(() => {});
    },
  });
}

// RFC 7578 / the HTML form encoding: a quote or line break would end the header early.
function formFilename(name: string): string {
  return name.replace(/"/g, "%22").replace(/\r/g, "%0D").replace(/\n/g, "%0A");
}

/**
 * A Retry-After header in milliseconds: delay-seconds or an HTTP-date (RFC 9110 10.2.3); null
 * when absent or unreadable.
 *
 * @example
 * retryAfterMs("2", Date.now()); // 2000
 */
export function retryAfterMs(header: string | null, now: number): number | null {
  const text = header?.trim() ?? "";
  if (!text) return null;
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

function enc(segment: string): string {
  return encodeURIComponent(segment);
}

function errorDetail(text: string): string {
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    if (typeof body.detail === "string" && body.detail) return snippet(body.detail);
    if (typeof body.title === "string" && body.title) return snippet(body.title);
  } catch {}
  return text ? snippet(text) : "(no detail)";
}

function snippet(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > DETAIL_CHARS ? `${flat.slice(0, DETAIL_CHARS)}...` : flat;
}

type Answer = { status: number; body: unknown };

function asObject({ status, body }: Answer, what: string): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new ProviderError(`Replicate's ${what} answer is not a JSON object`, status, true);
  return body as Record<string, unknown>;
}

function timestamp(value: unknown): string | null {
  return typeof value === "string" && value ? value : null;
}
