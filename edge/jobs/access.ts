import type { Database } from "../db/client";
import { ApiError, notFound } from "../errors";

/*
 * Who reads what (README "Security in short"): a job's events, status details, checkpoints,
 * webhook deliveries and configuration are for its owner, leads and admins. Everyone else gets
 * 403 `not_your_job` for a job that exists (the queue listing already shows every job's id and
 * owner, so hiding existence behind a 404 would protect nothing) and sees only the queue's public
 * fields. `scope` is shared/levels.ts ownerScope: null for leads and admins, else the caller's id.
 */

/**
 * 404 unless `row` (the job's queue entry) exists, 403 `not_your_job` unless the caller may read
 * its details: the one rule, for callers that read the entry with other things in one batch.
 *
 * @example
 * checkCanReadJob(found.rows[0], "local-3f9c2a1b04de", ownerScope(user));
 */
export function checkCanReadJob(row: Record<string, unknown> | undefined, jobId: string, scope: number | null): void {
  if (!row) throw notFound(`Job ${jobId}`);
  if (scope !== null && (row.user_id === null || row.user_id === undefined || Number(row.user_id) !== scope)) {
    throw new ApiError(
      403,
      "not_your_job",
      `Job ${jobId} is another user's: its events, status, checkpoints, webhooks and configuration are for its owner, leads and admins (GET /api/queue shows its public fields)`,
    );
  }
}

/**
 * 404 unless the job exists, 403 `not_your_job` unless the caller may read its details.
 *
 * @example
 * await assertCanReadJob(db, "local-3f9c2a1b04de", ownerScope(user));
 */
export async function assertCanReadJob(db: Database, jobId: string, scope: number | null): Promise<void> {
  const found = await db.$client.execute({ sql: "SELECT user_id FROM queue_entries WHERE job_id = ?", args: [jobId] });
  checkCanReadJob(found.rows[0], jobId, scope);
}
