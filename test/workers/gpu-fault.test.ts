// The rule that quarantines a GPU (edge/workers/gpu-fault.ts), and the runner's reading of
// nvidia-smi's health query and of the kernel log (runner/agent/gpu-health.ts), as pure functions
// and against the fake nvidia-smi and dmesg the stack tests use.
import { appendFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { gpuFault } from "../../edge/workers/gpu-fault";
import { parseHealthCsv, parseRemappedCsv, pciKey, readGpuHealth, XidWatch } from "../../runner/agent/gpu-health";

const healthy = {
  index: 1,
  utilization_percent: 97,
  memory_used_mb: 80_000,
  memory_total_mb: 81_920,
  temperature_c: 88,
  ecc_uncorrected_volatile: 0,
  retired_pages_pending: false,
  probe_error: null,
  xids: [],
};

describe("the GPU fault rule", () => {
  it("finds nothing in a busy, hot, full GPU", () => {
    expect(gpuFault(healthy)).toBeNull();
  });

  it("finds nothing where nvidia-smi could not give a value ([N/A], [Not Supported])", () => {
    const unknown = {
      ...healthy,
      utilization_percent: null,
      temperature_c: null,
      ecc_uncorrected_volatile: null,
      retired_pages_pending: null,
    };
    expect(gpuFault(unknown)).toBeNull();
  });

  it("names uncorrected ECC errors, pending retirement, a failed probe and a fatal Xid", () => {
    expect(gpuFault({ ...healthy, ecc_uncorrected_volatile: 2 })).toBe("2 uncorrected ECC errors (volatile)");
    expect(gpuFault({ ...healthy, ecc_uncorrected_volatile: 1 })).toBe("1 uncorrected ECC error (volatile)");
    expect(gpuFault({ ...healthy, retired_pages_pending: true })).toBe("memory pages are pending retirement");
    expect(gpuFault({ ...healthy, probe_error: "GPU is lost" })).toBe("device probe failed: GPU is lost");
    expect(gpuFault({ ...healthy, xids: [79] })).toBe("Xid 79 in the kernel log");
    expect(gpuFault({ ...healthy, xids: [48, 48, 94] })).toBe("Xid 48, 94 in the kernel log");
  });

  it("names a failed row remap and rows pending remapping (Ampere and later); unknown is no fault, and a clear does not accept them", () => {
    expect(gpuFault({ ...healthy, remapped_rows_failure: true, remapped_rows_pending: false })).toBe(
      "a memory row could not be remapped (remapped_rows.failure)",
    );
    expect(gpuFault({ ...healthy, remapped_rows_failure: false, remapped_rows_pending: true })).toBe(
      "memory rows are pending remapping: the GPU needs a reset (remapped_rows.pending)",
    );
    expect(gpuFault({ ...healthy, remapped_rows_failure: null, remapped_rows_pending: null })).toBeNull();
    expect(gpuFault({ ...healthy, remapped_rows_failure: false, remapped_rows_pending: false })).toBeNull();
    expect(gpuFault({ ...healthy, remapped_rows_pending: true }, { ecc: 9, retired: true })).toMatch(/pending remapping/);
  });

  it("leaves application Xids (13, 31, 43) to the job", () => {
    expect(gpuFault({ ...healthy, xids: [13, 31, 43] })).toBeNull();
  });

  it("does not fault again what an admin accepted when clearing, but does a fault past it", () => {
    const accepted = { ecc: 2, retired: true };
    expect(gpuFault({ ...healthy, ecc_uncorrected_volatile: 2, retired_pages_pending: true }, accepted)).toBeNull();
    expect(gpuFault({ ...healthy, ecc_uncorrected_volatile: 3 }, accepted)).toBe("3 uncorrected ECC errors (volatile)");
    expect(gpuFault({ ...healthy, probe_error: "[GPU requires reset]" }, accepted)).toBe("device probe failed: [GPU requires reset]");
  });
});

describe("the runner's health reading", () => {
  it("maps nvidia-smi's and the kernel's PCI addresses to one key", () => {
    expect(pciKey("00000000:3B:00.0")).toBe("0:59:0");
    expect(pciKey("PCI:0000:3b:00")).toBe("0:59:0");
    expect(pciKey("nonsense")).toBeNull();
  });

  it("reads values, [N/A] and [Not Supported] as null, broken fields and a lost GPU as probe errors", () => {
    const bus = new Map<number, string>();
    const stdout = [
      "0, 00000000:01:00.0, [Not Supported], 1024, 81920, 45, [N/A], [N/A]",
      "1, 00000000:02:00.0, [GPU requires reset], [GPU requires reset], [GPU requires reset], [GPU requires reset], [GPU requires reset], [GPU requires reset]",
    ].join("\n");
    const [zero, one, two] = parseHealthCsv(stdout, "", [0, 1, 2], bus);
    expect(zero).toMatchObject({ utilization_percent: null, memory_used_mb: 1024, memory_total_mb: 81920, temperature_c: 45 });
    expect(zero).toMatchObject({ ecc_uncorrected_volatile: null, retired_pages_pending: null, probe_error: null });
    expect(one!.probe_error).toBe("[GPU requires reset]");
    expect(one!.memory_used_mb).toBeNull();
    expect(two!.probe_error).toBe("nvidia-smi did not report GPU 2");
    // Once its address is known, a lost GPU is named by it.
    const lost = "Unable to determine the device handle for GPU 00000000:02:00.0: GPU is lost.  Reboot the system to recover this GPU";
    const [, gone] = parseHealthCsv(stdout.split("\n")[0]!, lost, [0, 1], bus);
    expect(gone!.probe_error).toBe("GPU is lost.  Reboot the system to recover this GPU");
  });

  it("blames no GPU when nvidia-smi itself failed and named none", () => {
    expect(parseHealthCsv("", "nvidia-smi: timed out", [0, 1], new Map())).toEqual([]);
  });
});

describe("the runner's Xid watch (fake dmesg)", () => {
  const fake = resolve("test/fakes/dmesg");
  const saved = process.env.FAKE_DMESG_FILE;
  afterEach(() => {
    if (saved === undefined) delete process.env.FAKE_DMESG_FILE;
    else process.env.FAKE_DMESG_FILE = saved;
  });

  it("says the kernel log is unreadable where dmesg is refused, and reports no Xid", async () => {
    delete process.env.FAKE_DMESG_FILE;
    const watch = new XidWatch(fake);
    expect((await watch.read()).size).toBe(0);
    expect(watch.readable).toBe(false);
    expect(watch.detail).toContain("Operation not permitted");
  });

  it("reports each Xid logged after its first read once, by the GPU's PCI address", async () => {
    const log = join(mkdtempSync(join(tmpdir(), "dmesg-")), "kmsg");
    writeFileSync(log, "[  10.1] NVRM: Xid (PCI:0000:02:00): 79, pid=0, GPU has fallen off the bus.\n");
    process.env.FAKE_DMESG_FILE = log;
    const watch = new XidWatch(fake);
    expect((await watch.read()).size).toBe(0); // from before the runner started: not this run's
    expect(watch.readable).toBe(true);
    appendFileSync(log, "[  20.2] NVRM: Xid (PCI:0000:01:00): 48, pid=12, DBE (double bit error)\n[  20.3] usb 1-1: new device\n");
    expect([...(await watch.read())]).toEqual([["0:1:0", [48]]]);
    expect((await watch.read()).size).toBe(0);
  });

  it("reads the row remapper's answer by PCI address: Yes/No, counts, and [N/A] as unknown", () => {
    const found = parseRemappedCsv(
      ["00000000:01:00.0, No, No", "00000000:02:00.0, Yes, No", "00000000:03:00.0, 0, 1", "00000000:04:00.0, [N/A], [N/A]", "garbage"].join(
        "\n",
      ),
    );
    expect([...found]).toEqual([
      ["0:1:0", { pending: false, failure: false }],
      ["0:2:0", { pending: true, failure: false }],
      ["0:3:0", { pending: false, failure: true }],
      ["0:4:0", { pending: null, failure: null }],
    ]);
    expect(parseRemappedCsv("").size).toBe(0);
  });

  it("puts the row remapper's state on each GPU's sample through the fake nvidia-smi", async () => {
    const faults = join(mkdtempSync(join(tmpdir(), "smi-")), "faults");
    writeFileSync(faults, "0 remap-pending\n1 remap-failed\n");
    process.env.FAKE_NVIDIA_FAULTS = faults;
    process.env.FAKE_DMESG_FILE = join(mkdtempSync(join(tmpdir(), "dmesg-")), "kmsg");
    writeFileSync(process.env.FAKE_DMESG_FILE, "");
    try {
      const samples = await readGpuHealth(resolve("test/fakes/nvidia-smi"), [0, 1], new Map(), new XidWatch(fake));
      expect(samples.map((s) => [s.remapped_rows_pending, s.remapped_rows_failure])).toEqual([
        [true, false],
        [false, true],
      ]);
      expect(samples.map((s) => gpuFault(s))).toEqual([
        "memory rows are pending remapping: the GPU needs a reset (remapped_rows.pending)",
        "a memory row could not be remapped (remapped_rows.failure)",
      ]);
    } finally {
      delete process.env.FAKE_NVIDIA_FAULTS;
    }
  });

  it("puts a new Xid on its GPU's sample through the fake nvidia-smi", async () => {
    const log = join(mkdtempSync(join(tmpdir(), "dmesg-")), "kmsg");
    writeFileSync(log, "");
    process.env.FAKE_DMESG_FILE = log;
    const watch = new XidWatch(fake);
    const bus = new Map<number, string>();
    const first = await readGpuHealth(resolve("test/fakes/nvidia-smi"), [0, 1], bus, watch);
    expect(first.map((s) => s.xids)).toEqual([[], []]);
    appendFileSync(log, "[  30.0] NVRM: Xid (PCI:0000:02:00): 79, pid=0, GPU has fallen off the bus.\n");
    const second = await readGpuHealth(resolve("test/fakes/nvidia-smi"), [0, 1], bus, watch);
    expect(second.map((s) => s.xids)).toEqual([[], [79]]);
    expect(second.map((s) => gpuFault(s))).toEqual([null, "Xid 79 in the kernel log"]);
  });
});
