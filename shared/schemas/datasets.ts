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
  captions: z.enum(["true", "false"]).optional().openapi({
    description:
      "`true`: each image on the page also carries `caption`, the text of its `.txt` sidecar of the same stem (SimpleTuner's `textfile` caption strategy), at most 2,000 characters; null when it has none",
  }),
});

export const DatasetListing = z
  .object({
    path: z.string(),
    folders: z.array(z.string()),
    files: z.array(
      z.object({
        name: z.string(),
        size: z.number().int(),
        sha256: z.string().nullable(),
        uploaded: z.string(),
        caption: z
          .string()
          .nullable()
          .optional()
          .openapi({ description: "With `captions=true`, on images only: the sidecar's text, or null" }),
      }),
    ),
    next_cursor: NextCursor,
  })
  .openapi("DatasetListing");

/** A top-level dataset folder named in the path (GET/PUT /api/datasets/folders/{name}/cloud-sharing). */
export const DatasetFolderParam = z.object({
  name: z
    .string()
    .min(1)
    .max(255)
    .openapi({ param: { name: "name", in: "path" }, description: "A top-level folder under the datasets root", example: "portraits" }),
});

export const DatasetCloudSharing = z
  .object({
    folder: z.string().openapi({ description: "The top-level folder", example: "portraits" }),
    owner: z
      .string()
      .nullable()
      .openapi({ description: "Its owner's username; null for a folder from before folders had owners (nobody's)", example: "alice" }),
    allow_cloud: z.boolean().openapi({
      description:
        "Whether other users' cloud submissions may package this folder and send it to the provider (its owner's and admins' always may)",
    }),
    changed_by: z.string().nullable().openapi({ description: "Who set allow_cloud last; null while nobody has" }),
    changed_at: z.string().nullable().openapi({ description: "When allow_cloud was set last (ISO 8601); null while nobody has" }),
  })
  .openapi("DatasetCloudSharing");
export type DatasetCloudSharing = z.infer<typeof DatasetCloudSharing>;

export const DatasetCloudSharingUpdate = z
  .strictObject({
    allow_cloud: z
      .boolean()
      .openapi({ description: "true: other users' cloud submissions may package the folder; false: only its owner's and admins'" }),
  })
  .openapi("DatasetCloudSharingUpdate", { example: { allow_cloud: true } });

export const DatasetDeleteQuery = z.object({ path: z.string().min(1).max(1024) });

export const DatasetDeleted = z
  .object({ success: z.literal(true), path: z.string(), deleted_files: z.number().int(), deleted_bytes: z.number().int() })
  .openapi("DatasetDeleted");

/** One dataset file to read (GET /api/datasets/file). */
export const DatasetFileQuery = z.object({
  path: z.string().min(1).max(1024).openapi({ description: "The file, relative to the datasets root", example: "portraits/001.png" }),
  v: z
    .string()
    .max(64)
    .optional()
    .openapi({ description: "Ignored by the service: a client puts the file's SHA-256 here so its cache follows the content" }),
});

/** The longest caption a listing carries (longer sidecars are cut there). */
export const MAX_LISTED_CAPTION = 2000;

export const DatasetUsageQuery = z.object({
  path: z
    .string()
    .max(1024)
    .optional()
    .openapi({ description: "A dataset path; its top-level folder's owner is counted. Empty or absent: the caller's own" }),
});

export const DatasetUsage = z
  .object({
    folder: z.string().nullable().openapi({ description: "The top-level folder of `path`; null at the root", example: "portraits" }),
    owner: z.string().nullable().openapi({
      description: "Whose quota the folder counts against (its creator); null for nobody's (a folder from before owners, or none yet)",
    }),
    used_bytes: z.number().int(),
    used_files: z.number().int(),
    max_bytes: z.number().int(),
    max_files: z.number().int(),
    may_write: z.boolean().openapi({
      description:
        "Whether the caller may change files here (upload, delete): the folder's owner, leads and admins; at the root, leads and admins (a researcher's upload into the root makes a folder of their own)",
    }),
  })
  .openapi("DatasetUsage");
export type DatasetUsage = z.infer<typeof DatasetUsage>;
const StoredDatasetFile = z.object({ name: z.string(), path: z.string(), size: z.number().int(), sha256: z.string() });
/** POST /api/datasets/upload and /upload/zip: what was stored (the zip's skipped entries by name). */
export const DatasetUpload = z
  .object({ success: z.literal(true), target_path: z.string(), files: z.array(StoredDatasetFile), skipped: z.array(z.string()) })
  .openapi("DatasetUpload");
