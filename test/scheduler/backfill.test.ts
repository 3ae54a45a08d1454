// Backfill on the real stack (issue 17): a local box whose fake nvidia-smi reports 8 GPUs runs demo
// jobs of known length. A 4-GPU job runs; an 8-GPU job waits past the (short) starvation threshold
// and gets a reservation for when the 4-GPU job is expected to end; a short 1-GPU job starts before
// it on a reserved GPU, a long one is told whose reservation it waits behind; the 8-GPU job starts
// when the 4-GPU job ends. The rules one by one: test/scheduler/scheduler-backfill.test.ts.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnRunner, stopRunner } from "../helpers/runner-process";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until as waitUntil } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let runner: ChildProcess;
let runnerOutput = "";
const workDir = mkdtempSync(join(tmpdir(), "backfill-runner-"));
const configFile = join(mkdtempSync(join(tmpdir(), "backfill-config-")), "runner.json");
const auth = () => ({ key: admin.key });
const until = <T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 60_000) =>
  waitUntil(what, probe, { timeoutMs, everyMs: 200, context: () => `runner output:\n${runnerOutput.slice(-4000)}` });

async function environment(name: string, config: Record<string, unknown>) {
  expect((await t.call("POST", "/api/configs/environments", { json: { name }, auth: auth() })).status).toBe(201);
  expect((await t.call("PUT", `/api/configs/${name}`, { json: { config }, auth: auth() })).status).toBe(200);
}
const submit = async (config_name: string) =>
  (await t.call("POST", "/api/queue/submit", { json: { config_name, target: "local" }, auth: auth() })).body;
const entry = async (jobId: string) => (await t.call("GET", `/api/queue/jobs/${jobId}`, { auth: auth() })).body;
const ms = (iso: string) => Date.parse(iso);

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  const created = await t.call("POST", "/api/admin/workers", { json: { name: "eight-gpus" }, auth: auth() });
  writeFileSync(configFile, JSON.stringify({ sandbox: "auto" }));
  runner = spawnRunner(t.base, created.body.token, ["--local", "--config", configFile, "--work-dir", workDir], {
    env: { PATH: `${resolve("test/fakes")}:${process.env.PATH}`, FAKE_NVIDIA_GPUS: "8" },
    onOutput: (text) => (runnerOutput += text),
  }).child;
  await until("the runner to register 8 GPUs", async () => runnerOutput.includes("registered as worker"));
  // A job that has waited 3 s is past the threshold.
  const limits = await t.call("POST", "/api/queue/concurrency", {
    json: { local_job_max_concurrent: 8, starvation_threshold_minutes: 0.05 },
    auth: auth(),
  });
  expect(limits.status).toBe(200);
  const demo = { "--trainer": "demo" };
  // 30 steps of 1 s on 4 GPUs: long enough for the others to be decided while it runs.
  await environment("four-gpus", { ...demo, "--num_processes": 4, "--max_train_steps": 30, "--demo_step_ms": 1000 });
  await environment("eight-gpus", { ...demo, "--num_processes": 8, "--max_train_steps": 3, "--demo_step_ms": 100 });
  // A short one (a few seconds, known from its earlier run) and one allowed 10 min (--max_runtime_minutes).
  await environment("short", { ...demo, "--num_processes": 1, "--max_train_steps": 2, "--demo_step_ms": 200 });
  await environment("long", { ...demo, "--num_processes": 1, "--max_train_steps": 2, "--demo_step_ms": 200, "--max_runtime_minutes": 10 });
}, 60_000);

afterAll(async () => {
  await stopRunner(runner);
  await t?.stop();
  rmSync(workDir, { recursive: true, force: true });
  rmSync(dirname(configFile), { recursive: true, force: true });
});

describe("backfill on an 8-GPU box", () => {
  it("starts a short job before a reserved 8-GPU job, keeps a long one waiting, and starts the 8-GPU job when expected", async () => {
    // One run of the short environment, so the next one's run time is known from it.
    const first = await submit("short");
    expect(first.status).toBe("running");
    await until("the first short run to complete", async () => (await entry(first.job_id)).status === "completed");

    const four = await submit("four-gpus");
    expect(four).toMatchObject({ status: "running", allocated_gpus: [0, 1, 2, 3] });
    // Its progress gives it an expected end.
    const running = await until("the 4-GPU job's expected end from its progress", async () => {
      const e = await entry(four.job_id);
      return e.expected_end_method === "progress" && e;
    });
    expect(ms(running.expected_end_at)).toBeGreaterThan(Date.now());

    const eight = await submit("eight-gpus");
    expect(eight).toMatchObject({ status: "queued", wait_reason: "gpus_busy" });
    // Past the threshold, a pass gives it a reservation for when the 4-GPU job is expected to end.
    const reserved = await until("the 8-GPU job's reservation", async () => {
      const e = await entry(eight.job_id);
      return typeof e.expected_start_at === "string" && e.wait_message?.includes("reserved (") && e;
    });
    expect(reserved.wait_message).toContain("reserved (waited past the starvation threshold): GPUs [0, 1, 2, 3, 4, 5, 6, 7] from ");
    const expectedStart = ms(reserved.expected_start_at);
    expect(Math.abs(expectedStart - ms((await entry(four.job_id)).expected_end_at))).toBeLessThan(10_000);
    expect(expectedStart - Date.now()).toBeGreaterThan(15_000);

    // Expected to run as long as its earlier run (seconds), well within the reservation's wait: it
    // starts now, on a reserved GPU.
    const short = await submit("short");
    expect(short).toMatchObject({ status: "running", allocated_gpus: [4] });
    // Expected to run 10 min: it would delay the 8-GPU job, so it waits, told why.
    const long = await submit("long");
    expect(long).toMatchObject({ status: "queued", wait_reason: "reserved" });
    expect(long.message).toContain(
      `they are reserved for ${eight.job_id}, which has waited past the starvation threshold and is expected to start at `,
    );
    expect(long.message).toContain("this job, expected to run 10 min, would end after that");

    const started = await until("the 8-GPU job to start", async () => {
      const e = await entry(eight.job_id);
      return e.status !== "pending" && e;
    });
    const [fourDone, shortDone] = [await entry(four.job_id), await entry(short.job_id)];
    expect(fourDone.status).toBe("completed");
    expect(shortDone.status).toBe("completed");
    // The short job ran and ended before the 8-GPU job started, which started when the 4-GPU job
    // ended (the pass on its completion), and no later than expected.
    expect(ms(shortDone.completed_at)).toBeLessThanOrEqual(ms(started.started_at));
    expect(ms(started.started_at) - ms(fourDone.completed_at)).toBeGreaterThanOrEqual(0);
    expect(ms(started.started_at) - ms(fourDone.completed_at)).toBeLessThan(5_000);
    expect(ms(started.started_at)).toBeLessThan(expectedStart + 5_000);
    expect(started.allocated_gpus).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    // The long job still waits: all 8 GPUs are the 8-GPU job's now.
    expect((await entry(long.job_id)).status).toBe("pending");
    await until("everything to finish", async () => (await entry(long.job_id)).status === "completed");
  }, 120_000);
});
