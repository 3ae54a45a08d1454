import { execFile } from "node:child_process";

export interface Gpu {
  index: number;
  uuid?: string;
  name: string;
  memory_mb: number;
}

/**
 * The box's NVIDIA GPUs from `nvidia-smi --query-gpu` (CSV, no header, no units). A box
 * without nvidia-smi (or without a driver) has none: an empty list, not an error.
 * systeminformation is not used here: it finds NVIDIA GPUs only through lspci first.
 */
export function detectGpus(command = "nvidia-smi"): Promise<Gpu[]> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      ["--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits"],
      { timeout: 15_000 },
      (error, stdout) => {
        if (error) {
          const code = (error as NodeJS.ErrnoException).code;
          // Not installed, or installed without a working driver: no GPUs.
          if (code === "ENOENT" || typeof code === "number" || (error as { killed?: boolean }).killed === false) return resolve([]);
          return reject(error);
        }
        try {
          resolve(parseGpuCsv(stdout));
        } catch (e) {
          reject(e);
        }
      },
    );
  });
}

/** `0, GPU-abc, NVIDIA A100-SXM4-80GB, 81920` lines to devices. */
export function parseGpuCsv(text: string): Gpu[] {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const [index, uuid, name, memory] = line.split(",").map((f) => f.trim());
      const gpu = { index: Number(index), uuid: uuid || undefined, name: name ?? "", memory_mb: Math.round(Number(memory)) };
      if (!Number.isInteger(gpu.index) || !gpu.name || !Number.isFinite(gpu.memory_mb))
        throw new Error(`nvidia-smi printed a line this runner cannot read: ${JSON.stringify(line)}`);
      return gpu;
    });
}
