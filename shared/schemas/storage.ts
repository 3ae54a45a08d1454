import { z } from "@hono/zod-openapi";

/** Defaults of the per-job storage quota (GET/PUT /api/admin/storage-quota). */
export const STORAGE_QUOTA_DEFAULTS = { max_bytes: 50 * 1024 ** 3, max_objects: 100_000 };

export const StorageQuota = z
  .object({
    max_bytes: z.number().int().min(0).openapi({
      description: "The most bytes one job may keep on the storage endpoint, counting parts of multipart uploads in progress",
      example: STORAGE_QUOTA_DEFAULTS.max_bytes,
    }),
    max_objects: z
      .number()
      .int()
      .min(0)
      .openapi({ description: "The most objects one job may keep on the storage endpoint", example: STORAGE_QUOTA_DEFAULTS.max_objects }),
  })
  .openapi("StorageQuota");
export type StorageQuota = z.infer<typeof StorageQuota>;

export const StorageQuotaUpdate = z
  .strictObject({
    max_bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
    max_objects: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  })
  .openapi("StorageQuotaUpdate", { example: { max_bytes: 107374182400, max_objects: 200000 } });

/** The storage endpoint's credentials for one job (for its owner, or for the runner that hands them to its trainer). */
export const StorageCredentials = z
  .object({
    job_id: z.string(),
    access_key_id: z.string().openapi({ description: "The job's upload token, used as the S3 access key id" }),
    secret_access_key: z.string().nullable().openapi({
      description:
        "Shown only in this answer. Null when the job's provider has credentials configured manually (source provider): the job gets the secret from the server, never the caller.",
    }),
    source: z.enum(["job", "provider"]).openapi({
      description: "job: fresh credentials for this job alone; provider: the provider's manually configured pair (s3_access_key_id)",
    }),
    endpoint_url: z.string().openapi({
      description: "The S3 endpoint URL for clients (path-style addressing)",
      example: "https://train.example.com/api/cloud/storage",
    }),
    bucket: z.string().openapi({ description: "The job's bucket: its directory on the storage endpoint" }),
    region: z.string().openapi({ example: "auto" }),
  })
  .openapi("StorageCredentials");
