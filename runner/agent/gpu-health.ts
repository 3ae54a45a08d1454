import { execFile } from "node:child_process";
import type { z } from "@hono/zod-openapi";
import type { GpuHealthSample } from "../../shared/schemas/workers";

/*
 * Each heartbeat's GPU health (README "GPU health"): nvidia-smi's documented query fields, one CSV
 * line per GPU, and the Xid errors the kernel log gained since the last read. The edge decides
 * what is fatal (edge/workers/gpu-fault.ts); this only reads and reports.
 */

type Sample = z.input<typeof GpuHealthSample>;

/** The fields asked for, in order (nvidia-smi --help-query-gpu names them). */
export const HEALTH_FIELDS = [
  "index",
  "pci.bus_id",
  "utilization.gpu",
  "memory.used",
  "memory.total",
  "temperature.gpu",
  "ecc.errors.uncorrected.volatile.total",
  "retired_pages.pending",
] as const;

/** Values nvidia-smi prints when it cannot give one: not a fault. */
const UNKNOWN = /^\[?(N\/A|Not Supported|Insufficient Permissions)\]?$/i;
/** Values that mean the device itself did not answer. */
const BROKEN = /^\[(GPU is lost|GPU requires reset|Unknown Error)\]$/i;
/** nvidia-smi's line for a device it could not open: "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost. ..." */
const NO_HANDLE = /Unable to determine the device handle for GPU\s*([0-9A-Fa-f:.]+):\s*(.+)/;

/** A PCI address as a key both nvidia-smi's `00000000:3B:00.0` and the kernel's `0000:3b:00` map to. */
export function pciKey(address: string): string | null {
  const m = /([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})/.exec(address);
  return m ? `${parseInt(m[1]!, 16)}:${parseInt(m[2]!, 16)}:${parseInt(m[3]!, 16)}` : null;
}

const value = (raw: string | undefined): number | null => {
  const text = (raw ?? "").trim();
  if (!text || UNKNOWN.test(text) || BROKEN.test(text)) return null;
  const n = Number(text);
  return Number.isFinite(n) ? n : null;
};

/**
 * nvidia-smi's answer (its stdout and stderr) to the health query, for the GPUs the runner
 * registered: a GPU with a broken field, a "device handle" error naming its bus, or missing from
 * the answer gets `probe_error`; `[N/A]` and `[Not Supported]` become null. When no GPU answered
 * and none was named, nvidia-smi itself failed: no samples (nothing to blame a device for). `busIds` learns each
 * GPU's PCI address, so a lost GPU's later error can be told apart.
 *
 * @example
 * parseHealthCsv("0, 00000000:3B:00.0, 87, 1024, 81920, 54, 0, No\n", "", [0], new Map());
 */
export function parseHealthCsv(stdout: string, stderr: string, indices: number[], busIds: Map<number, string>): Sample[] {
  const rows = new Map<number, string[]>();
  for (const line of stdout.split("\n")) {
    const fields = line.split(",").map((f) => f.trim());
    if (fields.length !== HEALTH_FIELDS.length || !/^\d+$/.test(fields[0]!)) continue;
    rows.set(Number(fields[0]), fields);
    const key = pciKey(fields[1]!);
    if (key) busIds.set(Number(fields[0]), key);
  }
  const handleErrors = new Map<string, string>();
  for (const line of `${stdout}\n${stderr}`.split("\n")) {
    const m = NO_HANDLE.exec(line);
    const key = m ? pciKey(m[1]!) : null;
    if (key) handleErrors.set(key, m![2]!.trim().slice(0, 400));
  }
  // No GPU answered and none was named: nvidia-smi itself failed (a timeout, gone): no device's fault.
  if (rows.size === 0 && handleErrors.size === 0) return [];
  return indices.map((index) => {
    const fields = rows.get(index);
    const bus = busIds.get(index);
    const broken = fields?.slice(2).find((f) => BROKEN.test(f));
    const probe_error =
      (bus && handleErrors.get(bus)) ||
      broken ||
      (fields ? null : `nvidia-smi did not report GPU ${index}${stderr.trim() ? `: ${stderr.trim().split("\n")[0]!.slice(0, 300)}` : ""}`);
    const retired = (fields?.[7] ?? "").trim().toLowerCase();
    return {
      index,
      utilization_percent: value(fields?.[2]),
      memory_used_mb: value(fields?.[3]),
      memory_total_mb: value(fields?.[4]),
      temperature_c: value(fields?.[5]),
      ecc_uncorrected_volatile: value(fields?.[6]),
      retired_pages_pending: retired === "yes" ? true : retired === "no" ? false : null,
      probe_error: probe_error || null,
      xids: [],
    };
  });
}

/** The fields of the row-remapper query (nvidia-smi --help-query-remapped-rows), in order. */
export const REMAP_FIELDS = ["gpu_bus_id", "remapped_rows.pending", "remapped_rows.failure"] as const;

const flagOf = (raw: string | undefined): boolean | null => {
  const text = (raw ?? "").trim().toLowerCase();
  if (text === "yes") return true;
  if (text === "no") return false;
  // Some drivers print counts (rows pending) or 0/1 rather than Yes/No.
  return /^\d+$/.test(text) ? Number(text) > 0 : null;
};

/**
 * nvidia-smi's answer to the row-remapper query, by PCI key: whether rows wait for a reset to be
 * remapped and whether a remap failed. GPUs before Ampere have no row remapper (`[N/A]`, or
 * nvidia-smi refuses the query): nothing is known of them, never a fault.
 *
 * @example
 * parseRemappedCsv("00000000:3B:00.0, 0, No\n"); // Map { "0:59:0" => { pending: false, failure: false } }
 */
export function parseRemappedCsv(stdout: string): Map<string, { pending: boolean | null; failure: boolean | null }> {
  const found = new Map<string, { pending: boolean | null; failure: boolean | null }>();
  for (const line of stdout.split("\n")) {
    const fields = line.split(",").map((f) => f.trim());
    if (fields.length !== REMAP_FIELDS.length) continue;
    const key = pciKey(fields[0]!);
    if (key) found.set(key, { pending: flagOf(fields[1]), failure: flagOf(fields[2]) });
  }
  return found;
}

/** The kernel's Xid line: "[ 1234.5678] NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus." */
const XID = /NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)/;

/**
 * The kernel log's Xid errors, each reported once: the first read only learns what is already
 * there (errors from before the runner started are not this run's to act on). Where the log
 * cannot be read (dmesg refused: kernel.dmesg_restrict, a container), `readable` is false and no
 * Xid is reported; health then comes from nvidia-smi alone.
 */
export class XidWatch {
  private seen = new Set<string>();
  private first = true;
  readable: boolean | undefined;
  detail = "";

  constructor(private readonly command = "dmesg") {}

  /** The Xid codes new since the last read, by PCI key. */
  async read(): Promise<Map<string, number[]>> {
    const found = new Map<string, number[]>();
    const text = await new Promise<string | null>((resolve) =>
      execFile(this.command, [], { timeout: 5_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
        if (error) {
          this.detail = (String(stderr).trim() || (error as Error).message).split("\n")[0]!.slice(0, 300);
          resolve(null);
        } else resolve(String(stdout));
      }),
    );
    this.readable = text !== null;
    if (text === null) return found;
    const lines = text.split("\n").filter((l) => XID.test(l));
    for (const line of lines) {
      if (this.seen.has(line)) continue;
      this.seen.add(line);
      if (this.first) continue;
      const m = XID.exec(line)!;
      const key = pciKey(m[1]!);
      if (key) found.set(key, [...(found.get(key) ?? []), Number(m[2])]);
    }
    // Bounded: a log that scrolls forgets its old lines, and so does this.
    if (this.seen.size > 10_000) this.seen = new Set(lines);
    this.first = false;
    return found;
  }
}

/**
 * Every registered GPU's health now: nvidia-smi's query (a non-zero exit still gives the GPUs it
 * could read), its row-remapper query (Ampere and later) and the Xids new in the kernel log.
 *
 * @example
 * const samples = await readGpuHealth("nvidia-smi", [0, 1], busIds, xids);
 */
export async function readGpuHealth(command: string, indices: number[], busIds: Map<number, string>, xids: XidWatch): Promise<Sample[]> {
  const query = (args: string[]) =>
    new Promise<{ stdout: string; stderr: string }>((resolve) =>
      execFile(command, args, { timeout: 15_000 }, (error, stdout, stderr) =>
        resolve({ stdout: String(stdout ?? ""), stderr: String(stderr ?? "") || (error && !stdout ? (error as Error).message : "") }),
      ),
    );
  const [smi, remap, fresh] = await Promise.all([
    query([`--query-gpu=${HEALTH_FIELDS.join(",")}`, "--format=csv,noheader,nounits"]),
    // Its own query: a driver that does not know the row remapper refuses the whole query it is in.
    query([`--query-remapped-rows=${REMAP_FIELDS.join(",")}`, "--format=csv,noheader,nounits"]),
    xids.read(),
  ]);
  const samples = parseHealthCsv(smi.stdout, smi.stderr, indices, busIds);
  const remapped = parseRemappedCsv(remap.stdout);
  for (const sample of samples) {
    const bus = busIds.get(sample.index);
    sample.xids = (bus && fresh.get(bus)) || [];
    const rows = bus ? remapped.get(bus) : undefined;
    sample.remapped_rows_pending = rows?.pending ?? null;
    sample.remapped_rows_failure = rows?.failure ?? null;
  }
  return samples;
}
