import type { GpuPrices } from "../../shared/schemas/spend";

/*
 * What one job cost and how many GPU-hours it held (README "Spend"). A job on the service's own
 * boxes is priced from its GPU-seconds (started_at to completed_at, or to now while it runs, times
 * the GPUs it held) at the admin's $/GPU-hour: the box's own price, else its GPU model's, else the
 * default. A cloud job costs what its provider billed (cloud_jobs.cost_usd, edge/cloud/cost.ts),
 * one GPU for its billed seconds on `gpu-*` hardware. Pure: edge/spend/cost-report.ts reads the rows.
 */

/** A started job as the cost report reads it. */
export interface JobUsage {
  jobType: "local" | "cloud";
  startedAt: string;
  completedAt: string | null;
  /** The local box's devices the job held; null or [] on a remote worker (held whole) or for a CPU job. */
  allocatedGpus: number[] | null;
  worker: { name: string; role: "local" | "remote"; gpus: { index: number; name: string }[] } | null;
  cloud: { costUsd: number; billedSeconds: number | null; hardware: string } | null;
}

export interface JobSpend {
  gpuSeconds: number;
  /** Ten-thousandths of a dollar, as edge/cloud/cost.ts counts them. */
  costUnits: number;
}

const units = (usd: number) => Math.round(Number((usd * 10_000).toPrecision(12)));

/** Whole seconds from start to end (or now), never negative. */
function runSeconds(job: Pick<JobUsage, "startedAt" | "completedAt">, now: number): number {
  const start = Date.parse(job.startedAt);
  const end = job.completedAt === null ? now : Date.parse(job.completedAt);
  return Number.isNaN(start) || Number.isNaN(end) ? 0 : Math.max(0, Math.floor((end - start) / 1000));
}

/**
 * The GPUs a job on a box held, each with its model: the local box's allocated devices, or every
 * GPU of a remote worker (a worker runs one job at a time, given to it whole).
 */
function heldGpus(job: JobUsage): { name: string }[] {
  if (job.worker === null) return [];
  const inventory = new Map(job.worker.gpus.map((g) => [g.index, g.name]));
  if (job.allocatedGpus?.length) return job.allocatedGpus.map((index) => ({ name: inventory.get(index) ?? "" }));
  return job.worker.role === "remote" ? job.worker.gpus : [];
}

/**
 * The price of one GPU-hour of `model` on the box `worker`.
 *
 * @example
 * gpuHourPrice(prices, "gpu-box-1", "NVIDIA H100 80GB HBM3"); // prices.workers["gpu-box-1"] ?? prices.gpu_models[...] ?? default
 */
export function gpuHourPrice(prices: GpuPrices, worker: string, model: string): number {
  return prices.workers[worker] ?? prices.gpu_models[model] ?? prices.default_usd_per_gpu_hour;
}

/**
 * A job's GPU-seconds and cost.
 *
 * @example
 * jobSpend({ jobType: "local", startedAt: "2026-11-01T00:00:00Z", completedAt: "2026-11-01T00:30:00Z", allocatedGpus: [0, 1],
 *   worker: { name: "box", role: "local", gpus: [{ index: 0, name: "A" }, { index: 1, name: "A" }] }, cloud: null },
 *   { currency: "USD", default_usd_per_gpu_hour: 3, workers: {}, gpu_models: {} }, Date.now()); // { gpuSeconds: 3600, costUnits: 30000 }
 */
export function jobSpend(job: JobUsage, prices: GpuPrices, now: number): JobSpend {
  if (job.jobType === "cloud") {
    const seconds = job.cloud?.billedSeconds ?? runSeconds(job, now);
    const gpus = job.cloud?.hardware.startsWith("gpu-") ? 1 : 0;
    return { gpuSeconds: Math.max(0, Math.floor(seconds)) * gpus, costUnits: units(job.cloud?.costUsd ?? 0) };
  }
  const seconds = runSeconds(job, now);
  const gpus = heldGpus(job);
  const usd = gpus.reduce((sum, gpu) => sum + (gpuHourPrice(prices, job.worker!.name, gpu.name) * seconds) / 3600, 0);
  return { gpuSeconds: seconds * gpus.length, costUnits: units(usd) };
}
