/*
 * The cloud path's shared shapes (README "Cloud training"): the cloud provider client interface
 * and the outbound call it makes every request through. Types only, so the Worker, the
 * local host and the tests can all name them.
 */

/**
 * A provider's job status, as providers report it (Replicate's names). Replicate documents six for
 * a training (OpenAPI https://api.replicate.com/openapi.json, schemas_training_response.status;
 * replicate-javascript index.d.ts `Status`): `canceled` (cancelled, by the user or at its
 * deadline, while running) and `aborted` (terminated before it started running, e.g. a deadline
 * reached while it waited: nothing ran, nothing is billed).
 */
export type ProviderStatus = "starting" | "processing" | "succeeded" | "failed" | "canceled" | "aborted";

/** Every status the client knows, in the order a run moves through them. */
export const PROVIDER_STATUSES: readonly ProviderStatus[] = ["starting", "processing", "succeeded", "failed", "canceled", "aborted"];

/** True for a status the provider never leaves: the run is over. */
export const isEndStatus = (status: ProviderStatus) => status !== "starting" && status !== "processing";

/** One job at the provider, as the client reads it. */
export interface ProviderJob {
  /** The provider's id for the run (Replicate: the training id). */
  id: string;
  status: ProviderStatus;
  /** Everything the run has logged so far (the provider sends the whole text each time). */
  logs: string;
  /** Seconds of hardware time billed so far (Replicate: metrics.predict_time); null until known. */
  billed_seconds: number | null;
  created_at: string | null;
  started_at: string | null;
  completed_at: string | null;
  output: unknown;
  error: string | null;
}

/** What `run_job` submits. */
export interface RunSpec {
  /** This service's job id (for the provider's records and the webhook URL). */
  job_id: string;
  /** The training input, as the trainer's contract lays it out (edge/cloud/trainer-input.ts). */
  input: object;
  /** Where the provider posts status updates (null: no webhooks; polling only). */
  webhook_url: string | null;
}

/** An uploaded file at the provider's file hosting. */
export interface ProviderFile {
  id: string;
  /** The URL the run downloads it from. */
  url: string;
  size: number;
}

export interface CredentialCheck {
  valid: boolean;
  /** Why not, or whose account ("account acme (organization)"). */
  message: string;
  latency_ms: number;
}

/**
 * The cloud provider client. Its names are snake_case (provider_name, run_job, get_job_status),
 * like the API's fields. Every call goes through an OutboundFetch (timeout, circuit breaker, TLS and proxy
 * settings); a failure throws ProviderError.
 */
export interface CloudProvider {
  readonly provider_name: string;
  readonly supports_cost_tracking: boolean;
  readonly supports_live_logs: boolean;
  validate_credentials(): Promise<CredentialCheck>;
  list_jobs(limit?: number): Promise<ProviderJob[]>;
  run_job(spec: RunSpec): Promise<ProviderJob>;
  cancel_job(job_id: string): Promise<ProviderJob>;
  get_job_logs(job_id: string): Promise<string>;
  get_job_status(job_id: string): Promise<ProviderJob>;
}

/** A provider with file hosting (the hosted provider): archives go there, not through the service. */
export interface FileHostingProvider extends CloudProvider {
  /** Streams `body` (exactly `size` bytes) to the provider; `onProgress` gets the bytes sent so far. */
  upload_file(name: string, body: ReadableStream<Uint8Array>, size: number, onProgress?: (sent: number) => void): Promise<ProviderFile>;
  delete_file(file_id: string): Promise<void>;
  /** The provider's webhook signing secret (whsec_...), for verifying its webhooks. */
  webhook_secret(): Promise<string>;
}

/**
 * How a provider's webhook payloads are read: the provider's own parser, which needs no client
 * (nothing is fetched), so a delivery is applied whatever state the provider's token is in.
 */
export interface WebhookReader {
  /** The provider's id of the run the payload is about (Replicate: the training id), or null when it names none. */
  runId(payload: unknown): string | null;
  /** The payload as the provider's view of its job; throws ProviderError (UnknownStatusError for a status the client does not know). */
  job(payload: unknown): ProviderJob;
}

/** What a ProviderError knows beyond its status. */
export interface ProviderErrorDetails {
  /** The provider asked to be called again no sooner than this (Retry-After, or an open circuit breaker). */
  retryInSeconds?: number;
  /**
   * The provider certainly did not act on the request: nothing was sent, or it answered 429 or
   * another 4xx refusal. Default: true for an answered 4xx, false otherwise (no answer, a timeout,
   * a 5xx or an unreadable 2xx may each have been acted on). A training create that fails without
   * it is never sent again (it may have started, and would bill, a second run).
   */
  unprocessed?: boolean;
}

/** A provider call failed: the provider answered an error (status), or never answered (status null). */
export class ProviderError extends Error {
  /** Set when the provider said when to try again (the breaker's CircuitOpenError has its own retryAfterSeconds). */
  readonly retryInSeconds: number | undefined;
  readonly unprocessed: boolean;

  constructor(
    message: string,
    readonly status: number | null,
    /** Counted by the circuit breaker: network failures, timeouts and 5xx; not 4xx (the request was wrong, the provider is up). */
    readonly countsAsFailure: boolean,
    details: ProviderErrorDetails = {},
  ) {
    super(message);
    this.name = "ProviderError";
    this.retryInSeconds = details.retryInSeconds;
    this.unprocessed = details.unprocessed ?? (status !== null && status >= 400 && status < 500);
  }
}

/**
 * A training whose status the client does not know (one Replicate added after this client was
 * written). Never applied; the cloud job gives up on it after a bounded number of such reports
 * (edge/cloud/cloud-job.ts MAX_UNKNOWN_STATUS_REPORTS) rather than asking again for ever.
 */
export class UnknownStatusError extends ProviderError {
  constructor(
    readonly trainingId: string,
    /** The status as the provider wrote it (JSON, so an absent or odd value still reads). */
    readonly reported: string,
    status: number | null,
    message: string,
  ) {
    super(message, status, true);
    this.name = "UnknownStatusError";
  }
}

/**
 * How the provider clients reach the network: `fetch`'s shape, through the outbound layer
 * (edge/cloud/outbound.ts), which applies the provider's timeout, TLS and proxy settings and its
 * circuit breaker. Tests of a client alone pass the global fetch.
 */
export type OutboundFetch = (input: string, init?: RequestInit) => Promise<Response>;

/** The queue status a provider status maps to. */
export function queueStatusOf(status: ProviderStatus): "running" | "completed" | "failed" | "cancelled" {
  switch (status) {
    case "starting":
    case "processing":
      return "running";
    case "succeeded":
      return "completed";
    case "failed":
    case "aborted":
      return "failed";
    case "canceled":
      return "cancelled";
  }
}

/*
 * What a cloud job is given (its training input: the trainer's contract, result destination and
 * credentials) is laid out in edge/cloud/trainer-input.ts.
 */
