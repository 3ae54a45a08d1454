import type { Database } from "../db/client";

/*
 * The multipart uploads in progress on the storage endpoint and their parts, as S3 lists them
 * (ListMultipartUploads, ListParts). R2's binding lists neither, so each step is recorded here
 * beside the R2 call that makes it: the upload when created, each part once R2 has stored it,
 * both forgotten when the upload is completed or aborted. R2 stays the authority on the bytes;
 * these rows only answer the listings.
 */

export interface UploadRow {
  uploadId: string;
  key: string;
  initiated: string;
}

export interface PartRow {
  partNumber: number;
  etag: string;
  size: number;
  uploaded: string;
}

/** Records an upload R2 has just created for `key` (the key inside the job's bucket). */
export async function recordUpload(db: Database, jobId: string, key: string, uploadId: string): Promise<void> {
  await db.$client.execute({
    sql: "INSERT INTO storage_uploads (upload_id, job_id, object_key, initiated_at) VALUES (?, ?, ?, ?)",
    args: [uploadId, jobId, key, new Date().toISOString()],
  });
}

/**
 * Records a part R2 has stored: `etag` is its MD5 (what S3 clients are given and send back),
 * `r2Etag` R2's own tag for it. A part uploaded again replaces the earlier one, as in S3.
 */
export async function recordPart(
  db: Database,
  uploadId: string,
  part: { partNumber: number; etag: string; r2Etag: string; size: number },
): Promise<void> {
  await db.$client.execute({
    sql: `INSERT INTO storage_parts (upload_id, part_number, etag, r2_etag, size, uploaded_at) VALUES (?, ?, ?, ?, ?, ?)
          ON CONFLICT (upload_id, part_number) DO UPDATE SET etag = excluded.etag, r2_etag = excluded.r2_etag, size = excluded.size, uploaded_at = excluded.uploaded_at`,
    args: [uploadId, part.partNumber, part.etag, part.r2Etag, part.size, new Date().toISOString()],
  });
}

/**
 * The parts a CompleteMultipartUpload names (part number and the ETag the client was given), as
 * R2 wants them: each with R2's own tag. Null when one was never stored under that ETag (S3:
 * InvalidPart).
 */
export async function partsForCompletion(
  db: Database,
  uploadId: string,
  parts: { partNumber: number; etag: string }[],
): Promise<{ partNumber: number; etag: string }[] | { missing: number }> {
  const result = await db.$client.execute({
    sql: "SELECT part_number, etag, r2_etag FROM storage_parts WHERE upload_id = ?",
    args: [uploadId],
  });
  const stored = new Map(result.rows.map((row) => [Number(row.part_number), { etag: String(row.etag), r2Etag: String(row.r2_etag) }]));
  const mapped: { partNumber: number; etag: string }[] = [];
  for (const part of parts) {
    const found = stored.get(part.partNumber);
    if (!found || found.etag !== part.etag) return { missing: part.partNumber };
    mapped.push({ partNumber: part.partNumber, etag: found.r2Etag });
  }
  return mapped;
}

/** Forgets an upload that was completed or aborted. */
export async function forgetUpload(db: Database, uploadId: string): Promise<void> {
  await db.$client.batch(
    [
      { sql: "DELETE FROM storage_parts WHERE upload_id = ?", args: [uploadId] },
      { sql: "DELETE FROM storage_uploads WHERE upload_id = ?", args: [uploadId] },
    ],
    "write",
  );
}

/**
 * One page of an upload's parts after `marker` (S3's part-number-marker), or null when the upload
 * is not this job's upload of `key` (S3 answers NoSuchUpload).
 */
export async function listParts(
  db: Database,
  jobId: string,
  key: string,
  uploadId: string,
  options: { marker: number; max: number },
): Promise<{ upload: UploadRow; parts: PartRow[]; truncated: boolean } | null> {
  const [upload, parts] = await db.$client.batch(
    [
      {
        sql: "SELECT upload_id, object_key, initiated_at FROM storage_uploads WHERE upload_id = ? AND job_id = ? AND object_key = ?",
        args: [uploadId, jobId, key],
      },
      {
        sql: "SELECT part_number, etag, size, uploaded_at FROM storage_parts WHERE upload_id = ? AND part_number > ? ORDER BY part_number LIMIT ?",
        args: [uploadId, options.marker, options.max + 1],
      },
    ],
    "read",
  );
  const row = upload!.rows[0];
  if (!row) return null;
  const rows = parts!.rows.map((p) => ({
    partNumber: Number(p.part_number),
    etag: String(p.etag),
    size: Number(p.size),
    uploaded: String(p.uploaded_at),
  }));
  return {
    upload: { uploadId: String(row.upload_id), key: String(row.object_key), initiated: String(row.initiated_at) },
    parts: rows.slice(0, options.max),
    truncated: rows.length > options.max,
  };
}

/**
 * One page of a job's uploads in progress, ordered by key then upload id, whose keys start with
 * `prefix`, after (`keyMarker`, `uploadIdMarker`) as S3 pages them: without an upload id
 * marker, after every upload of `keyMarker`.
 */
export async function listUploads(
  db: Database,
  jobId: string,
  options: { prefix: string; keyMarker: string; uploadIdMarker: string; max: number },
): Promise<{ uploads: UploadRow[]; truncated: boolean }> {
  // Keys are compared as SQLite compares TEXT (by bytes, as S3 orders keys); the prefix by
  // substr so that % and _ in it mean themselves.
  const result = await db.$client.execute({
    sql: `SELECT upload_id, object_key, initiated_at FROM storage_uploads
          WHERE job_id = ? AND substr(object_key, 1, length(?)) = ?
            AND (object_key > ? OR (? != '' AND object_key = ? AND upload_id > ?))
          ORDER BY object_key, upload_id LIMIT ?`,
    args: [
      jobId,
      options.prefix,
      options.prefix,
      options.keyMarker,
      options.uploadIdMarker,
      options.keyMarker,
      options.uploadIdMarker,
      options.max + 1,
    ],
  });
  const rows = result.rows.map((r) => ({ uploadId: String(r.upload_id), key: String(r.object_key), initiated: String(r.initiated_at) }));
  return { uploads: rows.slice(0, options.max), truncated: rows.length > options.max };
}

/**
 * Multipart uploads left open by jobs that are no longer active (ended, or deleted), oldest
 * first, with the R2 key they write: what `abortEndedUploads` cleans up. `jobId`: one job only.
 */
export async function endedJobUploads(
  db: Database,
  limit: number,
  jobId?: string,
): Promise<{ uploadId: string; jobId: string; key: string; outputRoot: string }[]> {
  const result = await db.$client.execute({
    sql: `SELECT u.upload_id, u.job_id, u.object_key, COALESCE(d.output_root, 'outputs') AS output_root
          FROM storage_uploads u LEFT JOIN queue_entries q ON q.job_id = u.job_id LEFT JOIN storage_directories d ON d.job_id = u.job_id
          WHERE (q.status IS NULL OR q.status NOT IN ('pending', 'running', 'blocked')) AND (?1 IS NULL OR u.job_id = ?1)
          ORDER BY u.initiated_at LIMIT ?2`,
    args: [jobId ?? null, limit],
  });
  return result.rows.map((r) => ({
    uploadId: String(r.upload_id),
    jobId: String(r.job_id),
    key: String(r.object_key),
    outputRoot: String(r.output_root),
  }));
}
