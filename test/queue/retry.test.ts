// Retry and continue (issue 30, Build 6) over real HTTP against the real stack with npm start's own
// runner: a demo-trainer job fails after saving checkpoints (its output directory taken away, as a
// full or broken disk would), and a retry of it is a new job in its lineage that the runner starts
// from the old job's newest checkpoint. Retrying a running job, another researcher's job or as a
// viewer queues nothing.
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

const runnerDir = mkdtempSync(join(tmpdir(), "retry-runner-"));
const workDir = join(runnerDir, "work");
let t: TestStack;
let admin: { key: string };
let ada: { key: string; id: number };
let bob: { key: string; id: number };
let vic: { key: string };
let lea: { key: string };

const as = (who: { key: string }) => ({ auth: { key: who.key } });
const entry = async (jobId: string, who: { key: string } = admin) => (await t.call("GET", `/api/queue/jobs/${jobId}`, as(who))).body;
const events = async (jobId: string) =>
  (await t.call("GET", `/api/training/events?job_id=${jobId}&since_index=0&limit=1000`, as(admin))).body.events as any[];
const jobCount = async () => (await t.call("GET", "/api/queue?include_completed=true&limit=1000", as(admin))).body.jobs.length as number;
/** Stops a running job (POST /api/training/stop: a checkpoint, then it ends completed: a stopped job). */
async function stop(jobId: string) {
  await until("it to have begun training", async () =>
    (await events(jobId)).some((e) => e.type === "training.progress" || e.type === "checkpoint.saved"),
  );
  const stopped = await t.call("POST", "/api/training/stop", { json: { job_id: jobId }, ...as(ada) });
  expect(stopped.status, stopped.text).toBe(200);
  await until("it to stop", async () => (await entry(jobId)).status === "completed", { timeoutMs: 60_000 });
}
const retry = (jobId: string, who: { key: string }) => t.call("POST", `/api/queue/${jobId}/retry`, as(who));

/** A job of `long` that saved checkpoints and then failed: its output directory became a file at a checkpoint save. */
async function failedWithCheckpoints(): Promise<{ jobId: string; saved: number[] }> {
  const submitted = await t.call("POST", "/api/queue/submit", { json: { config_name: "long" }, ...as(ada) });
  expect(submitted.body.status, submitted.text).toBe("running");
  const jobId = submitted.body.job_id as string;
  await until("two checkpoints", async () => (await events(jobId)).filter((e) => e.type === "checkpoint.saved").length >= 2, {
    timeoutMs: 60_000,
  });
  const output = join(workDir, "jobs", jobId, "output");
  renameSync(output, `${output}-kept`);
  writeFileSync(output, "not a directory");
  await until("the job to fail", async () => (await entry(jobId)).status === "failed", { timeoutMs: 60_000 });
  rmSync(output);
  renameSync(`${output}-kept`, output);
  const saved = (await events(jobId)).filter((e) => e.type === "checkpoint.saved").map((e) => e.data.step as number);
  return { jobId, saved };
}

beforeAll(async () => {
  writeFileSync(join(runnerDir, "runner.json"), JSON.stringify({ work_dir: workDir }));
  // Two GPUs from the fake nvidia-smi, so the jobs' GPU-hours are not zero. npm start's runner
  // runs in this process (this file's own), and looks for nvidia-smi on its PATH.
  process.env.PATH = `${resolve("test/fakes")}:${process.env.PATH}`;
  process.env.FAKE_NVIDIA_GPUS = "2";
  t = await startTestStack(undefined, undefined, {
    localRunner: true,
    runnerConfig: join(runnerDir, "runner.json"),
    runnerEnv: { PATH: process.env.PATH },
  });
  admin = await setUpAdmin(t);
  ada = await createUserWithKey(t, admin, "researcher", "ada");
  bob = await createUserWithKey(t, admin, "researcher", "bob");
  vic = await createUserWithKey(t, admin, "viewer", "vic");
  lea = await createUserWithKey(t, admin, "lead", "lea");
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "long" }, ...as(ada) })).status).toBe(201);
  const config = {
    "--trainer": "demo",
    "--num_processes": 1,
    "--max_train_steps": 600,
    "--demo_step_ms": 40,
    "--checkpointing_steps": 5,
  };
  expect((await t.call("PUT", "/api/configs/long", { json: { config }, ...as(ada) })).status).toBe(200);
  await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 4 }, ...as(admin) });
  await until("the local runner to register its GPUs", async () => {
    const workers = (await t.call("GET", "/api/system/workers", as(admin))).body;
    return JSON.stringify(workers).includes("local-box");
  });
}, 120_000);

afterAll(async () => {
  await t?.stop();
  rmSync(runnerDir, { recursive: true, force: true });
});

describe("POST /api/queue/{job_id}/retry", () => {
  it("continues a failed job as a new job in its lineage, from its newest recorded checkpoint", async () => {
    const old = await failedWithCheckpoints();
    const newest = Math.max(...old.saved);

    const answer = await retry(old.jobId, ada);
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toMatchObject({
      success: true,
      status: "running",
      retry_of: old.jobId,
      lineage_id: old.jobId,
      resume_from: { job_id: old.jobId, checkpoint: `checkpoint-${newest}`, step: newest },
    });
    const retried = answer.body.job_id as string;
    expect(retried).not.toBe(old.jobId);

    // The runner copied that checkpoint in and launched the trainer with the resume argument.
    const prepared = await until("the resume to be prepared", async () =>
      (await events(retried)).find((e) => e.type === "resume.prepared"),
    );
    expect(prepared.data).toMatchObject({
      job_id: old.jobId,
      checkpoint: `checkpoint-${newest}`,
      step: newest,
      resume_argument: "--resume_from_checkpoint=latest",
    });
    const options = JSON.parse(readFileSync(join(workDir, "jobs", retried, "service", "options.json"), "utf8"));
    expect(options["--resume_from_checkpoint"]).toBe("latest");
    expect(existsSync(join(workDir, "jobs", retried, "output", `checkpoint-${newest}`, "weights.json"))).toBe(true);
    const started = await until("the trainer to start", async () => (await events(retried)).find((e) => e.type === "training.started"));
    expect(started.data.resumed_from_step).toBe(newest);

    // The same snapshot, the same owner; the new job names what it retries and its lineage.
    const snapshot = async (id: string) => (await t.call("GET", `/api/training/config?job_id=${id}`, as(ada))).body;
    const [a, b] = await Promise.all([snapshot(old.jobId), snapshot(retried)]);
    expect(a.config["--max_train_steps"]).toBe(600);
    expect(b.config).toEqual(a.config);
    const shown = await entry(retried, ada);
    expect(shown).toMatchObject({ user_id: ada.id, retry_of: old.jobId, config_name: "long" });

    // Stop it (a checkpoint, then it ends completed), then the lineage totals both jobs' GPU-hours
    // (one GPU each, from start to end).
    await stop(retried);
    const [first, second] = [await entry(old.jobId, ada), await entry(retried, ada)];
    const hours = (j: any) => (Date.parse(j.completed_at) - Date.parse(j.started_at)) / 3_600_000;
    expect(second.lineage).toMatchObject({ id: old.jobId, jobs: [old.jobId, retried], cost: 0 });
    expect(second.lineage.gpu_hours).toBeCloseTo(hours(first) + hours(second), 9);
    expect(second.lineage.gpu_hours).toBeGreaterThan(hours(first));
    expect(first.lineage).toEqual(second.lineage);

    // A retry of the retry stays in the lineage.
    const again = await retry(retried, ada);
    expect(again.status, again.text).toBe(200);
    expect(again.body).toMatchObject({ retry_of: retried, lineage_id: old.jobId });
    await stop(again.body.job_id);
    expect((await entry(again.body.job_id, ada)).lineage.jobs).toEqual([old.jobId, retried, again.body.job_id]);
  }, 180_000);

  it("refuses a running job with 409 naming its status, and queues nothing", async () => {
    const submitted = await t.call("POST", "/api/queue/submit", { json: { config_name: "long" }, ...as(ada) });
    const jobId = submitted.body.job_id as string;
    await until("it to run", async () => (await entry(jobId)).status === "running");
    const before = await jobCount();
    const refused = await retry(jobId, ada);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: "job_not_retryable" });
    expect(refused.body.detail).toContain(`Job ${jobId} is running`);
    expect(await jobCount()).toBe(before);
    await stop(jobId);
  });

  it("refuses another researcher (403) and a viewer (403) with nothing queued; a lead may retry a stopped job, for its owner, audited", async () => {
    const submitted = await t.call("POST", "/api/queue/submit", { json: { config_name: "long" }, ...as(ada) });
    const jobId = submitted.body.job_id as string;
    await until("it to run", async () => (await entry(jobId)).status === "running");
    await stop(jobId);
    const before = await jobCount();

    const byBob = await retry(jobId, bob);
    expect(byBob.status).toBe(403);
    expect(byBob.body.code).toBe("not_your_job");
    const byVic = await retry(jobId, vic);
    expect(byVic.status).toBe(403);
    expect(await jobCount()).toBe(before);
    // Nor does bob learn the lineage of ada's job.
    expect((await entry(jobId, bob)).lineage).toBeUndefined();

    const byLea = await retry(jobId, lea);
    expect(byLea.status, byLea.text).toBe(200);
    expect(await jobCount()).toBe(before + 1);
    expect(await entry(byLea.body.job_id, ada)).toMatchObject({ user_id: ada.id, retry_of: jobId });
    await stop(byLea.body.job_id);
    const audit = (await t.call("GET", "/api/audit?event_type=job_retried", as(admin))).body;
    expect(JSON.stringify(audit)).toContain(byLea.body.job_id);
  });

  it("retries a job cancelled before it started: no checkpoint, it starts from step 0", async () => {
    const approvals = await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 0 }, ...as(admin) });
    expect(approvals.status, approvals.text).toBe(200);
    try {
      const blocked = await t.call("POST", "/api/queue/submit", { json: { config_name: "long" }, ...as(ada) });
      expect(blocked.body.status).toBe("blocked");
      expect((await t.call("POST", `/api/queue/${blocked.body.job_id}/cancel`, as(ada))).status).toBe(200);
      // Approval rules apply to the retry as to any submission.
      const retried = await retry(blocked.body.job_id, ada);
      expect(retried.status, retried.text).toBe(200);
      expect(retried.body).toMatchObject({ status: "blocked", resume_from: null, retry_of: blocked.body.job_id });
      expect((await t.call("POST", `/api/queue/${retried.body.job_id}/cancel`, as(ada))).status).toBe(200);
    } finally {
      await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: null }, ...as(admin) });
    }
  });

  it("answers 404 for an unknown job and 409 for a completed one", async () => {
    expect((await retry("local-000000000000", ada)).status).toBe(404);
    const short = await t.call("POST", "/api/configs/environments", { json: { name: "short" }, ...as(ada) });
    expect(short.status).toBe(201);
    await t.call("PUT", "/api/configs/short", {
      json: { config: { "--trainer": "demo", "--num_processes": 0, "--max_train_steps": 3, "--demo_step_ms": 10 } },
      ...as(ada),
    });
    const done = (await t.call("POST", "/api/queue/submit", { json: { config_name: "short" }, ...as(ada) })).body.job_id;
    await until("it to complete", async () => (await entry(done)).status === "completed", { timeoutMs: 60_000 });
    const refused = await retry(done, ada);
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toContain("completed");
  }, 90_000);
});
