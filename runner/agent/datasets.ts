import { createHash } from "node:crypto";
import { createReadStream, createWriteStream, mkdirSync, renameSync, rmSync, symlinkSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ServiceClient } from "../../shared/client/client";
import { workerEndpoints } from "../../shared/client/endpoints-workers";
import type { Assignment } from "./edge-client";
import type { EventShipper } from "./events";

/*
 * The runner's dataset cache (`<work-dir>/cache/datasets/<path>/`): a job's datasets are brought
 * from R2 before its trainer starts. A cached file is used only if its SHA-256 matches the one
 * stored with the upload (hashed again each time, so a changed or damaged file is fetched anew);
 * a download is verified before it takes its place. Jobs share the cache, read-only in the
 * sandbox; each job attempt trains on a view of its own (datasetView) where it may add files.
 */

export interface Materialised {
  path: string;
  localDir: string;
  files: number;
  /** The dataset's files, relative to localDir, as the edge listed them now (the cache may hold files since deleted). */
  names: string[];
  downloaded: number;
  reused: number;
  bytes: number;
}

async function hashFile(file: string): Promise<string | null> {
  try {
    const hash = createHash("sha256");
    await pipeline(createReadStream(file), hash);
    return hash.digest("hex");
  } catch {
    return null; // not there
  }
}

/**
 * Brings one dataset of a job (as its dataloader names it) into the cache; null when it has no
 * files. The edge serves a dataset only for a job assigned to this runner whose dataloader names it.
 */
export async function materialise(
  edge: ServiceClient,
  cacheRoot: string,
  jobId: string,
  datasetPath: string,
): Promise<Materialised | null> {
  const manifest = await edge.call(workerEndpoints.workerDatasetManifest, { query: { job_id: jobId, path: datasetPath } });
  if (!manifest.files.length) return null;
  const localDir = join(cacheRoot, "datasets", ...manifest.path.split("/"));
  const result: Materialised = {
    path: manifest.path,
    localDir,
    files: manifest.files.length,
    names: manifest.files.map((f) => f.path),
    downloaded: 0,
    reused: 0,
    bytes: 0,
  };
  for (const file of manifest.files) {
    const target = resolve(localDir, file.path);
    // The edge only hands out confined paths; this is the runner's own check of that.
    if (relative(localDir, target).startsWith("..")) throw new Error(`dataset file ${file.path} leaves the cache`);
    if (file.sha256 && (await hashFile(target)) === file.sha256) {
      result.reused++;
      continue;
    }
    mkdirSync(dirname(target), { recursive: true });
    const partial = `${target}.partial`;
    // A large file may take a while: five minutes rather than the 30 s of other calls.
    const response = await edge.call(
      workerEndpoints.workerDatasetFile,
      { query: { job_id: jobId, path: `${manifest.path}/${file.path}` } },
      { timeoutMs: 300_000 },
    );
    const hash = createHash("sha256");
    const body = Readable.fromWeb(response.body as never);
    body.on("data", (chunk: Buffer) => hash.update(chunk));
    await pipeline(body, createWriteStream(partial));
    const got = hash.digest("hex");
    if (file.sha256 && got !== file.sha256) {
      rmSync(partial, { force: true });
      throw new Error(`dataset file ${manifest.path}/${file.path} arrived with SHA-256 ${got}, not ${file.sha256}`);
    }
    renameSync(partial, target);
    result.downloaded++;
    result.bytes += file.size;
  }
  return result;
}

/**
 * A job attempt's own view of a cached dataset, `<dir>`: the dataset's folders, each file a link
 * to its cached copy. A trainer writes what it likes into its view (SimpleTuner writes its
 * aspect-bucket metadata into each `instance_data_dir` at every start) without touching the cache,
 * which the sandbox keeps read-only, or any other job's view; a file it writes over a link
 * replaces the link only. The view is made anew for every attempt, so nothing a run wrote is taken
 * for the dataset by the next.
 *
 * @example
 * datasetView("/w/jobs/local-1/datasets/0-cats", got); // "/w/jobs/local-1/datasets/0-cats", links to /w/cache/datasets/cats/...
 */
export function datasetView(dir: string, dataset: Pick<Materialised, "localDir" | "names">): string {
  // Never written through: whatever a previous attempt left here (a link to elsewhere) goes.
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const name of dataset.names) {
    const target = resolve(dataset.localDir, name);
    const link = resolve(dir, name);
    if (relative(dataset.localDir, target).startsWith("..") || relative(dir, link).startsWith(".."))
      throw new Error(`dataset file ${name} leaves its folder`);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(target, link);
  }
  return dir;
}

/**
 * The job's dataloader with each `datasets/...` folder brought into the cache and a view of it
 * made for this attempt (datasetView), the entry pointed at the view; null when the environment
 * has no datasets. A dataset not uploaded yet is reported (dataset.missing) and left as it is: a
 * trainer that needs it will say so. `cacheDirs` gets the cache folders the views link into
 * (read-only in the sandbox).
 *
 * @example
 * const cacheDirs: string[] = [];
 * const dataloader = await prepareDatasets(edge, workDir, job, jobDir, shipper, cacheDirs); // null: no datasets
 */
export async function prepareDatasets(
  edge: ServiceClient,
  workDir: string,
  job: Pick<Assignment, "job_id" | "dataloader">,
  jobDir: string,
  shipper: Pick<EventShipper, "push">,
  cacheDirs: string[],
): Promise<Record<string, unknown>[] | null> {
  if (!job.dataloader?.length) return null;
  const out: Record<string, unknown>[] = [];
  const views = new Map<string, string>();
  rmSync(join(jobDir, "datasets"), { recursive: true, force: true });
  for (const entry of job.dataloader) {
    const dir = entry.instance_data_dir;
    if (typeof dir !== "string" || !dir.startsWith("datasets/")) {
      out.push(entry);
      continue;
    }
    let view = views.get(dir);
    if (!view) {
      const got = await materialise(edge, join(workDir, "cache"), job.job_id, dir);
      if (!got) {
        shipper.push({ type: "dataset.missing", title: `Dataset ${dir} has no files`, data: { path: dir } });
        out.push(entry);
        continue;
      }
      view = datasetView(join(jobDir, "datasets", `${views.size}-${got.path.split("/").pop()}`), got);
      views.set(dir, view);
      cacheDirs.push(got.localDir);
      const { names: _names, ...summary } = got;
      shipper.push({
        type: "dataset.ready",
        title: `Dataset ${dir}: ${got.files} file(s), ${got.downloaded} downloaded, ${got.reused} from the cache`,
        data: { ...summary, view },
      });
    }
    out.push({ ...entry, instance_data_dir: view });
  }
  return out;
}
