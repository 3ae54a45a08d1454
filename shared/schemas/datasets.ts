import { z } from "@hono/zod-openapi";
import { CursorQuery, NextCursor } from "./common";

/** Defaults of the per-owner dataset quota (GET/PUT /api/admin/dataset-quota). */
export const DATASET_QUOTA_DEFAULTS = { max_bytes: 50 * 1024 ** 3, max_files: 200_000 };

const amount = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const DatasetQuota = z
  .object({
    max_bytes: amount.openapi({
      description: "The most bytes of files one user's dataset folders hold (the top-level folders they own, everything under them)",
      example: DATASET_QUOTA_DEFAULTS.max_bytes,
    }),
    max_files: amount.openapi({
      description: "The most files one user's dataset folders hold; each folder created counts as one",
      example: DATASET_QUOTA_DEFAULTS.max_files,
    }),
  })
  .openapi("DatasetQuota");
export type DatasetQuota = z.infer<typeof DatasetQuota>;

export const DatasetQuotaUpdate = z
  .strictObject({ max_bytes: amount.optional(), max_files: amount.optional() })
  .openapi("DatasetQuotaUpdate", { example: { max_bytes: 107374182400, max_files: 500000 } });

/** The most entries (folders and files) of a folder one listing page holds, and the default. */
export const MAX_DATASET_PAGE = 1000;
export const DEFAULT_DATASET_PAGE = 500;

export const DatasetListingQuery = z.object({
  // No default here: a cursor carries its path, and a path sent with one must be the same.
  path: z
    .string()
    .max(1024)
    .optional()
    .openapi({ description: "Relative to the datasets root (default: the root); a cursor keeps its path" }),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_DATASET_PAGE)
    .default(DEFAULT_DATASET_PAGE)
    .openapi({ description: `Entries (folders and files together) per page, 1 to ${MAX_DATASET_PAGE}` }),
  cursor: CursorQuery,
});

export const DatasetListing = z
  .object({
    path: z.string(),
    folders: z.array(z.string()),
    files: z.array(z.object({ name: z.string(), size: z.number().int(), sha256: z.string().nullable(), uploaded: z.string() })),
    next_cursor: NextCursor,
  })
  .openapi("DatasetListing");
