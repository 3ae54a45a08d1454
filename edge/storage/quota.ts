import type { Database } from "../db/client";
import { getSetting, parseSetting } from "../settings-store";
import type { StorageQuota } from "../../shared/schemas/storage";
import { S3Error } from "./errors";

/*
 * The per-job storage quota (bytes and objects; admin-set, GET/PUT /api/admin/storage-quota).
 * A job's usage is its row in storage_usage (completed objects) plus the parts of its multipart
 * uploads in progress (storage_parts), so parts count as soon as each one is stored. A single
 * PUT reserves its bytes before the first byte goes to R2, in one conditional statement: two
 * uploads at once cannot both take the last room, and a refused upload stores nothing. A
 * replacement reserves only what it adds to the object it replaces.
 *
 * The refusal is S3-shaped: `QuotaExceeded`, 403, the code Ceph RGW (an S3-compatible store)
 * answers when a bucket or user quota is full; AWS S3 itself has no quota. S3 clients do not
 * retry it.
 */

const PARTS_IN_PROGRESS = `(SELECT COALESCE(SUM(p.size), 0) FROM storage_parts p JOIN storage_uploads u ON u.upload_id = p.upload_id WHERE u.job_id = ?1)`;

/** The quota in force (defaults: shared/schemas/storage.ts). */
export function storageQuota(db: Database): Promise<StorageQuota> {
  return getSetting(db, "storage_quota");
}

/** A job's usage: bytes (parts in progress included) and objects. */
export async function storageUsage(db: Database, jobId: string): Promise<{ bytes: number; objects: number }> {
  const result = await db.$client.execute({
    sql: `SELECT COALESCE((SELECT bytes FROM storage_usage WHERE job_id = ?1), 0) + ${PARTS_IN_PROGRESS} AS bytes, COALESCE((SELECT objects FROM storage_usage WHERE job_id = ?1), 0) AS objects`,
    args: [jobId],
  });
  const row = result.rows[0]!;
  return { bytes: Number(row.bytes), objects: Number(row.objects) };
}

function exceeded(
  jobId: string,
  quota: StorageQuota,
  usage: { bytes: number; objects: number },
  adding: { bytes: number; objects: number },
): S3Error {
  const what =
    usage.objects + adding.objects > quota.max_objects
      ? `job ${jobId} keeps ${usage.objects} of its ${quota.max_objects} objects`
      : `job ${jobId} keeps ${usage.bytes} of its ${quota.max_bytes} bytes and this upload adds ${adding.bytes}`;
  return new S3Error(
    "QuotaExceeded",
    `The job's storage quota is full: ${what}. Delete objects it no longer needs, or ask an admin to raise the quota (PUT /api/admin/storage-quota).`,
  );
}

/**
 * Reserves room for an upload adding `bytes` (its size less the size of the object it
 * replaces, if any) and `objects` (1 for a new key, 0 for a replacement)
 * before it is stored; throws QuotaExceeded, reserving nothing, when it does not fit. Release
 * the reservation with `adjustUsage` when the upload then fails.
 *
 * @example
 * await reserveUsage(db, jobId, quota, { bytes: length, objects: existing ? 0 : 1 });
 */
export async function reserveUsage(
  db: Database,
  jobId: string,
  quota: StorageQuota,
  adding: { bytes: number; objects: number },
): Promise<void> {
  const result = await db.$client.execute({
    sql: `INSERT INTO storage_usage (job_id, bytes, objects)
          SELECT ?1, MAX(0, ?2), ?3 WHERE ?2 + ${PARTS_IN_PROGRESS} <= ?4 AND ?3 <= ?5
          ON CONFLICT (job_id) DO UPDATE SET bytes = MAX(0, bytes + ?2), objects = objects + ?3
            WHERE storage_usage.bytes + ?2 + ${PARTS_IN_PROGRESS} <= ?4 AND storage_usage.objects + ?3 <= ?5
          RETURNING bytes`,
    args: [jobId, adding.bytes, adding.objects, quota.max_bytes, quota.max_objects],
  });
  if (!result.rows.length) throw exceeded(jobId, quota, await storageUsage(db, jobId), adding);
}

/**
 * Throws QuotaExceeded unless `adding` fits now (a multipart part before it is stored, a new
 * upload's object). Parts are not reserved: they count once stored, so uploads running in
 * parallel may pass the quota by at most the parts in flight. The quota in force and the job's
 * usage are read in one statement (one database round trip for each part of an upload).
 *
 * @example
 * await assertFits(db, jobId, { bytes: partLength, objects: 0 });
 */
export async function assertFits(db: Database, jobId: string, adding: { bytes: number; objects: number }): Promise<void> {
  const result = await db.$client.execute({
    sql: `SELECT (SELECT value FROM settings WHERE key = 'storage_quota') AS quota,
            COALESCE((SELECT bytes FROM storage_usage WHERE job_id = ?1), 0) + ${PARTS_IN_PROGRESS} AS bytes,
            COALESCE((SELECT objects FROM storage_usage WHERE job_id = ?1), 0) AS objects`,
    args: [jobId],
  });
  const row = result.rows[0]!;
  const quota = parseSetting("storage_quota", row.quota === null ? null : String(row.quota));
  const usage = { bytes: Number(row.bytes), objects: Number(row.objects) };
  if (usage.bytes + adding.bytes > quota.max_bytes || usage.objects + adding.objects > quota.max_objects)
    throw exceeded(jobId, quota, usage, adding);
}

/**
 * Changes a job's counted usage by `delta` (negative to release), never below zero: after a
 * replaced or deleted object, a completed multipart upload, a failed upload's reservation.
 *
 * @example
 * await adjustUsage(db, jobId, { bytes: -old.size, objects: -1 });
 */
export async function adjustUsage(db: Database, jobId: string, delta: { bytes: number; objects: number }): Promise<void> {
  if (delta.bytes === 0 && delta.objects === 0) return;
  await db.$client.execute({
    sql: `INSERT INTO storage_usage (job_id, bytes, objects) VALUES (?1, MAX(0, ?2), MAX(0, ?3))
          ON CONFLICT (job_id) DO UPDATE SET bytes = MAX(0, bytes + ?2), objects = MAX(0, objects + ?3)`,
    args: [jobId, delta.bytes, delta.objects],
  });
}
