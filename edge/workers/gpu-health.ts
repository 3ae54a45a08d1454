import type { z } from "@hono/zod-openapi";
import type { InStatement } from "@libsql/client/web";
import type { GpuHealthHistory, GpuHealthPoint, GpuQuarantine } from "../../shared/schemas/system";
import type { GpuHealthSample } from "../../shared/schemas/workers";
import type { Database } from "../db/client";
import { ApiError, notFound } from "../errors";
import type { Change } from "../jobs/lifecycle/effects";
import { interruptedChanges, requeueOrFail } from "../jobs/lifecycle/requeue-or-fail";
import { notify, type NotifyContext } from "../notifications/notify";
import { gpuFault, type Accepted } from "./gpu-fault";

/*
 * GPU health (README "GPU health"): each heartbeat's samples are kept one per GPU per minute for
 * 24 hours; a sample with a fatal fault (gpu-fault.ts) quarantines its GPU in the same request -
 * the Scheduler gives it to no job from then on (the capacity version moves by trigger) and its
 * jobs go back to the queue by the retry-or-fail rule - until an admin clears it.
 */

type Sample = z.infer<typeof GpuHealthSample>;
type Point = z.infer<typeof GpuHealthPoint>;
type Quarantine = z.infer<typeof GpuQuarantine>;
type Row = Record<string, unknown>;

/** How long health samples are kept. */
export const HEALTH_KEPT_HOURS = 24;

const minuteOf = (iso: string) => `${iso.slice(0, 16)}:00.000Z`;
const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));
const flag = (v: unknown) => (v === null || v === undefined ? null : Number(v) === 1);

/** The GPUs newly quarantined by a heartbeat, with the jobs that left them. */
export type HealthChange = Change & { quarantined: { index: number; reason: string }[] };

/**
 * Stores a heartbeat's samples (the minute's row replaced by the latest) and quarantines each GPU
 * whose sample has a fatal fault past what an admin accepted; the jobs on a newly quarantined GPU
 * are requeued (or fail at max_attempts). Audited `gpu_quarantined` with the service as actor.
 *
 * @example
 * const change = await recordGpuHealth(db, worker.id, body.gpu_health, body.xid_readable, new Date());
 */
export async function recordGpuHealth(
  db: Database,
  workerId: number,
  samples: Sample[],
  xidReadable: boolean | undefined,
  now: Date,
): Promise<HealthChange> {
  const at = now.toISOString();
  const known = await db.$client.execute({
    sql: "SELECT gpu_index, cleared_at, accepted_ecc, accepted_retired FROM gpu_quarantines WHERE worker_id = ?",
    args: [workerId],
  });
  const quarantined = new Set<number>();
  const accepted = new Map<number, Accepted>();
  for (const r of known.rows) {
    if (r.cleared_at === null) quarantined.add(Number(r.gpu_index));
    else accepted.set(Number(r.gpu_index), { ecc: num(r.accepted_ecc), retired: flag(r.accepted_retired) });
  }
  const faults = samples.map((s) => ({ sample: s, fault: gpuFault(s, accepted.get(s.index) ?? null) }));
  const fresh = faults.filter((f) => f.fault !== null && !quarantined.has(f.sample.index));
  const statements: InStatement[] = faults.map(({ sample: s, fault }) => ({
    sql: `INSERT INTO gpu_health (worker_id, gpu_index, minute, sampled_at, utilization, memory_used_mb, memory_total_mb, temperature_c,
            ecc_uncorrected, retired_pages_pending, probe_error, xids, fault)
          VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
          ON CONFLICT (worker_id, gpu_index, minute) DO UPDATE SET sampled_at = ?4, utilization = ?5, memory_used_mb = ?6,
            memory_total_mb = ?7, temperature_c = ?8, ecc_uncorrected = ?9, retired_pages_pending = ?10,
            probe_error = COALESCE(?11, probe_error), xids = CASE WHEN ?12 = '[]' THEN xids ELSE ?12 END, fault = COALESCE(?13, fault)`,
    args: [
      workerId,
      s.index,
      minuteOf(at),
      at,
      s.utilization_percent,
      s.memory_used_mb,
      s.memory_total_mb,
      s.temperature_c,
      s.ecc_uncorrected_volatile,
      s.retired_pages_pending === null ? null : s.retired_pages_pending ? 1 : 0,
      s.probe_error,
      JSON.stringify(s.xids ?? []),
      fault,
    ],
  }));
  if (xidReadable !== undefined)
    statements.push({ sql: "UPDATE workers SET xid_readable = ? WHERE id = ?", args: [xidReadable ? 1 : 0, workerId] });
  for (const { sample, fault } of fresh)
    statements.push({
      sql: `INSERT INTO gpu_quarantines (worker_id, gpu_index, reason, since) VALUES (?1, ?2, ?3, ?4)
            ON CONFLICT (worker_id, gpu_index) DO UPDATE SET reason = ?3, since = ?4, cleared_at = NULL, cleared_by = NULL
            WHERE gpu_quarantines.cleared_at IS NOT NULL`,
      args: [workerId, sample.index, fault!, at],
    });
  const gpus = fresh.map((f) => f.sample.index);
  const what = `GPU ${gpus.join(", ")} was quarantined (${fresh.map((f) => f.fault).join("; ")})`;
  if (gpus.length) statements.push(requeueOrFail({ workerId, gpus, what }, at));
  if (!statements.length) return { jobs: [], quarantined: [] };
  const results = await db.$client.batch(statements, "write");
  const jobs = gpus.length ? interruptedChanges(results.at(-1)!.rows as unknown as Row[]) : [];
  return {
    jobs,
    quarantined: fresh.map((f) => ({ index: f.sample.index, reason: f.fault! })),
    audit: fresh.map((f) => ({
      event_type: "gpu_quarantined" as const,
      target: `worker:${workerId}/gpu:${f.sample.index}`,
      details: {
        reason: f.fault,
        requeued: jobs.filter((j) => j.to === "pending").map((j) => j.jobId),
        failed: jobs.filter((j) => j.to === "failed").map((j) => j.jobId),
      },
    })),
  };
}

/**
 * Tells the admins (gpu.quarantined, if they asked for it) of each GPU a heartbeat quarantined:
 * the box, the GPU, the fault and what became of the jobs that were on it.
 *
 * @example
 * await announceQuarantines(ctx, { id: 3, name: "box-a" }, health);
 */
export async function announceQuarantines(ctx: NotifyContext, worker: { id: number; name: string }, health: HealthChange): Promise<void> {
  const requeued = health.jobs.filter((j) => j.to === "pending").map((j) => j.jobId);
  const failed = health.jobs.filter((j) => j.to === "failed").map((j) => j.jobId);
  for (const gpu of health.quarantined)
    await notify(
      ctx,
      "gpu.quarantined",
      { userId: null },
      {
        worker: worker.name,
        worker_id: worker.id,
        gpu_index: gpu.index,
        reason: gpu.reason,
        requeued_jobs: requeued.join(", ") || null,
        failed_jobs: failed.join(", ") || null,
      },
    );
}

/** The GPUs of a worker out of allocation now (what its heartbeat answer tells its runner). */
export async function quarantinedGpus(db: Database, workerId: number): Promise<number[]> {
  const rows = await db.$client.execute({
    sql: "SELECT gpu_index FROM gpu_quarantines WHERE worker_id = ? AND cleared_at IS NULL ORDER BY gpu_index",
    args: [workerId],
  });
  return rows.rows.map((r) => Number(r.gpu_index));
}

/**
 * Lifts a GPU's quarantine: it may be allocated again, and the ECC count and retired-pages flag of
 * its latest sample are accepted (only a fault past them quarantines it again). 404 when the worker
 * has no such GPU quarantined. Audited `gpu_cleared` by the caller.
 *
 * @example
 * const cleared = await clearGpu(db, 1, 1, "admin");
 */
export async function clearGpu(db: Database, workerId: number, index: number, by: string): Promise<Change & { cleared: Quarantine }> {
  const [worker, cleared] = await db.$client.batch(
    [
      { sql: "SELECT 1 FROM workers WHERE id = ?", args: [workerId] },
      {
        sql: `UPDATE gpu_quarantines SET cleared_at = ?3, cleared_by = ?4,
                accepted_ecc = (SELECT ecc_uncorrected FROM gpu_health h WHERE h.worker_id = ?1 AND h.gpu_index = ?2 ORDER BY minute DESC LIMIT 1),
                accepted_retired = (SELECT retired_pages_pending FROM gpu_health h WHERE h.worker_id = ?1 AND h.gpu_index = ?2 ORDER BY minute DESC LIMIT 1)
              WHERE worker_id = ?1 AND gpu_index = ?2 AND cleared_at IS NULL RETURNING reason, since`,
        args: [workerId, index, new Date().toISOString(), by],
      },
    ],
    "write",
  );
  if (!worker!.rows.length) throw notFound(`Worker ${workerId}`);
  const row = cleared!.rows[0];
  if (!row) throw new ApiError(409, "not_quarantined", `GPU ${index} of worker ${workerId} is not quarantined: there is nothing to clear`);
  const lifted = { reason: String(row.reason), since: String(row.since) };
  return {
    jobs: [],
    cleared: lifted,
    audit: [
      { event_type: "gpu_cleared", target: `worker:${workerId}/gpu:${index}`, details: { reason: lifted.reason, since: lifted.since } },
    ],
  };
}

function toPoint(r: Row): Point {
  return {
    at: String(r.sampled_at),
    utilization_percent: num(r.utilization),
    memory_used_mb: num(r.memory_used_mb),
    memory_total_mb: num(r.memory_total_mb),
    temperature_c: num(r.temperature_c),
    ecc_uncorrected_volatile: num(r.ecc_uncorrected),
    retired_pages_pending: flag(r.retired_pages_pending),
    probe_error: r.probe_error === null ? null : String(r.probe_error),
    xids: r.xids ? (JSON.parse(String(r.xids)) as number[]) : [],
    fault: r.fault === null ? null : String(r.fault),
  };
}

/**
 * Every GPU's latest sample and open quarantine, by worker and index (GET /api/system/workers).
 *
 * @example
 * const { latest, quarantines } = await gpuStates(db);
 */
export async function gpuStates(db: Database): Promise<{ latest: Map<string, Point>; quarantines: Map<string, Quarantine> }> {
  const [latest, open] = await db.$client.batch(
    [
      `SELECT h.* FROM gpu_health h JOIN (SELECT worker_id, gpu_index, MAX(minute) AS minute FROM gpu_health GROUP BY worker_id, gpu_index) m
         ON h.worker_id = m.worker_id AND h.gpu_index = m.gpu_index AND h.minute = m.minute`,
      "SELECT worker_id, gpu_index, reason, since FROM gpu_quarantines WHERE cleared_at IS NULL",
    ],
    "read",
  );
  const key = (r: Row) => `${Number(r.worker_id)}/${Number(r.gpu_index)}`;
  return {
    latest: new Map(latest!.rows.map((r) => [key(r as Row), toPoint(r as Row)])),
    quarantines: new Map(open!.rows.map((r) => [key(r as Row), { reason: String(r.reason), since: String(r.since) }])),
  };
}

/**
 * One GPU's samples of the last `hours` (at most 24), oldest first, with its open quarantine.
 *
 * @example
 * const history = await gpuHistory(db, 1, 0, 24, new Date());
 */
export async function gpuHistory(
  db: Database,
  workerId: number,
  index: number,
  hours: number,
  now: Date,
): Promise<z.infer<typeof GpuHealthHistory>> {
  const since = new Date(now.getTime() - Math.min(hours, HEALTH_KEPT_HOURS) * 3_600_000).toISOString();
  const [worker, points, open] = await db.$client.batch(
    [
      { sql: "SELECT gpus FROM workers WHERE id = ?", args: [workerId] },
      {
        sql: "SELECT * FROM gpu_health WHERE worker_id = ? AND gpu_index = ? AND minute >= ? ORDER BY minute",
        args: [workerId, index, minuteOf(since)],
      },
      {
        sql: "SELECT reason, since FROM gpu_quarantines WHERE worker_id = ? AND gpu_index = ? AND cleared_at IS NULL",
        args: [workerId, index],
      },
    ],
    "read",
  );
  const inventory = worker!.rows[0] ? (JSON.parse(String(worker!.rows[0].gpus)) as { index: number }[]) : null;
  if (!inventory) throw notFound(`Worker ${workerId}`);
  if (!inventory.some((g) => g.index === index) && !points!.rows.length) throw notFound(`GPU ${index} of worker ${workerId}`);
  const q = open!.rows[0];
  return {
    worker_id: workerId,
    index,
    quarantine: q ? { reason: String(q.reason), since: String(q.since) } : null,
    points: points!.rows.map((r) => toPoint(r as Row)),
  };
}

/**
 * Deletes samples older than HEALTH_KEPT_HOURS (the Scheduler's housekeeping; one statement on
 * the minute index).
 *
 * @example
 * await forgetOldHealth(db, new Date());
 */
export async function forgetOldHealth(db: Database, now = new Date()): Promise<void> {
  const cutoff = minuteOf(new Date(now.getTime() - HEALTH_KEPT_HOURS * 3_600_000).toISOString());
  await db.$client.execute({ sql: "DELETE FROM gpu_health WHERE minute < ?", args: [cutoff] });
}
