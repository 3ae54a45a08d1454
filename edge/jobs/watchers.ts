import type { Database } from "../db/client";

/*
 * Limits on live event watchers (SSE and WebSocket, GET /api/training/events/stream). Each job's
 * events hub counts its own watchers (one object per job, so the count is exact); a user's
 * watchers across all jobs are leases in libSQL (event_watchers), renewed by each hub's
 * keep-alive and released when a watcher goes. A hub that stops without releasing (a restart)
 * leaves leases that lapse after WATCHER_LEASE_MS.
 */

/** The most live watchers one job has, and one user has over all jobs. */
export const MAX_WATCHERS_PER_JOB = 20;
export const MAX_WATCHERS_PER_USER = 10;
/** How long a watcher's lease lasts without renewal (the hub renews every 15 s). */
export const WATCHER_LEASE_MS = 60_000;

/**
 * Takes a lease for watcher `id` of `userId` on `jobId`, unless the user already holds
 * MAX_WATCHERS_PER_USER live ones: one conditional statement, so parallel connects cannot pass
 * the limit. Returns whether it was taken.
 *
 * @example
 * if (!(await claimWatcher(db, { id, userId: 7, jobId }))) return tooMany();
 */
export async function claimWatcher(
  db: Database,
  watcher: { id: string; userId: number; jobId: string },
  now = Date.now(),
): Promise<boolean> {
  const [, inserted] = await db.$client.batch(
    [
      { sql: "DELETE FROM event_watchers WHERE expires_at <= ?", args: [now] },
      {
        sql: `INSERT INTO event_watchers (id, user_id, job_id, expires_at)
              SELECT ?1, ?2, ?3, ?4 WHERE (SELECT COUNT(*) FROM event_watchers WHERE user_id = ?2) < ?5`,
        args: [watcher.id, watcher.userId, watcher.jobId, now + WATCHER_LEASE_MS, MAX_WATCHERS_PER_USER],
      },
    ],
    "write",
  );
  return inserted!.rowsAffected === 1;
}

/** Renews the leases of the watchers `ids` (a hub's keep-alive). */
export async function renewWatchers(db: Database, ids: string[], now = Date.now()): Promise<void> {
  if (!ids.length) return;
  await db.$client.execute({
    sql: `UPDATE event_watchers SET expires_at = ? WHERE id IN (${ids.map(() => "?").join(", ")})`,
    args: [now + WATCHER_LEASE_MS, ...ids],
  });
}

/** Releases watcher `id`'s lease (it disconnected, or was given up). */
export async function releaseWatcher(db: Database, id: string): Promise<void> {
  await db.$client.execute({ sql: "DELETE FROM event_watchers WHERE id = ?", args: [id] });
}
