import { loadavg } from "node:os";
import si from "systeminformation";

/** Host figures sent with each heartbeat: 5-minute load average and memory in use. */
export async function hostStats(): Promise<{ load_avg_5min: number; memory_percent: number }> {
  const mem = await si.mem();
  const used = mem.total > 0 ? ((mem.total - mem.available) / mem.total) * 100 : 0;
  return { load_avg_5min: Math.round(loadavg()[1]! * 100) / 100, memory_percent: Math.round(Math.min(100, Math.max(0, used)) * 10) / 10 };
}
