import { and, eq } from "drizzle-orm";
import { ownerScope } from "../../shared/levels";
import type { DataloaderDataset } from "../../shared/schemas/environments";
import type { Database } from "../db/client";
import { environments } from "../db/schema";
import { whyUnchanged, type Actor } from "./ownership";
import { ApiError } from "../errors";

/**
 * The dataloader a new environment starts with: one image dataset read from `datasets/<name>`
 * with captions from text files, and the default text-embed cache, both cached under
 * `cache/<name>/`.
 *
 * @example
 * starterDataloader("portraits")[0].instance_data_dir; // "datasets/portraits"
 */
export function starterDataloader(name: string): DataloaderDataset[] {
  return [
    {
      id: `${name}-images`,
      type: "local",
      dataset_type: "image",
      instance_data_dir: `datasets/${name}`,
      caption_strategy: "textfile",
      resolution: 1024,
      resolution_type: "pixel_area",
      cache_dir_vae: `cache/${name}/vae`,
      crop: false,
      metadata_backend: "discovery",
    },
    {
      id: `${name}-text-embeds`,
      type: "local",
      dataset_type: "text_embeds",
      default: true,
      cache_dir: `cache/${name}/text`,
      write_batch_size: 128,
    },
  ];
}

/**
 * Replaces an environment's dataloader with the starter one for its current name (after a
 * rename the paths follow the new name); 404 when there is no such environment, 403 when the
 * caller is not its owner, a lead or an admin.
 *
 * @example
 * const dataloader = await regenerateDataloader(db, "portraits", { id: 7, level: "researcher" });
 */
export async function regenerateDataloader(db: Database, name: string, actor: Actor): Promise<DataloaderDataset[]> {
  const dataloader = starterDataloader(name);
  const scope = ownerScope(actor);
  const [row] = await db
    .update(environments)
    .set({ dataloader, updatedAt: new Date().toISOString() })
    .where(scope === null ? eq(environments.name, name) : and(eq(environments.name, name), eq(environments.createdBy, scope)))
    .returning({ dataloader: environments.dataloader });
  if (!row) throw await whyUnchanged(db, name);
  return row.dataloader;
}

/** A relative path with no way out of where it is resolved (`..`, a leading `/`, a backslash). */
const insidePath = (path: string) => path !== "" && !path.startsWith("/") && !path.includes("\\") && !path.split("/").includes("..");

/**
 * Conditioning pairs: each id an entry names in `conditioning_data` is a conditioning dataset of
 * the same dataloader, and each conditioning dataset is named by one (SimpleTuner pairs them that
 * way and refuses an orphan when it starts).
 */
function conditioningProblems(dataloader: DataloaderDataset[]): { path: string; message: string }[] {
  const problems: { path: string; message: string }[] = [];
  const byId = new Map(dataloader.map((entry) => [entry.id, entry]));
  const named = new Set<string>();
  dataloader.forEach((entry, i) => {
    for (const id of entry.conditioning_data ?? []) {
      named.add(id);
      const target = byId.get(id);
      if (!target)
        problems.push({ path: `body.dataloader.${i}.conditioning_data`, message: `no dataset has the id ${JSON.stringify(id)}` });
      else if (target.dataset_type !== "conditioning")
        problems.push({
          path: `body.dataloader.${i}.conditioning_data`,
          message: `${JSON.stringify(id)} is not a conditioning dataset (its dataset_type is ${target.dataset_type})`,
        });
    }
  });
  dataloader.forEach((entry, i) => {
    if (entry.dataset_type === "conditioning" && !named.has(entry.id))
      problems.push({
        path: `body.dataloader.${i}.dataset_type`,
        message: "a conditioning dataset no image dataset names in its conditioning_data",
      });
  });
  return problems;
}

/**
 * Checks a dataloader an environment is given (PUT /api/configs/{name}): unique ids, each
 * `instance_data_dir` an uploaded dataset (`datasets/<path>`) or, from an admin only, an absolute
 * path on the box (what a trainer there may read is the box's operator's to decide), and the cache
 * folders inside the job's directory (a trainer writes there), and conditioning pairs. 422 naming each entry's field.
 *
 * @example
 * checkDataloader([{ id: "cats", type: "local", dataset_type: "image", instance_data_dir: "datasets/cats" }], actor);
 */
export function checkDataloader(dataloader: DataloaderDataset[], actor: Actor): void {
  const problems: { path: string; message: string }[] = [];
  const seen = new Set<string>();
  dataloader.forEach((entry, i) => {
    const at = (field: string) => `body.dataloader.${i}.${field}`;
    if (!entry.id.trim()) problems.push({ path: at("id"), message: "a dataset needs an id" });
    else if (seen.has(entry.id)) problems.push({ path: at("id"), message: `id ${JSON.stringify(entry.id)} is used twice` });
    seen.add(entry.id);
    const dir = entry.instance_data_dir;
    if (dir !== undefined) {
      if (dir.startsWith("/")) {
        if (actor.level !== "admin")
          problems.push({
            path: at("instance_data_dir"),
            message: "an absolute path on the box may be set only by an admin; upload the dataset and name it datasets/<path>",
          });
      } else if (!dir.startsWith("datasets/") || !insidePath(dir))
        problems.push({ path: at("instance_data_dir"), message: "must be an uploaded dataset, datasets/<path> (no ..)" });
    }
    for (const field of ["cache_dir_vae", "cache_dir"] as const) {
      const value = entry[field];
      if (value !== undefined && !insidePath(value))
        problems.push({ path: at(field), message: "must be a relative path inside the job's directory (no leading /, no ..)" });
    }
  });
  problems.push(...conditioningProblems(dataloader));
  if (problems.length)
    throw new ApiError(
      422,
      "invalid_dataloader",
      `The dataloader has ${problems.length} problem(s): ${problems.map((p) => `${p.path}: ${p.message}`).join("; ")}`,
      problems,
    );
}
