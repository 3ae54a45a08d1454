// GPU health over real HTTP against the real stack, with the real runner process and the fake
// nvidia-smi and dmesg: the box reports each GPU's health every heartbeat; breaking GPU 1 while a
// job holds it quarantines it in the heartbeat that reports it, the job is requeued and runs on GPU
// 0, no new job gets GPU 1, and only an admin's clear (audited) puts it back. [N/A] quarantines
// nothing; a worker's heartbeat reaches only its own GPUs.
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnRunner, stopRunner, type RunnerProcess } from "../helpers/runner-process";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until as waitUntil } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let lead: { key: string };
let researcher: { key: string };
let runner: RunnerProcess;
let token: string;
let boxId: number;
/** The job that held GPU 1 when it broke, and the job submitted while it was out. */
let heldJob: string;
let waitingJob: string;
const dir = mkdtempSync(join(tmpdir(), "gpu-health-"));
const faults = join(dir, "faults");
const kernelLog = join(dir, "kmsg");
const as = (who: { key: string }) => ({ key: who.key });

const until = <T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 30_000) =>
  waitUntil(what, probe, { timeoutMs, everyMs: 100, context: () => `runner output:\n${runner.output}` });

const box = async () =>
  ((await t.call("GET", "/api/system/workers", { auth: as(researcher) })).body.workers as any[]).find((w) => w.id === boxId);
const gpu = async (index: number) => (await box()).gpus.find((g: any) => g.index === index);
const entry = async (jobId: string) =>
  ((await t.call("GET", "/api/queue?include_completed=true&limit=1000", { auth: as(admin) })).body.jobs as any[]).find(
    (j) => j.job_id === jobId,
  );
const submit = async (config_name: string) => {
  const reply = await t.call("POST", "/api/queue/submit", { json: { config_name, target: "local" }, auth: as(researcher) });
  expect(reply.status).toBe(200);
  return reply.body;
};
const audited = async (type: string) =>
  (await t.call("GET", `/api/audit?event_type=${type}&limit=100`, { auth: as(admin) })).body.entries as any[];
const clear = (who: { key?: string; bearer?: string }, index = 1, id = boxId) =>
  t.call("POST", `/api/system/workers/${id}/gpus/${index}/clear`, { auth: who });

async function env(name: string, config: Record<string, unknown>) {
  expect((await t.call("POST", "/api/configs/environments", { json: { name }, auth: as(researcher) })).status).toBe(201);
  expect((await t.call("PUT", `/api/configs/${name}`, { json: { config }, auth: as(researcher) })).status).toBe(200);
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  lead = await createUserWithKey(t, { cookie: admin.cookie }, "lead");
  researcher = await createUserWithKey(t, { cookie: admin.cookie }, "researcher");
  await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 4 }, auth: as(admin) });
  const created = await t.call("POST", "/api/admin/workers", { json: { name: "gpu-box" }, auth: as(admin) });
  token = created.body.token;
  boxId = created.body.id;
  writeFileSync(faults, "");
  writeFileSync(kernelLog, "[    4.2] NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n");
  runner = spawnRunner(t.base, token, ["--local", "--work-dir", join(dir, "work")], {
    env: {
      PATH: `${resolve("test/fakes")}:${process.env.PATH}`,
      FAKE_NVIDIA_GPUS: "2",
      FAKE_NVIDIA_FAULTS: faults,
      FAKE_DMESG_FILE: kernelLog,
    },
    pollMs: 500,
  });
  await until("the runner to register", async () => runner.output.includes("registered as worker"));
  await env("short", { "--trainer": "demo", "--num_processes": 1, "--max_train_steps": 4, "--demo_step_ms": 300 });
  await env("long", { "--trainer": "demo", "--num_processes": 1, "--max_train_steps": 100000, "--demo_step_ms": 50 });
});
afterAll(async () => {
  await stopRunner(runner?.child);
  await t?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("GPU health", () => {
  it("shows every user each GPU's health from the runner's heartbeats, and a day of it per GPU", async () => {
    const healthy = await until("GPU 1's health", async () => (await gpu(1))?.health);
    expect(healthy).toMatchObject({
      utilization_percent: 35,
      memory_used_mb: 1024,
      memory_total_mb: 81920,
      temperature_c: 45,
      ecc_uncorrected_volatile: 0,
      retired_pages_pending: false,
      probe_error: null,
      xids: [],
      fault: null,
    });
    expect((await gpu(1)).quarantine).toBeNull();
    expect((await box()).xid_readable).toBe(true);
    const history = await t.call("GET", `/api/system/workers/${boxId}/gpus/1/health?hours=1`, { auth: as(researcher) });
    expect(history.status).toBe(200);
    expect(history.body).toMatchObject({ worker_id: boxId, index: 1, quarantine: null });
    expect(history.body.points.length).toBeGreaterThanOrEqual(1);
    expect(history.body.points.at(-1)).toMatchObject({ temperature_c: 45, fault: null });
  });

  it("refuses a bad history request with a 4xx that says what is wrong", async () => {
    const hours = await t.call("GET", `/api/system/workers/${boxId}/gpus/1/health?hours=48`, { auth: as(researcher) });
    expect(hours.status).toBe(422);
    expect(hours.text).toContain("hours");
    expect((await t.call("GET", `/api/system/workers/${boxId}/gpus/9/health`, { auth: as(researcher) })).status).toBe(404);
    expect((await t.call("GET", `/api/system/workers/999/gpus/0/health`, { auth: as(researcher) })).status).toBe(404);
    expect((await t.call("GET", `/api/system/workers/${boxId}/gpus/1/health`)).status).toBe(401);
  });

  it("quarantines nothing for values nvidia-smi cannot give ([N/A], [Not Supported])", async () => {
    writeFileSync(faults, "0 na\n1 na\n");
    const unknown = await until("[N/A] to be reported", async () => {
      const g = await gpu(0);
      return g.health?.ecc_uncorrected_volatile === null && g.health?.utilization_percent === null && g;
    });
    expect(unknown.health).toMatchObject({ retired_pages_pending: null, fault: null, memory_used_mb: 40960 });
    expect(unknown.quarantine).toBeNull();
    expect((await gpu(1)).quarantine).toBeNull();
    writeFileSync(faults, "");
    await until("healthy values again", async () => (await gpu(0)).health?.ecc_uncorrected_volatile === 0);
  });

  it("takes a GPU with uncorrected ECC errors out in the heartbeat that reports it, and its job runs on the other GPU", async () => {
    const first = await submit("short");
    expect(first).toMatchObject({ status: "running", allocated_gpus: [0] });
    const held = await submit("long");
    expect(held).toMatchObject({ status: "running", allocated_gpus: [1] });
    await until("the short job to end", async () => (await entry(first.job_id))?.status === "completed");
    await until("the long job's trainer to start", async () => runner.output.includes(`job ${held.job_id} started on GPUs [1]`));

    writeFileSync(faults, "1 ecc\n");
    const quarantined = await until("GPU 1 to be quarantined", async () => (await gpu(1)).quarantine);
    expect(quarantined.reason).toBe("2 uncorrected ECC errors (volatile)");
    // The same heartbeat stored the faulty sample and quarantined the GPU: within one heartbeat.
    const history = (await t.call("GET", `/api/system/workers/${boxId}/gpus/1/health`, { auth: as(researcher) })).body;
    const faulty = history.points.filter((p: any) => p.fault !== null);
    expect(faulty[0]).toMatchObject({ ecc_uncorrected_volatile: 2, fault: "2 uncorrected ECC errors (volatile)" });
    expect(history.quarantine).toEqual(quarantined);

    const moved = await until("the job to run again on GPU 0", async () => {
      const e = await entry(held.job_id);
      return e?.status === "running" && e.attempt === 2 && e;
    });
    expect(moved.allocated_gpus).toEqual([0]);
    await until("its trainer to restart on GPU 0", async () => runner.output.includes(`job ${held.job_id} started on GPUs [0]`));
    const audit = await until("the quarantine's audit entry", async () =>
      (await audited("gpu_quarantined")).find((e) => e.target === `worker:${boxId}/gpu:1`),
    );
    expect(audit).toMatchObject({ actor: null, details: { reason: "2 uncorrected ECC errors (volatile)", requeued: [held.job_id] } });

    const status = (await t.call("GET", "/api/system/status?include_allocation=true", { auth: as(researcher) })).body;
    expect(status.gpu_allocation).toMatchObject({ allocated_gpus: [0], available_gpus: [] });
    // A new job never gets GPU 1: it waits for GPU 0.
    const waiting = await submit("short");
    expect(waiting).toMatchObject({ status: "queued", allocated_gpus: null });
    waitingJob = waiting.job_id;
    heldJob = held.job_id;
    const listed = await entry(waiting.job_id);
    expect(listed).toMatchObject({ status: "pending", wait_reason: "gpus_busy", wait_message: "needs 1 GPU(s) of [0]; free now: []" });
  }, 90_000);

  it("keeps the GPU out for a researcher's, a lead's or a worker's clear, and for a healthy report", async () => {
    writeFileSync(faults, "");
    await until("a healthy report of GPU 1", async () => (await gpu(1)).health?.ecc_uncorrected_volatile === 0);
    for (const who of [researcher, lead]) {
      const refused = await clear(as(who));
      expect(refused.status).toBe(403);
    }
    expect((await clear({ bearer: token })).status).toBe(401);
    expect((await gpu(1)).quarantine).toMatchObject({ reason: "2 uncorrected ECC errors (volatile)" });
    expect(await entry(waitingJob)).toMatchObject({ status: "pending" });
    expect(await audited("gpu_cleared")).toEqual([]);
  });

  it("refuses a clear of a GPU that is not quarantined or of no worker, changing nothing", async () => {
    const notOut = await clear(as(admin), 0);
    expect(notOut.status).toBe(409);
    expect(notOut.body).toMatchObject({ code: "not_quarantined" });
    expect((await clear(as(admin), 1, 999)).status).toBe(404);
    const bad = await t.call("POST", `/api/system/workers/${boxId}/gpus/x/clear`, { auth: as(admin) });
    expect(bad.status).toBe(422);
    expect((await gpu(1)).quarantine).not.toBeNull();
  });

  it("puts the GPU back when an admin clears it (audited): the waiting job gets it", async () => {
    writeFileSync(faults, "1 ecc\n"); // the count an admin accepts when clearing
    await until("the fault reported again", async () => (await gpu(1)).health?.ecc_uncorrected_volatile === 2);
    const cleared = await clear(as(admin));
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ worker_id: boxId, index: 1, cleared: { reason: "2 uncorrected ECC errors (volatile)" } });
    const waiting = waitingJob;
    const started = await until("the waiting job to start", async () => {
      const e = await entry(waiting);
      return e?.status !== "pending" && e;
    });
    expect(started.allocated_gpus).toEqual([1]);
    const audit = await until("the clear's audit entry", async () => (await audited("gpu_cleared"))[0]);
    expect(audit).toMatchObject({ actor: "admin", target: `worker:${boxId}/gpu:1` });
    // The accepted count does not quarantine it again at the next heartbeats; a higher one would.
    const after = Date.now();
    await until("a report after the clear", async () => Date.parse((await gpu(1)).health?.at ?? "0") > after + 1000);
    expect((await gpu(1)).quarantine).toBeNull();
  }, 90_000);

  it("quarantines a GPU for a fatal Xid in the kernel log, named by its PCI address", async () => {
    appendFileSync(kernelLog, "[  812.5] NVRM: Xid (PCI:0000:01:00): 79, pid=0, name=python, GPU has fallen off the bus.\n");
    const out = await until("GPU 0 to be quarantined", async () => (await gpu(0)).quarantine);
    expect(out.reason).toBe("Xid 79 in the kernel log");
    expect((await gpu(1)).quarantine).toBeNull();
    expect(await entry(heldJob)).toMatchObject({ status: expect.stringMatching(/pending|running/), attempt: 3 });
  });

  it("quarantines a GPU whose memory rows wait for a reset to be remapped (nvidia-smi's row remapper)", async () => {
    writeFileSync(faults, "1 remap-pending\n");
    const out = await until("GPU 1 to be quarantined", async () => (await gpu(1)).quarantine);
    expect(out.reason).toBe("memory rows are pending remapping: the GPU needs a reset (remapped_rows.pending)");
    expect((await gpu(1)).health).toMatchObject({ fault: out.reason, probe_error: null });
  });
});

describe("a worker's heartbeat", () => {
  it("reaches only its own GPUs, and shows a probe error as text", async () => {
    const other = await t.call("POST", "/api/admin/workers", { json: { name: "other-box" }, auth: as(admin) });
    const bearer = other.body.token as string;
    const reg = await t.call("POST", "/api/workers/register", {
      json: { role: "remote", labels: { pool: "x" }, gpus: [{ index: 1, name: "NVIDIA L4", memory_mb: 23034 }] },
      auth: { bearer },
    });
    expect(reg.status).toBe(200);
    const job = await t.call("POST", "/api/queue/submit", {
      json: { config_name: "long", target: "worker", worker_labels: { pool: "x" } },
      auth: as(researcher),
    });
    expect(job.body).toMatchObject({ status: "running", worker_id: other.body.id });
    const before = (await gpu(1)).quarantine;
    const sample = {
      index: 1,
      utilization_percent: null,
      memory_used_mb: null,
      memory_total_mb: null,
      temperature_c: null,
      ecc_uncorrected_volatile: null,
      retired_pages_pending: null,
      probe_error: "<img src=x onerror=alert(1)>",
      xids: [],
    };
    const beat = await t.call("POST", "/api/workers/heartbeat", { json: { gpu_health: [sample] }, auth: { bearer } });
    expect(beat.status).toBe(200);
    // Quarantined in this very answer, on its own worker only; the job is no longer its to run.
    expect(beat.body.quarantined_gpus).toEqual([1]);
    expect(beat.body.assignments).toEqual([]);
    expect(await entry(job.body.job_id)).toMatchObject({ status: "pending", attempt: 2, worker_id: null });
    const mine = ((await t.call("GET", "/api/system/workers", { auth: as(researcher) })).body.workers as any[]).find(
      (w) => w.id === other.body.id,
    );
    expect(mine.gpus[0].quarantine.reason).toBe("device probe failed: <img src=x onerror=alert(1)>");
    expect((await gpu(1)).quarantine).toEqual(before);
    const bad = await t.call("POST", "/api/workers/heartbeat", {
      json: { gpu_health: [{ ...sample, utilization_percent: 250 }] },
      auth: { bearer },
    });
    expect(bad.status).toBe(422);
    expect(bad.text).toContain("utilization_percent");
  });
});
