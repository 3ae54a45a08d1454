import type { Migration } from "./migration";

/**
 * v12: each job's directory on the storage endpoint (its output path, fixed when its first
 * credentials were issued, so a job's directory never moves), and the multipart uploads in
 * progress with their parts: R2's binding can neither list a bucket's uploads nor an upload's
 * parts, and S3 clients resume interrupted uploads with ListMultipartUploads and ListParts. A part's `etag` is its MD5, as S3
 * gives it to clients; `r2_etag` is R2's own (opaque) tag, which completing the upload needs.
 */
export const v12: Migration = {
  version: 12,
  name: "storage_uploads",
  statements: [
    `CREATE TABLE storage_directories (
      job_id TEXT PRIMARY KEY,
      output_root TEXT NOT NULL,
      created_at TEXT NOT NULL
    )`,
    `CREATE TABLE storage_uploads (
      upload_id TEXT PRIMARY KEY,
      job_id TEXT NOT NULL,
      object_key TEXT NOT NULL,
      initiated_at TEXT NOT NULL
    )`,
    `CREATE INDEX storage_uploads_job ON storage_uploads (job_id, object_key, upload_id)`,
    `CREATE TABLE storage_parts (
      upload_id TEXT NOT NULL,
      part_number INTEGER NOT NULL,
      etag TEXT NOT NULL,
      r2_etag TEXT NOT NULL,
      size INTEGER NOT NULL,
      uploaded_at TEXT NOT NULL,
      PRIMARY KEY (upload_id, part_number)
    )`,
  ],
};
