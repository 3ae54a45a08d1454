import type { Database } from "../db/client";
import type { StorageBucket } from "../bucket";
import type { DatasetUsage } from "../../shared/schemas/datasets";
import { levelAtLeast, type Level } from "../../shared/levels";
import { targetSegments } from "./datasets";
import { folderRecords } from "./folders";
import { DATASETS_PREFIX } from "./paths";
import { datasetQuota, datasetUsage } from "./quota";

/*
 * What a dataset path's owner has used of their quota, and whether the caller may change files
 * there: what the dashboard shows above a folder and which controls it offers. The rule is
 * folders.ts' (authorizeFolderWrite), read without claiming anything.
 */

/** Who asks. */
export interface UsageReader {
  userId: number;
  username: string;
  level: Level | null;
}

/**
 * The quota use of the owner of `path`'s top-level folder (at the root: the caller's own).
 *
 * @example
 * const usage = await folderUsage(db, bucket, "portraits/edits", { userId: 7, username: "rita", level: "researcher" });
 */
export async function folderUsage(db: Database, bucket: StorageBucket, path: string, reader: UsageReader): Promise<DatasetUsage> {
  const segments = targetSegments("path", path);
  const quota = await datasetQuota(db);
  const lead = levelAtLeast(reader.level, "lead");
  const researcher = levelAtLeast(reader.level, "researcher");
  const top = segments[0];
  if (top === undefined) {
    const used = await datasetUsage(db, reader.userId);
    return { folder: null, owner: reader.username, ...counted(used, quota), may_write: lead };
  }
  const record = (await folderRecords(db, [top])).get(top);
  let mayWrite = lead;
  if (!mayWrite && researcher) {
    if (record) mayWrite = record.ownerId === reader.userId;
    // No owner recorded: a folder that does not exist yet becomes the writer's; an old one is nobody's.
    else mayWrite = (await bucket.list({ prefix: `${DATASETS_PREFIX}${top}/`, limit: 1 })).objects.length === 0;
  }
  const ownerId = record?.ownerId ?? null;
  const used = ownerId === null ? { bytes: 0, files: 0 } : await datasetUsage(db, ownerId);
  return { folder: top, owner: record?.owner ?? null, ...counted(used, quota), may_write: mayWrite };
}

const counted = (used: { bytes: number; files: number }, quota: { max_bytes: number; max_files: number }) => ({
  used_bytes: used.bytes,
  used_files: used.files,
  max_bytes: quota.max_bytes,
  max_files: quota.max_files,
});
