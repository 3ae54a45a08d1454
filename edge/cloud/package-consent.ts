import type { Level } from "../../shared/levels";
import type { Database } from "../db/client";
import { folderRecords } from "../datasets/folders";
import { DATASETS_PREFIX } from "../datasets/paths";
import { ApiError } from "../errors";
import type { PackagePlan } from "./package";

/*
 * Whose datasets a cloud submission may send to a third party (issue 27, item 10). Reading a
 * dataset folder is open to every level, but packaging it hands its files to the provider, so a
 * plan may hold a top-level folder only when:
 * - the submitter owns it (dataset_folders.created_by), or
 * - the submitter is an admin, or
 * - its owner (or an admin) allowed it: PUT /api/datasets/folders/{name}/cloud-sharing
 *   {"allow_cloud": true} (edge/datasets/folders.ts).
 * A folder from before folders had owners is nobody's: only an admin's submission or an admin's
 * consent lets it go. Leads get no exception: changing another user's files is not consenting to
 * send them elsewhere.
 *
 * It is checked when the plan is made at submission, dry runs included, before anything is
 * stored or uploaded. A job already submitted keeps the consent it was submitted under: taking
 * the consent back stops later submissions, not a job already accepted (as a GPU job that
 * fetched the files keeps its copy).
 */

/** Who submits: their id and highest level. */
export interface ConsentSubmitter {
  id: number;
  level: Level | null;
}

/** The top-level folder of a planned dataset path (`datasets/<folder>/...`). */
function topFolder(path: string): string {
  return path.slice(DATASETS_PREFIX.length).split("/")[0]!;
}

/**
 * Refuses (403 dataset_not_yours, naming each folder and its owner's username) a plan holding a
 * dataset folder the submitter may not send to a cloud provider; resolves when every folder may go.
 *
 * @example
 * const plan = await planPackage(ctx.bucket, environment.dataloader, environment.config);
 * await checkDatasetConsent(ctx.db, user, plan);
 */
export async function checkDatasetConsent(db: Database, user: ConsentSubmitter, plan: Pick<PackagePlan, "summary">): Promise<void> {
  if (user.level === "admin") return;
  const folders = [...new Set(plan.summary.datasets.map((d) => topFolder(d.path)))].sort();
  if (!folders.length) return;
  const records = await folderRecords(db, folders);
  const refused: { folder: string; owner: string | null }[] = [];
  for (const folder of folders) {
    const record = records.get(folder);
    if (record && (record.allowCloud || (record.ownerId !== null && record.ownerId === user.id))) continue;
    // A creator whose account is gone is still named (by id), not taken for nobody.
    refused.push({ folder, owner: record?.owner ?? (record?.ownerId != null ? `user #${record.ownerId}` : null) });
  }
  if (!refused.length) return;
  const named = refused.map(({ folder, owner }) =>
    owner === null ? `datasets/${folder} (no owner: it predates folder owners)` : `datasets/${folder} (owned by ${owner})`,
  );
  throw new ApiError(
    403,
    "dataset_not_yours",
    `Refused, nothing was uploaded: the dataloader names dataset folders that are not yours to send to a cloud provider: ${named.join(", ")}. ` +
      'Their owner (or an admin) allows it with PUT /api/datasets/folders/{name}/cloud-sharing {"allow_cloud": true}, or an admin submits the job',
    refused.map(({ folder, owner }) => ({
      path: `dataloader.instance_data_dir`,
      message: owner === null ? `datasets/${folder} has no owner` : `datasets/${folder} belongs to ${owner}`,
    })),
  );
}
