import type { Database } from "../db/client";

/*
 * Limits on live event watchers (SSE and WebSocket, GET /api/training/events/stream). Each job's
 * events hub counts its own watchers (one object per job, so the count is exact); a user's
 * watchers across all jobs are leases in libSQL (event_watchers), renewed by each hub's
 * keep-alive and released when a watcher goes. A hub that stops without releasing (a restart)
 * leaves leases that lapse after WATCHER_LEASE_MS. A user's limit is LIVE_STREAMS_PER_USER
 * (readConfig's streamsPerUser, default 10).
 */

/** The most live watchers one job has. */
export const MAX_WATCHERS_PER_JOB = 20;
/** How long a watcher's lease lasts without renewal (the hub renews every 15 s). */
export const WATCHER_LEASE_MS = 60_000;

/**
 * Takes a lease for watcher `id` of `userId` on `jobId`, unless the user already holds `limit`
 * live ones (readConfig's streamsPerUser): one conditional statement, so parallel connects
 * cannot pass the limit. Returns whether it was taken.
 *
 * @example
 * if (!(await claimWatcher(db, { id, userId: 7, jobId }, 10))) return tooMany();
 */
export async function claimWatcher(
  db: Database,
  watcher: { id: string; userId: number; jobId: string },
  limit: number,
  now = Date.now(),
): Promise<boolean> {
  const [, inserted] = await db.$client.batch(
    [
      { sql: "DELETE FROM event_watchers WHERE expires_at <= ?", args: [now] },
      {
        sql: `INSERT INTO event_watchers (id, user_id, job_id, expires_at)
              SELECT ?1, ?2, ?3, ?4 WHERE (SELECT COUNT(*) FROM event_watchers WHERE user_id = ?2) < ?5`,
        args: [watcher.id, watcher.userId, watcher.jobId, now + WATCHER_LEASE_MS, limit],
      },
    ],
    "write",
  );
  return inserted!.rowsAffected === 1;
}

/** The 429 detail for a user at their `limit` of live streams; `instead`: what to do meanwhile. */
export const tooManyStreamsDetail = (limit: number, instead: string) =>
  `You already have ${limit} live event streams, the most one user has: close one, or ${instead}`;

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
