import type { Database } from "../db/client";
import { ApiError } from "../errors";
import { checkPath } from "../datasets/paths";
import { assignmentsOf } from "./workers";

/*
 * A runner reads a dataset only for a job assigned to it, and only a dataset that job's
 * dataloader names (a `datasets/...` instance_data_dir). The job's dataloader is read through
 * assignmentsOf, the same view of the job the runner launches from.
 */

const segmentsOf = (path: string) => {
  const checked = checkPath(path.replace(/^datasets\//, ""), false);
  return "error" in checked ? null : checked.segments;
};

/**
 * The dataset folders (segments under the datasets root) that `jobId`'s dataloader names.
 * Throws 404 when the job is not running on this worker.
 *
 * @example
 * await datasetsOfAssignedJob(db, worker.id, "local-42"); // [["faces"], ["styles", "ink"]]
 */
export async function datasetsOfAssignedJob(db: Database, workerId: number, jobId: string): Promise<string[][]> {
  const job = (await assignmentsOf(db, workerId)).find((a) => a.job_id === jobId);
  if (!job) throw new ApiError(404, "not_found", `Job ${jobId} is not running on this worker`);
  const dirs = (job.dataloader ?? [])
    .map((entry) => entry.instance_data_dir)
    .filter((dir): dir is string => typeof dir === "string" && dir.startsWith("datasets/"));
  return dirs.map(segmentsOf).filter((s): s is string[] => s !== null);
}

/**
 * Refuses (403) a dataset path the job's dataloader does not name: `exact` for a whole dataset
 * (the manifest), otherwise a file inside one of them.
 */
export function checkDatasetPath(named: string[][], segments: string[], exact: boolean): void {
  const within = (root: string[]) =>
    (exact ? segments.length === root.length : segments.length > root.length) && root.every((s, i) => segments[i] === s);
  if (!named.some(within))
    throw new ApiError(
      403,
      "dataset_not_in_job",
      `${segments.join("/")} is not ${exact ? "a dataset" : "a file of a dataset"} this job's dataloader names`,
    );
}
