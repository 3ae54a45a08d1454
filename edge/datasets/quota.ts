import type { Database } from "../db/client";
import { ApiError } from "../errors";
import { getSetting } from "../settings-store";
import type { DatasetQuota } from "../../shared/schemas/datasets";
import type { StorageBucket } from "../bucket";
import { DATASETS_PREFIX } from "./paths";

/*
 * The per-owner dataset quota (bytes and files; admin-set, GET/PUT /api/admin/dataset-quota). A
 * top-level folder's files count against its owner (folders.ts: its creator), whoever writes
 * them; a folder of nobody (from before owners) and the root's own files (both for leads and
 * admins alone) count against nobody. A write reserves what it adds before its first byte goes to
 * R2 - its files' sizes less those of the files they replace, and one file for each new file or
 * folder marker - in one conditional statement per owner, so two uploads at once cannot both take
 * the last room and a refused upload writes nothing. What a failed write did not store is given
 * back; a deletion gives back what it deleted.
 *
 * The refusal is 413 `dataset_quota_exceeded`: the request is too large for what its folder's
 * owner may still keep (507 stays the service's own disk being full, which no client can fix).
 */

/** One object a write stores: a file, or a folder's marker (`<path>/`, 0 bytes). */
export interface DatasetWrite {
  key: string;
  bytes: number;
}

/** Room reserved for a write: `release` gives back what the objects not in `written` reserved. */
export interface Reservation {
  release(written: ReadonlySet<string>): Promise<void>;
}

/** How many objects are looked up at once (the sizes of the files a write replaces). */
const HEADS_AT_ONCE = 32;

/** The quota in force (defaults: shared/schemas/datasets.ts). */
export function datasetQuota(db: Database): Promise<DatasetQuota> {
  return getSetting(db, "dataset_quota");
}

/** What an owner's folders hold, as counted. */
export async function datasetUsage(db: Database, ownerId: number): Promise<{ bytes: number; files: number }> {
  const result = await db.$client.execute({ sql: "SELECT bytes, files FROM dataset_usage WHERE user_id = ?", args: [ownerId] });
  const row = result.rows[0];
  return { bytes: Number(row?.bytes ?? 0), files: Number(row?.files ?? 0) };
}

/** The owners of top-level folders `names` (null: nobody's, or not a folder of anyone yet). */
async function ownersOf(db: Database, names: string[]): Promise<Map<string, number | null>> {
  const owners = new Map<string, number | null>(names.map((n) => [n, null]));
  if (!names.length) return owners;
  const result = await db.$client.execute({
    sql: "SELECT name, created_by FROM dataset_folders WHERE name IN (SELECT value FROM json_each(?))",
    args: [JSON.stringify(names)],
  });
  for (const row of result.rows) owners.set(String(row.name), row.created_by === null ? null : Number(row.created_by));
  return owners;
}

/** The top-level folder of an object key under the datasets root; null for a file straight under it. */
function topOf(key: string): string | null {
  const rest = key.slice(DATASETS_PREFIX.length);
  const slash = rest.indexOf("/");
  return slash < 0 ? null : rest.slice(0, slash);
}

/** Adds `delta` to an owner's counted usage, never below zero (a release, a deletion). */
async function adjust(db: Database, ownerId: number, delta: { bytes: number; files: number }): Promise<void> {
  if (delta.bytes === 0 && delta.files === 0) return;
  await db.$client.execute({
    sql: `INSERT INTO dataset_usage (user_id, bytes, files) VALUES (?1, MAX(0, ?2), MAX(0, ?3))
          ON CONFLICT (user_id) DO UPDATE SET bytes = MAX(0, bytes + ?2), files = MAX(0, files + ?3)`,
    args: [ownerId, delta.bytes, delta.files],
  });
}

async function refusal(db: Database, ownerId: number, quota: DatasetQuota, adding: { bytes: number; files: number }): Promise<ApiError> {
  const [usage, user] = await Promise.all([
    datasetUsage(db, ownerId),
    db.$client.execute({ sql: "SELECT username FROM users WHERE id = ?", args: [ownerId] }),
  ]);
  const who = user.rows[0] ? String(user.rows[0].username) : `user ${ownerId}`;
  return new ApiError(
    413,
    "dataset_quota_exceeded",
    `The dataset quota of ${who} (the owner of the folder written to) is full: their folders hold ${usage.bytes} of ${quota.max_bytes} bytes and ${usage.files} of ${quota.max_files} files, and this upload adds ${adding.bytes} bytes and ${adding.files} files. Nothing was written. Delete files that are no longer needed (DELETE /api/datasets?path=...), or ask an admin to raise the quota (PUT /api/admin/dataset-quota)`,
  );
}

/**
 * Reserves room for `writes` in their owners' quota before they are stored; throws 413
 * `dataset_quota_exceeded`, reserving nothing, when one owner's does not fit. Call it after every
 * other check of the request (and after folders.ts has given a new folder its owner).
 *
 * @example
 * const reservation = await reserveDatasetWrites(db, bucket, quota, [{ key: "datasets/portraits/001.png", bytes: 5120 }]);
 * // ...store them, remembering which were written...
 * await reservation.release(written); // after a failure: gives back the rest
 */
export async function reserveDatasetWrites(
  db: Database,
  bucket: StorageBucket,
  quota: DatasetQuota,
  writes: DatasetWrite[],
): Promise<Reservation> {
  const owners = await ownersOf(db, [...new Set(writes.map((w) => topOf(w.key)).filter((t): t is string => t !== null))]);
  const ownerOf = (key: string) => {
    const top = topOf(key);
    return top === null ? null : (owners.get(top) ?? null);
  };
  // What each object adds: its size less the one it replaces, and a file when it is new. Only
  // objects of a folder that holds anything yet can replace one (a large zip mostly goes into a new folder).
  const tops = [...owners.keys()].filter((top) => owners.get(top) !== null);
  const holding = await Promise.all(
    tops.map(async (top) => (await bucket.list({ prefix: `${DATASETS_PREFIX}${top}/`, limit: 1 })).objects.length > 0),
  );
  const empty = new Set(tops.filter((_, i) => !holding[i]));
  const counted = writes.filter((w) => ownerOf(w.key) !== null);
  const adds = new Map<string, { owner: number; bytes: number; files: number }>();
  for (let i = 0; i < counted.length; i += HEADS_AT_ONCE) {
    const chunk = counted.slice(i, i + HEADS_AT_ONCE);
    const existing = await Promise.all(chunk.map((w) => (empty.has(topOf(w.key)!) ? null : bucket.head(w.key))));
    chunk.forEach((w, j) =>
      adds.set(w.key, { owner: ownerOf(w.key)!, bytes: w.bytes - (existing[j]?.size ?? 0), files: existing[j] ? 0 : 1 }),
    );
  }
  const perOwner = new Map<number, { bytes: number; files: number }>();
  for (const add of adds.values()) {
    const sum = perOwner.get(add.owner) ?? { bytes: 0, files: 0 };
    perOwner.set(add.owner, { bytes: sum.bytes + add.bytes, files: sum.files + add.files });
  }
  const reserved: [number, { bytes: number; files: number }][] = [];
  for (const [owner, adding] of perOwner) {
    // A write that adds nothing (it replaces with smaller files) always fits.
    const result = await db.$client.execute({
      sql: `INSERT INTO dataset_usage (user_id, bytes, files) SELECT ?1, MAX(0, ?2), MAX(0, ?3) WHERE ?2 <= ?4 AND ?3 <= ?5
            ON CONFLICT (user_id) DO UPDATE SET bytes = MAX(0, bytes + ?2), files = MAX(0, files + ?3)
              WHERE (?2 <= 0 AND ?3 <= 0) OR (dataset_usage.bytes + ?2 <= ?4 AND dataset_usage.files + ?3 <= ?5)
            RETURNING bytes`,
      args: [owner, adding.bytes, adding.files, quota.max_bytes, quota.max_files],
    });
    if (!result.rows.length) {
      for (const [other, taken] of reserved) await adjust(db, other, { bytes: -taken.bytes, files: -taken.files });
      throw await refusal(db, owner, quota, adding);
    }
    reserved.push([owner, adding]);
  }
  return {
    async release(written) {
      const back = new Map<number, { bytes: number; files: number }>();
      for (const [key, add] of adds) {
        if (written.has(key)) continue;
        const sum = back.get(add.owner) ?? { bytes: 0, files: 0 };
        back.set(add.owner, { bytes: sum.bytes - add.bytes, files: sum.files - add.files });
      }
      for (const [owner, delta] of back) await adjust(db, owner, delta);
    },
  };
}

/**
 * Gives back the room of deleted objects (keys under the datasets root, with their sizes) to
 * their folders' owners.
 *
 * @example
 * await releaseDeleted(db, [{ key: "datasets/portraits/001.png", bytes: 5120 }]);
 */
export async function releaseDeleted(db: Database, deleted: DatasetWrite[]): Promise<void> {
  const owners = await ownersOf(db, [...new Set(deleted.map((d) => topOf(d.key)).filter((t): t is string => t !== null))]);
  const back = new Map<number, { bytes: number; files: number }>();
  for (const d of deleted) {
    const top = topOf(d.key);
    const owner = top === null ? null : (owners.get(top) ?? null);
    if (owner === null) continue;
    const sum = back.get(owner) ?? { bytes: 0, files: 0 };
    back.set(owner, { bytes: sum.bytes - d.bytes, files: sum.files - 1 });
  }
  for (const [owner, delta] of back) await adjust(db, owner, delta);
}
