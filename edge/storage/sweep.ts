import type { Database } from "../db/client";
import { objectKey, type StorageBucket } from "../bucket";
import { endedJobUploads, forgetUpload } from "./uploads";

/** How many open uploads one sweep aborts (the next sweep takes the rest). */
const SWEEP_BATCH = 100;

/**
 * Aborts the multipart uploads that jobs left open when they ended (their credentials are dead,
 * so nobody can finish them): R2 drops the stored parts, and the rows that listed them go, which
 * also frees their bytes from the job's quota. Called when a job ends (`jobId`) and on the
 * Scheduler's alarm for every ended job. Returns how many were aborted.
 *
 * @example
 * await abortEndedUploads(db, env.STORAGE, jobId);
 */
export async function abortEndedUploads(db: Database, bucket: StorageBucket, jobId?: string): Promise<number> {
  const uploads = await endedJobUploads(db, SWEEP_BATCH, jobId);
  for (const upload of uploads) {
    // An upload R2 no longer knows (aborted before, or expired there) only needs its rows gone.
    await bucket
      .resumeMultipartUpload(objectKey(upload.outputRoot, upload.jobId, upload.key), upload.uploadId)
      .abort()
      .catch(() => {});
    await forgetUpload(db, upload.uploadId);
  }
  return uploads.length;
}
