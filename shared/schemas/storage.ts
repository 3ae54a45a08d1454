import { z } from "@hono/zod-openapi";

/** Defaults of the per-job storage quota (GET/PUT /api/admin/storage-quota). */
export const STORAGE_QUOTA_DEFAULTS = { max_bytes: 50 * 1024 ** 3, max_objects: 100_000 };

export const StorageQuota = z
  .object({
    max_bytes: z.number().int().min(0).openapi({ description: "The most bytes one job may keep on the storage endpoint, counting parts of multipart uploads in progress", example: STORAGE_QUOTA_DEFAULTS.max_bytes }),
    max_objects: z.number().int().min(0).openapi({ description: "The most objects one job may keep on the storage endpoint", example: STORAGE_QUOTA_DEFAULTS.max_objects }),
  })
  .openapi("StorageQuota");
export type StorageQuota = z.infer<typeof StorageQuota>;

export const StorageQuotaUpdate = z
  .strictObject({
    max_bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
    max_objects: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  })
  .openapi("StorageQuotaUpdate", { example: { max_bytes: 107374182400, max_objects: 200000 } });
