import type { ConcurrencySettings } from "../../shared/schemas/queue";
import type { Database } from "../db/client";

export interface LocalView {
  /** The local box's worker name, null when none is registered. */
  name: string | null;
  /** Its registered inventory, as the runner sent it. */
  inventory: { index: number; uuid?: string; name: string; memory_mb: number }[];
  devices: { index: number; name: string; memory_gb: number; allocated: boolean; job_id: string | null }[];
  allocated: number[];
  available: number[];
  runningJobs: number;
  pendingJobs: number;
  /** Host figures the local box sent with its last heartbeat. */
  hostStats: { load_avg_5min?: number; memory_percent?: number } | null;
  online: boolean;
}

/**
 * The local box as the allocator sees it: its registered devices, and which running local job
 * holds each (from the entries' allocated_gpus - the allocation is never kept anywhere else).
 */
export async function localView(db: Database): Promise<LocalView> {
  const [box, running, pending] = await db.$client.batch(
    [
      `SELECT id, name, status, gpus, host_stats,
         (SELECT json_group_array(gpu_index) FROM gpu_quarantines q WHERE q.worker_id = workers.id AND q.cleared_at IS NULL) AS quarantined
       FROM workers WHERE role = 'local'`,
      "SELECT q.job_id, q.allocated_gpus FROM queue_entries q JOIN workers w ON w.id = q.worker_id AND w.role = 'local' WHERE q.status = 'running'",
      "SELECT count(*) AS n FROM queue_entries WHERE status = 'pending' AND job_type = 'local'",
    ],
    "read",
  );
  const row = box!.rows[0];
  const gpus = row ? (JSON.parse(String(row.gpus)) as LocalView["inventory"]) : [];
  const quarantined = row?.quarantined ? (JSON.parse(String(row.quarantined)) as number[]) : [];
  const holder = new Map<number, string>();
  for (const r of running!.rows)
    for (const index of JSON.parse(String(r.allocated_gpus ?? "[]")) as number[]) holder.set(index, String(r.job_id));
  const devices = gpus.map((g) => ({
    index: g.index,
    name: g.name,
    memory_gb: Math.round((g.memory_mb / 1024) * 10) / 10,
    allocated: holder.has(g.index),
    job_id: holder.get(g.index) ?? null,
  }));
  return {
    name: row ? String(row.name) : null,
    inventory: gpus,
    devices,
    allocated: [...holder.keys()].sort((a, b) => a - b),
    // A quarantined GPU is not available, though free (README "GPU health").
    available: devices.filter((d) => !d.allocated && !quarantined.includes(d.index)).map((d) => d.index),
    runningJobs: running!.rows.length,
    pendingJobs: Number(pending!.rows[0]!.n),
    hostStats: row?.host_stats ? (JSON.parse(String(row.host_stats)) as LocalView["hostStats"]) : null,
    online: row ? ["IDLE", "busy", "draining"].includes(String(row.status)) : false,
  };
}

/** Queue statistics: cloud counts from the queue, local counts from the allocator's view. */
export async function queueStats(db: Database, limits: ConcurrencySettings, now = new Date()) {
  const weekAgo = new Date(now.getTime() - 7 * 86_400_000).toISOString();
  const [byStatus, byUser, cloud, wait] = await db.$client.batch(
    [
      "SELECT status, count(*) AS n FROM queue_entries GROUP BY status",
      "SELECT user_id, count(*) AS n FROM queue_entries WHERE status IN ('pending', 'running', 'blocked') GROUP BY user_id",
      "SELECT sum(status = 'pending') AS pending, sum(status = 'running') AS running FROM queue_entries WHERE job_type = 'cloud'",
      {
        sql: "SELECT avg((julianday(started_at) - julianday(queued_at)) * 86400.0) AS s FROM queue_entries WHERE started_at IS NOT NULL AND started_at >= ?",
        args: [weekAgo],
      },
    ],
    "read",
  );
  const local = await localView(db);
  return {
    queue_depth: Number(cloud!.rows[0]!.pending ?? 0),
    running: Number(cloud!.rows[0]!.running ?? 0),
    max_concurrent: limits.max_concurrent,
    user_max_concurrent: limits.user_max_concurrent,
    avg_wait_seconds: Math.round(Number(wait!.rows[0]!.s ?? 0) * 100) / 100,
    by_status: Object.fromEntries(byStatus!.rows.map((r) => [String(r.status), Number(r.n)])),
    by_user: Object.fromEntries(byUser!.rows.map((r) => [String(r.user_id), Number(r.n)])),
    local_gpu_max_concurrent: limits.local_gpu_max_concurrent,
    local_job_max_concurrent: limits.local_job_max_concurrent,
    local: {
      running_jobs: local.runningJobs,
      pending_jobs: local.pendingJobs,
      allocated_gpus: local.allocated,
      available_gpus: local.available,
      total_gpus: local.devices.length,
      max_concurrent_gpus: limits.local_gpu_max_concurrent,
      max_concurrent_jobs: limits.local_job_max_concurrent,
    },
  };
}
