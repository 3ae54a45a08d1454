import type { Database } from "../db/client";
import { allPoints, imagesFromEvents } from "./runs";

/**
 * Copies a run's metric series and validation images out of its event log (migration v22), so
 * they outlive the log: called by the retention sweep just before it deletes an ended job's
 * events. A run kept already is left as it is.
 *
 * @example
 * await keepRun(db, "local-3f9c2a1b04de");
 */
export async function keepRun(db: Database, jobId: string, now = new Date()): Promise<void> {
  const kept = await db.$client.execute({ sql: "SELECT 1 FROM kept_runs WHERE job_id = ?", args: [jobId] });
  if (kept.rows.length) return;
  const points = await allPoints(db, jobId, false);
  await db.$client.batch(
    [
      {
        sql: `INSERT OR IGNORE INTO run_points (job_id, step, seconds, loss, lr, step_time)
              SELECT ?1, json_extract(value, '$.step'), json_extract(value, '$.seconds'), json_extract(value, '$.loss'),
                json_extract(value, '$.lr'), json_extract(value, '$.step_time')
              FROM json_each(?2)`,
        args: [jobId, JSON.stringify(points)],
      },
      {
        sql: `INSERT OR IGNORE INTO run_images (job_id, n, step, prompt, mime_type, src)
              SELECT ?1, n, step, prompt, COALESCE(mime_type, 'image/png'), src FROM (${imagesFromEvents(true)})`,
        args: [jobId],
      },
      { sql: "INSERT OR IGNORE INTO kept_runs (job_id, kept_at) VALUES (?, ?)", args: [jobId, now.toISOString()] },
    ],
    "write",
  );
}
