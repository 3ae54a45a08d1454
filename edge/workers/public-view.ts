import type { z } from "@hono/zod-openapi";
import type { SystemWorker } from "../../shared/schemas/system";
import type { Database } from "../db/client";
import { gpuStates } from "./gpu-health";

type PublicWorker = z.infer<typeof SystemWorker>;

/**
 * Which job holds each GPU of `gpus`. A local job names its devices (allocated_gpus); a remote
 * worker is given to one job whole, so a job there without devices holds all of them.
 */
function holders(gpus: { index: number }[], running: { jobId: string; devices: number[] | null }[]): Map<number, string> {
  const held = new Map<number, string>();
  for (const job of running) {
    const devices = job.devices?.length ? job.devices : gpus.map((g) => g.index);
    for (const index of devices) if (!held.has(index)) held.set(index, job.jobId);
  }
  return held;
}

/**
 * Every worker as any logged-in user may see it: name, role, labels, status, last heartbeat, GPUs
 * and the job holding each with its latest health and quarantine, and the trainers it can run (whether SimpleTuner is installed there). Only columns chosen here leave: never the token's prefix or hash,
 * nor the host's name or figures.
 *
 * @example
 * const workers = await publicWorkers(db); // [{ name: "gpu-box-1", gpus: [{ index: 0, job_id: "local-..." }], ... }]
 */
export async function publicWorkers(db: Database): Promise<PublicWorker[]> {
  const [[boxes, running], states] = await Promise.all([
    db.$client.batch(
      [
        "SELECT id, name, role, status, labels, gpus, last_heartbeat, registered_at, trainers, xid_readable FROM workers ORDER BY role = 'remote', name, id",
        "SELECT worker_id, job_id, allocated_gpus FROM queue_entries WHERE status = 'running' AND worker_id IS NOT NULL ORDER BY started_at, id",
      ],
      "read",
    ),
    gpuStates(db),
  ]);
  const byWorker = new Map<number, { jobId: string; devices: number[] | null }[]>();
  for (const r of running!.rows) {
    const jobs = byWorker.get(Number(r.worker_id)) ?? [];
    jobs.push({ jobId: String(r.job_id), devices: r.allocated_gpus ? (JSON.parse(String(r.allocated_gpus)) as number[] | null) : null });
    byWorker.set(Number(r.worker_id), jobs);
  }
  return boxes!.rows.map((row) => {
    const inventory = JSON.parse(String(row.gpus ?? "[]")) as { index: number; name: string; memory_mb: number }[];
    const jobs = byWorker.get(Number(row.id)) ?? [];
    const held = holders(inventory, jobs);
    return {
      id: Number(row.id),
      name: String(row.name),
      role: row.role === "local" ? "local" : "remote",
      status: String(row.status) as PublicWorker["status"],
      labels: JSON.parse(String(row.labels ?? "{}")) as Record<string, string>,
      last_seen: row.last_heartbeat ? String(row.last_heartbeat) : row.registered_at ? String(row.registered_at) : null,
      gpus: inventory.map((g) => ({
        index: g.index,
        name: g.name,
        memory_mb: g.memory_mb,
        job_id: held.get(g.index) ?? null,
        quarantine: states.quarantines.get(`${Number(row.id)}/${g.index}`) ?? null,
        health: states.latest.get(`${Number(row.id)}/${g.index}`) ?? null,
      })),
      running_jobs: jobs.map((j) => j.jobId),
      trainers: row.trainers ? (JSON.parse(String(row.trainers)) as PublicWorker["trainers"]) : null,
      xid_readable: row.xid_readable === null || row.xid_readable === undefined ? null : Number(row.xid_readable) === 1,
    };
  });
}
