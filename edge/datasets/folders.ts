import type { Database } from "../db/client";
import { ApiError } from "../errors";
import type { StorageBucket } from "../bucket";
import { DATASETS_PREFIX } from "./paths";

/*
 * Who may change files in a dataset folder (README "Security in short"). Each top-level folder
 * (the first segment under datasets/) records its creator, the first user to create it or write
 * into it; only the creator, leads and admins change files anywhere under it. Reading stays open
 * to every level. A top-level folder that was already in R2 before folders had creators has no
 * row: it belongs to nobody, so only leads and admins change it. Files straight under the
 * datasets root are also theirs alone.
 */

/** Who is writing: `ownerScope` null for leads and admins (they may write anywhere). */
export interface FolderWriter {
  userId: number;
  ownerScope: number | null;
}

/**
 * Refuses (403) a write under `segments` (a path below the datasets root) by a user who may not
 * change that top-level folder; a top-level folder that does not exist yet becomes theirs. Call
 * it after every other check of the request, right before writing, so a refused request claims
 * nothing either.
 *
 * @example
 * await authorizeFolderWrite(db, bucket, ["portraits", "edits"], { userId: 7, ownerScope: 7 });
 */
export async function authorizeFolderWrite(db: Database, bucket: StorageBucket, segments: string[], writer: FolderWriter): Promise<void> {
  const top = segments[0];
  if (top === undefined) {
    if (writer.ownerScope === null) return;
    throw new ApiError(
      403,
      "folder_not_yours",
      "Only leads and admins put files straight into the datasets root: create a folder of your own (POST /api/datasets/folders) and upload into it",
    );
  }
  let owner = await folderCreator(db, top);
  if (owner === undefined) {
    // No row: a new folder (claimed now, in one statement: two users at once get one owner), or
    // one from before creators were recorded (nobody's).
    const exists = (await bucket.list({ prefix: `${DATASETS_PREFIX}${top}/`, limit: 1 })).objects.length > 0;
    if (!exists) {
      await db.$client.execute({
        sql: "INSERT INTO dataset_folders (name, created_by, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
        args: [top, writer.userId, new Date().toISOString()],
      });
      owner = await folderCreator(db, top);
    } else owner = null;
  }
  if (writer.ownerScope === null || (owner !== null && owner === writer.ownerScope)) return;
  throw new ApiError(
    403,
    "folder_not_yours",
    owner === null
      ? `Dataset folder ${top} predates folder owners: only leads and admins change its files`
      : `Dataset folder ${top} belongs to another user: only its creator, leads and admins change its files (reading it is open to all)`,
  );
}

/** The creator of top-level folder `name`: a user id, null for nobody, undefined when it has no row. */
async function folderCreator(db: Database, name: string): Promise<number | null | undefined> {
  const result = await db.$client.execute({ sql: "SELECT created_by FROM dataset_folders WHERE name = ?", args: [name] });
  const row = result.rows[0];
  if (!row) return undefined;
  return row.created_by === null ? null : Number(row.created_by);
}

/** A top-level folder's consent to cloud packaging, as GET/PUT /api/datasets/folders/{name}/cloud-sharing answer it. */
export interface FolderSharing {
  folder: string;
  /** The owner's username; null for a folder from before folders had owners (nobody's). */
  owner: string | null;
  allow_cloud: boolean;
  changed_by: string | null;
  changed_at: string | null;
}

/**
 * Top-level folders' owners and cloud consent, by name; a name without a row is absent (a folder
 * from before owners, or none at all).
 */
export async function folderRecords(
  db: Database,
  names: string[],
): Promise<
  Map<string, { ownerId: number | null; owner: string | null; allowCloud: boolean; changedBy: string | null; changedAt: string | null }>
> {
  const result = await db.$client.execute({
    sql: `SELECT f.name, f.created_by, f.allow_cloud, f.allow_cloud_at, o.username AS owner, b.username AS changed_by
      FROM dataset_folders f LEFT JOIN users o ON o.id = f.created_by LEFT JOIN users b ON b.id = f.allow_cloud_by
      WHERE f.name IN (SELECT value FROM json_each(?))`,
    args: [JSON.stringify(names)],
  });
  return new Map(
    result.rows.map((row) => [
      String(row.name),
      {
        ownerId: row.created_by === null ? null : Number(row.created_by),
        owner: row.owner === null ? null : String(row.owner),
        allowCloud: Number(row.allow_cloud) === 1,
        changedBy: row.changed_by === null ? null : String(row.changed_by),
        changedAt: row.allow_cloud_at === null ? null : String(row.allow_cloud_at),
      },
    ]),
  );
}

async function folderExists(bucket: StorageBucket, name: string): Promise<boolean> {
  return (await bucket.list({ prefix: `${DATASETS_PREFIX}${name}/`, limit: 1 })).objects.length > 0;
}

async function sharingOf(db: Database, name: string): Promise<FolderSharing | null> {
  const record = (await folderRecords(db, [name])).get(name);
  if (!record) return null;
  return { folder: name, owner: record.owner, allow_cloud: record.allowCloud, changed_by: record.changedBy, changed_at: record.changedAt };
}

/**
 * Whether other users' cloud submissions may package top-level folder `name` (404 when there is
 * no such folder). A folder from before owners, never set by an admin, is nobody's and not shared.
 */
export async function getFolderSharing(db: Database, bucket: StorageBucket, name: string): Promise<FolderSharing> {
  const sharing = await sharingOf(db, name);
  if (sharing) return sharing;
  if (!(await folderExists(bucket, name)))
    throw new ApiError(404, "not_found", `There is no dataset folder ${name}: name a top-level folder under the datasets root`);
  return { folder: name, owner: null, allow_cloud: false, changed_by: null, changed_at: null };
}

/**
 * Sets top-level folder `name`'s consent to cloud packaging by other users. Only its owner and
 * admins (403 folder_not_yours, leads included: sending a folder to a third party is its owner's
 * choice); a folder from before owners only by an admin. 404 when there is no such folder.
 *
 * @example
 * await setFolderSharing(db, bucket, "portraits", true, { userId: 7, admin: false });
 */
export async function setFolderSharing(
  db: Database,
  bucket: StorageBucket,
  name: string,
  allowCloud: boolean,
  by: { userId: number; admin: boolean },
): Promise<FolderSharing> {
  const current = await getFolderSharing(db, bucket, name);
  const record = (await folderRecords(db, [name])).get(name);
  const ownerId = record?.ownerId ?? null;
  if (!by.admin && (ownerId === null || ownerId !== by.userId))
    throw new ApiError(
      403,
      "folder_not_yours",
      current.owner === null
        ? `Dataset folder ${name} predates folder owners: only an admin decides whether it may be sent to a cloud provider`
        : `Dataset folder ${name} belongs to ${current.owner}: only they and admins decide whether it may be sent to a cloud provider`,
    );
  const now = new Date().toISOString();
  // A folder from before owners gets its row now (still nobody's: created_by stays null).
  await db.$client.execute({
    sql: `INSERT INTO dataset_folders (name, created_by, created_at, allow_cloud, allow_cloud_by, allow_cloud_at) VALUES (?, NULL, ?, ?, ?, ?)
      ON CONFLICT (name) DO UPDATE SET allow_cloud = excluded.allow_cloud, allow_cloud_by = excluded.allow_cloud_by, allow_cloud_at = excluded.allow_cloud_at`,
    args: [name, now, allowCloud ? 1 : 0, by.userId, now],
  });
  return (await sharingOf(db, name))!;
}
