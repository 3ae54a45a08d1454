import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Weights } from "./model";

/*
 * Checkpoints as SimpleTuner lays them out: `<output_dir>/checkpoint-<step>/`, here holding the
 * weights and the position in training. Written to a temporary directory and renamed, so a
 * crash never leaves a half-written checkpoint that `latest` would pick.
 */

export interface Checkpoint {
  step: number;
  weights: Weights;
  loss: number;
  seed: number;
}

const NAME = /^checkpoint-(\d+)$/;

/** The checkpoints in `outputDir`, oldest first. */
export function listCheckpoints(outputDir: string): { step: number; path: string }[] {
  let names: string[];
  try {
    names = readdirSync(outputDir);
  } catch {
    return [];
  }
  return names
    .map((name) => ({ name, match: NAME.exec(name) }))
    .filter((e) => e.match !== null)
    .map((e) => ({ step: Number(e.match![1]), path: join(outputDir, e.name) }))
    .sort((a, b) => a.step - b.step);
}

/** Writes a checkpoint, then keeps only the newest `limit` (0: keep all). Returns its path and the removed ones. */
export function saveCheckpoint(outputDir: string, checkpoint: Checkpoint, limit: number): { path: string; removed: string[] } {
  mkdirSync(outputDir, { recursive: true });
  const path = join(outputDir, `checkpoint-${checkpoint.step}`);
  const partial = `${path}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial);
  writeFileSync(join(partial, "weights.json"), JSON.stringify(checkpoint.weights));
  writeFileSync(
    join(partial, "training_state.json"),
    JSON.stringify({ step: checkpoint.step, loss: checkpoint.loss, seed: checkpoint.seed }),
  );
  rmSync(path, { recursive: true, force: true });
  renameSync(partial, path);
  const removed: string[] = [];
  if (limit > 0) {
    const all = listCheckpoints(outputDir);
    for (const old of all.slice(0, Math.max(0, all.length - limit))) {
      rmSync(old.path, { recursive: true, force: true });
      removed.push(old.path);
    }
  }
  return { path, removed };
}

/** `latest`, a checkpoint directory name, or a path; null when `latest` finds none. */
export function loadCheckpoint(outputDir: string, which: string): Checkpoint | null {
  let path: string;
  if (which === "latest") {
    const newest = listCheckpoints(outputDir).at(-1);
    if (!newest) return null;
    path = newest.path;
  } else {
    path = which.includes("/") ? which : join(outputDir, which);
  }
  const state = JSON.parse(readFileSync(join(path, "training_state.json"), "utf8")) as { step: number; loss: number; seed: number };
  const weights = JSON.parse(readFileSync(join(path, "weights.json"), "utf8")) as Weights;
  return { ...state, weights };
}
