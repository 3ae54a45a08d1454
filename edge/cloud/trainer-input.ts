import type { CloudSettings, Destination } from "../../shared/schemas/cloud";
import type { Database } from "../db/client";
import { ApiError } from "../errors";
import type { StoredProviderSettings } from "./provider-settings";
import { issueStorageCredentials } from "../storage/credentials";
import { publicBase } from "./cloud-settings";

/*
 * The training input a cloud job is created with, after its archive is uploaded: the trainer's
 * input contract (README "Cloud training"). The hosted provider keeps a training's input for good and shows it, unredacted,
 * to everyone in the organisation; only inputs the trainer declares as Cog `Secret` are redacted
 * once sent to it. So every value here is a flat input of a Cog type (Cog has no map input), and
 * the only secrets are the storage destination's per-job keys, as Secret inputs: they work only
 * for this job's bucket and die when the job ends. Nothing long-lived (a hub token, S3 publishing
 * keys, the provider token) is ever in it: the hub and S3 publishing destinations are refused for
 * cloud jobs at submit (edge/cloud/submit.ts).
 *
 * The trainer's input contract (what the trainer model's predictor must declare):
 *
 * | input                        | Cog type      | value                                                                 |
 * |------------------------------|---------------|-----------------------------------------------------------------------|
 * | config                       | str           | the environment's merged option map, JSON (`{"--learning_rate": ...}`) |
 * | dataloader                   | str           | the dataloader, JSON; local datasets' instance_data_dir inside the archive |
 * | dataset_archive              | Path (optional) | the zip of the local datasets at the provider; omitted when none      |
 * | service_job_id               | str           | this service's job id (`cloud-...`)                                   |
 * | result_destination           | str           | `storage` (the only destination of a cloud job)                       |
 * | result_s3_endpoint           | str           | the storage endpoint, `<public URL>/api/cloud/storage`                |
 * | result_s3_bucket             | str           | the job's bucket: its job id                                          |
 * | result_s3_prefix             | str           | key prefix inside the bucket (empty)                                  |
 * | result_s3_region             | str           | `auto`                                                                |
 * | result_s3_access_key_id      | Secret        | the job's access key id (its upload token)                            |
 * | result_s3_secret_access_key  | Secret        | the job's secret key                                                  |
 *
 * The trainer uploads its results with any S3 client (path style, SigV4) to the endpoint, bucket
 * and prefix given, signing with the two Secret inputs (exported, for instance, as
 * AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY inside the run only).
 */

/** The inputs declared `Secret` in the trainer's contract: the only ones that may carry a credential. */
export const SECRET_INPUTS = ["result_s3_access_key_id", "result_s3_secret_access_key"] as const;

/** A training's input, as the trainer's contract above names it (a type, so it is a RunSpec's input as it stands). */
export type TrainerInput = {
  config: string;
  dataloader: string;
  /** A Cog `Path`: the URL the provider downloads into the run. Absent when nothing was packaged. */
  dataset_archive?: string;
  service_job_id: string;
  result_destination: "storage";
  result_s3_endpoint: string;
  result_s3_bucket: string;
  result_s3_prefix: string;
  result_s3_region: string;
  /** Cog `Secret`. */
  result_s3_access_key_id: string;
  /** Cog `Secret`. */
  result_s3_secret_access_key: string;
};

/** What the input is built from: the job's row (id, destination), its package and archive, and the settings in force. */
export interface TrainerInputSource {
  db: Database;
  jobId: string;
  /** The job's stored destination (cloud_jobs.destination, JSON). */
  destination: string;
  plan: { config: Uint8Array; dataloader: Uint8Array };
  archive: { url: string } | null;
  settings: StoredProviderSettings;
  cloud: CloudSettings;
  /** SERVICE_PUBLIC_URL (readConfig(env).publicUrl). */
  servicePublicUrl: URL | undefined;
}

/**
 * The training input of a job about to be created at its provider: issues the job's storage
 * credentials (rotating any earlier pair) and lays out the contract above. Refuses (409, which
 * fails the job with the reason) what must not train: a provider without training_destination
 * (never the trainer model itself), a destination other than storage (a job queued before those
 * were refused for cloud jobs), no public URL for the results.
 *
 * @example
 * const input = await trainerInput({ db, jobId, destination: row.destination, plan, archive, settings, cloud, servicePublicUrl });
 * input.result_s3_bucket; // jobId
 */
export async function trainerInput(source: TrainerInputSource): Promise<TrainerInput> {
  const { jobId, settings, cloud } = source;
  if (!settings.training_destination)
    throw new ApiError(
      409,
      "provider_not_configured",
      "the provider has no training_destination: the training would be pushed into the trainer model itself; an admin sets a model of the provider account's own",
    );
  const destination = JSON.parse(source.destination) as Destination;
  if (destination.type !== "storage") throw new ApiError(409, "destination_unavailable", unscopedDestination(destination.type));
  const issued = await issueStorageCredentials(source.db, jobId, null);
  const base = issued.public_url ? new URL(issued.public_url).origin : publicBase(cloud, source.servicePublicUrl);
  if (!base)
    throw new ApiError(
      409,
      "destination_unavailable",
      "the cloud job could not reach this service to deliver its results: no public URL is set (PUT /api/cloud/settings public_url, SERVICE_PUBLIC_URL, or the provider's s3_public_url)",
    );
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return {
    config: decode(source.plan.config),
    dataloader: decode(source.plan.dataloader),
    ...(source.archive ? { dataset_archive: source.archive.url } : {}),
    service_job_id: jobId,
    result_destination: "storage",
    result_s3_endpoint: `${base}/api/cloud/storage`,
    result_s3_bucket: jobId,
    result_s3_prefix: "",
    result_s3_region: "auto",
    result_s3_access_key_id: issued.access_key_id,
    // Null when the provider's pair is configured manually: the job gets that pair's secret.
    result_s3_secret_access_key: issued.secret_access_key ?? settings.s3_secret_access_key ?? "",
  };
}

/**
 * Why results of a cloud job cannot go to the model hub or the S3 publishing bucket, and what to
 * use instead: the service has no way to give a job credentials scoped to that one destination
 * and expiring with it, and it never hands out its long-lived ones.
 */
export function unscopedDestination(type: "hub" | "s3"): string {
  const what =
    type === "hub"
      ? "the model hub: the service cannot give a cloud job a hub token limited to one repository and expiring with the job, and it never hands out its own long-lived hub token"
      : "the S3 publishing bucket: the service cannot give a cloud job keys limited to its own prefix and expiring with the job, and it never hands out the long-lived publishing keys";
  return `Results of a cloud job cannot be delivered to ${what} (the provider keeps a training's input and shows it to the whole organisation). Use the storage destination ({"type": "storage"}): its keys work only for the job's own bucket and end with the job; download or publish the model from there`;
}

/**
 * The webhook URL a job is created with: only over HTTPS (the provider sends webhooks to HTTPS
 * addresses only); with an http:// public URL, or none, the job is followed by polling alone.
 *
 * @example
 * webhookUrl("https://train.example.com", "replicate"); // "https://train.example.com/api/webhooks/replicate"
 * webhookUrl("http://10.0.0.5:8001", "replicate"); // null
 */
export function webhookUrl(base: string | null, provider: string): string | null {
  return base && /^https:\/\//i.test(base) ? `${base}/api/webhooks/${provider}` : null;
}
