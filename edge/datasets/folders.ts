import type { Database } from "../db/client";
import { ApiError } from "../errors";
import type { Bucket } from "./bucket";
import { DATASETS_PREFIX } from "./paths";

/*
 * Who may change files in a dataset folder (ARCHITECTURE "Trust model"). Each top-level folder
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
export async function authorizeFolderWrite(db: Database, bucket: Bucket, segments: string[], writer: FolderWriter): Promise<void> {
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
