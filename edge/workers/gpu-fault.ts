import type { z } from "@hono/zod-openapi";
import type { GpuHealthSample } from "../../shared/schemas/workers";

/*
 * THE rule that takes a GPU out of allocation: a pure function of one health sample and what an
 * admin accepted when they last cleared it. Utilisation, memory and temperature never quarantine
 * (a hot or full GPU is working); values nvidia-smi could not give ([N/A], [Not Supported]) are
 * null and never quarantine either.
 */

type Sample = z.input<typeof GpuHealthSample>;

/** What an admin accepted when clearing the GPU: the counts then seen are not faults again. */
export interface Accepted {
  ecc: number | null;
  retired: boolean | null;
}

/**
 * Xid codes that mean the device or its memory can no longer be trusted (NVIDIA's Xid catalogue):
 * 48 double-bit ECC, 62 internal micro-controller halt, 63/64 ECC page retirement or row remap
 * event/failure, 74 NVLink error, 79 fallen off the bus, 92 high single-bit ECC rate, 94/95
 * contained/uncontained ECC error, 119/120 GSP RPC timeout/error, 140 unrecovered ECC error.
 * Application faults (13, 31, 43, 45) are the job's, not the GPU's.
 */
export const FATAL_XIDS: ReadonlySet<number> = new Set([48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140]);

/**
 * The fatal fault in a sample, in a line, or null when there is none.
 *
 * @example
 * gpuFault({ index: 1, ecc_uncorrected_volatile: 2, ... }) // "2 uncorrected ECC errors (volatile)"
 */
export function gpuFault(sample: Sample, accepted: Accepted | null = null): string | null {
  if (sample.probe_error) return `device probe failed: ${sample.probe_error}`;
  const fatal = (sample.xids ?? []).filter((x) => FATAL_XIDS.has(x));
  if (fatal.length) return `Xid ${[...new Set(fatal)].join(", ")} in the kernel log`;
  const ecc = sample.ecc_uncorrected_volatile;
  if (ecc !== null && ecc > (accepted?.ecc ?? 0)) return `${ecc} uncorrected ECC error${ecc === 1 ? "" : "s"} (volatile)`;
  if (sample.retired_pages_pending === true && accepted?.retired !== true) return "memory pages are pending retirement";
  // Ampere and later remap rows instead of retiring pages (NVIDIA's "Memory error management"):
  // a failed remap is memory beyond repair; a pending one waits for a GPU reset to take effect.
  // Neither is accepted by a clear: reset the GPU first, or it is quarantined again.
  if (sample.remapped_rows_failure === true) return "a memory row could not be remapped (remapped_rows.failure)";
  if (sample.remapped_rows_pending === true) return "memory rows are pending remapping: the GPU needs a reset (remapped_rows.pending)";
  return null;
}
