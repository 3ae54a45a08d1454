import {
  DatasetDeleted,
  DatasetDeleteQuery,
  DatasetFileQuery,
  DatasetListing,
  DatasetListingQuery,
  DatasetQuota,
  DatasetUpload,
  DatasetUsage,
  DatasetUsageQuery,
} from "../schemas/datasets";
import { endpoint } from "./endpoint";

/**
 * Datasets: the listing, deletion and the quota. Part of `endpoints` (./endpoints.ts); each with its
 * route's own schemas. Uploads are multipart forms (POST /api/datasets/upload, /upload/zip): a client
 * sends them with client.url(...) and its own form, so it can report progress.
 */
export const datasetEndpoints = {
  datasetList: endpoint({ method: "GET", path: "/api/datasets", query: DatasetListingQuery, response: DatasetListing }),
  datasetDelete: endpoint({ method: "DELETE", path: "/api/datasets", query: DatasetDeleteQuery, response: DatasetDeleted }),
  datasetFile: endpoint({ method: "GET", path: "/api/datasets/file", query: DatasetFileQuery, response: "raw" }),
  datasetUsage: endpoint({ method: "GET", path: "/api/datasets/usage", query: DatasetUsageQuery, response: DatasetUsage }),
  /** Multipart (files[] and target_path): send the form yourself to client.url(...) with client.authHeaders(). */
  datasetUpload: endpoint({ method: "POST", path: "/api/datasets/upload", response: DatasetUpload }),
  /** Multipart (file and target_path), as datasetUpload. */
  datasetUploadZip: endpoint({ method: "POST", path: "/api/datasets/upload/zip", response: DatasetUpload }),
  datasetQuota: endpoint({ method: "GET", path: "/api/admin/dataset-quota", response: DatasetQuota }),
} as const;
