import { freemem, loadavg, totalmem } from "node:os";

/**
 * Host figures sent with each heartbeat: 5-minute load average and memory in use. Node's freemem
 * is the kernel's MemAvailable (libuv 1.45+, every Node this runs on), what `free` calls
 * available: no library needed for it (systeminformation cost the idle runner ~10 MB).
 */
export async function hostStats(): Promise<{ load_avg_5min: number; memory_percent: number }> {
  const total = totalmem();
  const used = total > 0 ? ((total - freemem()) / total) * 100 : 0;
  return { load_avg_5min: Math.round(loadavg()[1]! * 100) / 100, memory_percent: Math.round(Math.min(100, Math.max(0, used)) * 10) / 10 };
}
