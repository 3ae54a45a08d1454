import { and, eq } from "drizzle-orm";
import { ownerScope } from "../../shared/levels";
import type { DataloaderDataset } from "../../shared/schemas/environments";
import type { Database } from "../db/client";
import { environments } from "../db/schema";
import { whyUnchanged, type Actor } from "./ownership";

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
