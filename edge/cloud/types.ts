/*
 * The cloud path's shared shapes (ARCHITECTURE "Cloud path"): the provider client interface of
 * spec 1 and the outbound call it makes every request through. Types only, so the Worker, the
 * local host and the tests can all name them.
 */

/** A provider's job status, as providers report it (Replicate's names). */
export type ProviderStatus = "starting" | "processing" | "succeeded" | "failed" | "canceled";

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
  /** The training input: serialised configuration, archive URL, result destination environment. */
  input: Record<string, unknown>;
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
 * The provider client of spec 1. Names are the spec's (snake_case), so a reader can hold them
 * against it. Every call goes through an OutboundFetch (timeout, circuit breaker, TLS and proxy
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

/** A provider with file hosting (the hosted provider): archives go there, not through the service (spec 1 step 3). */
export interface FileHostingProvider extends CloudProvider {
  /** Streams `body` (exactly `size` bytes) to the provider; `onProgress` gets the bytes sent so far. */
  upload_file(name: string, body: ReadableStream<Uint8Array>, size: number, onProgress?: (sent: number) => void): Promise<ProviderFile>;
  delete_file(file_id: string): Promise<void>;
  /** The provider's webhook signing secret (whsec_...), for verifying its webhooks. */
  webhook_secret(): Promise<string>;
}

/** A provider call failed: the provider answered an error (status), or never answered (status null). */
export class ProviderError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
    /** Counted by the circuit breaker: network failures, timeouts and 5xx; not 4xx (the request was wrong, the provider is up). */
    readonly countsAsFailure: boolean,
  ) {
    super(message);
    this.name = "ProviderError";
  }
}

/**
 * How the provider clients reach the network: `fetch`'s shape, through the outbound layer
 * (edge/cloud/outbound.ts), which applies the provider's timeout, TLS and proxy settings and its
 * circuit breaker. Tests of a client alone pass the global fetch.
 */
export type OutboundFetch = (input: string, init?: RequestInit) => Promise<Response>;

/** The queue status a provider status maps to (spec 3 statuses). */
export function queueStatusOf(status: ProviderStatus): "running" | "completed" | "failed" | "cancelled" {
  switch (status) {
    case "starting":
    case "processing":
      return "running";
    case "succeeded":
      return "completed";
    case "failed":
      return "failed";
    case "canceled":
      return "cancelled";
  }
}

/*
 * The environment a cloud job is given (spec 1 result destinations, 5.7), inside its training
 * input as `input.env`: the trainer's entry point exports each before training. What is set
 * depends on the destination chosen at submission:
 * - always: SERVICE_JOB_ID, RESULT_DESTINATION ("storage" | "s3" | "hub");
 * - storage (the built-in endpoint) and s3: RESULT_S3_ENDPOINT, RESULT_S3_BUCKET, RESULT_S3_PREFIX,
 *   RESULT_S3_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (the job's own credentials for
 *   storage; the Publishing settings' secrets for s3);
 * - hub: HF_TOKEN, HUB_MODEL_ID, HF_ENDPOINT.
 * The training input also carries `config` (the merged option map, JSON), `dataloader` (JSON, its
 * local datasets' instance_data_dir rewritten to paths inside the archive) and `dataset_archive`
 * (the archive's URL at the provider, or null when nothing was packaged).
 */
export type ResultEnvironment = Record<string, string>;
