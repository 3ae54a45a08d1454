import { cpSync, existsSync, readdirSync, statSync } from "node:fs";
import { basename, isAbsolute, join, relative, resolve } from "node:path";
import type { Assignment } from "./edge-client";

/*
 * A retry's resume (POST /api/queue/{job_id}/retry): the edge names the checkpoints of earlier
 * jobs of its lineage, newest first; before the trainer starts, the first one this box still has
 * is copied into the new job's output directory and the trainer is told
 * `--resume_from_checkpoint latest` - exactly what an automatic requeue relies on, where the
 * checkpoints are already in the job's own directory.
 */

/** What was done for a retry: the checkpoint copied in (null: none found, it starts from step 0). */
export interface Resumed {
  from: { job_id: string; checkpoint: string; step: number | null } | null;
  /** The candidates looked for and not found on this box. */
  missing: string[];
}

const CHECKPOINT = /^checkpoint-\d+$/;

/**
 * Copies a retry's newest checkpoint this box has into `outputDir` and sets
 * `--resume_from_checkpoint latest` in `config`; null for a job that is not a retry, or one
 * that already has checkpoints of its own (an automatic requeue of the retry: it resumes from
 * those). A candidate outside its job's directory is never read.
 *
 * @example
 * const resumed = prepareResume(workDir, job, join(jobDir, "output"), config);
 * resumed?.from; // { job_id: "local-...", checkpoint: "checkpoint-40", step: 40 }
 */
export function prepareResume(
  workDir: string,
  job: Pick<Assignment, "resume_from">,
  outputDir: string,
  config: Record<string, unknown>,
): Resumed | null {
  if (!job.resume_from?.length) return null;
  config["--resume_from_checkpoint"] = "latest";
  if (existsSync(outputDir) && readdirSync(outputDir).some((n) => CHECKPOINT.test(n))) return null;
  const missing: string[] = [];
  for (const point of job.resume_from) {
    const jobDir = resolve(workDir, "jobs", point.job_id);
    const source = resolve(jobDir, point.path);
    const inside = relative(jobDir, source);
    const name = basename(source);
    const where = `${point.job_id}/${point.path}`;
    if (inside.startsWith("..") || isAbsolute(inside) || !CHECKPOINT.test(name) || relative(join(workDir, "jobs"), jobDir).includes("..")) {
      missing.push(where);
      continue;
    }
    if (!existsSync(source) || !statSync(source).isDirectory()) {
      missing.push(where);
      continue;
    }
    cpSync(source, join(outputDir, name), { recursive: true, verbatimSymlinks: true });
    return { from: { job_id: point.job_id, checkpoint: name, step: point.step }, missing };
  }
  return { from: null, missing };
}
