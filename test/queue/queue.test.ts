// The queue and the Scheduler DO over real HTTP: local GPU allocation, limits, ordering,
// approvals, priority overrides, reasons and the permission checks specific to jobs.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let lead: { key: string };
let researcher: { key: string; id: number };
let other: { key: string; id: number };
let viewer: { key: string };

const as = (who: { key: string }) => ({ key: who.key });
const GPUS = [0, 1, 2, 3].map((index) => ({ index, uuid: `GPU-${index}`, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }));

async function env(name: string, config: Record<string, unknown>) {
  const created = await t.call("POST", "/api/configs/environments", {
    json: { name, model_family: "flux", model_type: "lora" },
    auth: as(admin),
  });
  expect(created.status).toBe(201);
  const updated = await t.call("PUT", `/api/configs/${name}`, {
    json: { config: { "--model_family": "flux", ...config } },
    auth: as(admin),
  });
  expect(updated.status).toBe(200);
}
const submit = (who: { key: string }, body: Record<string, unknown>) => t.call("POST", "/api/queue/submit", { json: body, auth: as(who) });
const limits = (body: Record<string, unknown>) => t.call("POST", "/api/queue/concurrency", { json: body, auth: as(admin) });
const list = async () => (await t.call("GET", "/api/queue?limit=1000", { auth: as(admin) })).body.jobs as any[];

/** Cancels every waiting job and lowers capacity so each test starts from an empty queue. */
async function drain() {
  for (const job of await list())
    if (job.status !== "running") await t.call("POST", `/api/queue/${job.job_id}/cancel`, { auth: as(admin) });
}
/** Running jobs cannot be cancelled here (next issue); tests use fresh GPUs by re-registering a box without those jobs' devices. */
function allocations(jobs: any[]) {
  return jobs.filter((j) => j.status === "running" && j.worker_name === "box").flatMap((j) => j.allocated_gpus as number[]);
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  lead = await createUserWithKey(t, { cookie: admin.cookie }, "lead");
  researcher = await createUserWithKey(t, { cookie: admin.cookie }, "researcher");
  other = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "other-researcher");
  viewer = await createUserWithKey(t, { cookie: admin.cookie }, "viewer");
  await env("one-gpu", { "--num_processes": 1 });
  await env("two-gpu", { "--num_processes": 2 });
  await env("pinned", { "--num_processes": 2, "--accelerate_visible_devices": "2,3" });
  await env("cpu", { "--num_processes": 0 });
  await env("huge", { "--num_processes": 8 });
});
afterAll(async () => {
  await t?.stop();
});

describe("without a GPU box", () => {
  it("queues a local job with the reason no_local_box, and no_wait rejects it storing nothing", async () => {
    const queued = await submit(researcher, { config_name: "one-gpu", target: "local" });
    expect(queued.body).toMatchObject({
      success: true,
      status: "queued",
      queue_position: 1,
      wait_reason: "no_local_box",
      allocated_gpus: null,
    });
    const before = (await list()).length;
    const rejected = await submit(researcher, { config_name: "one-gpu", target: "local", no_wait: true });
    expect(rejected.status).toBe(200);
    expect(rejected.body).toMatchObject({ success: false, status: "rejected", job_id: null, wait_reason: "no_local_box" });
    expect((await list()).length).toBe(before);
    await drain();
  });

  it("answers 404 for an unknown environment and 422 for a bad body, storing nothing", async () => {
    expect((await submit(researcher, { config_name: "nope" })).status).toBe(404);
    const bad = await submit(researcher, { config_name: "one-gpu", target: "moon", surprise: 1 });
    expect(bad.status).toBe(422);
    expect(bad.body.errors.map((e: { path: string }) => e.path).sort()).toEqual(["body", "body.target"]);
    expect(await list()).toEqual([]);
  });

  it("refuses submission to viewers", async () => {
    expect((await submit(viewer, { config_name: "one-gpu" })).status).toBe(403);
  });

  it("refuses a key revoked right after it submitted: 401 invalid_api_key, nothing queued", async () => {
    const mine = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "revoked-researcher");
    const first = await submit(mine, { config_name: "cpu" });
    expect(first.status, first.text).toBe(200);
    expect(first.body.status).toBe("queued");
    // The jobs and their states, not whole entries: a Scheduler pass may fill in an entry's expected start meanwhile.
    const jobs = async () => (await list()).map((j) => [j.job_id, j.status]);
    const before = await jobs();
    const [key] = (await t.call("GET", "/api/cloud/auth/api-keys", { auth: { cookie: mine.cookie } })).body.keys;
    expect((await t.call("DELETE", `/api/cloud/auth/api-keys/${key.id}`, { auth: { cookie: mine.cookie } })).status).toBe(200);
    const after = await submit(mine, { config_name: "cpu" });
    expect(after.status, after.text).toBe(401);
    expect(after.body.code).toBe("invalid_api_key");
    expect(await jobs()).toEqual(before);
    await drain();
  });
});

describe("with a registered local box of 4 GPUs", () => {
  let boxToken: string;
  beforeAll(async () => {
    const created = await t.call("POST", "/api/admin/workers", { json: { name: "box" }, auth: as(admin) });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: "box", status: "connecting" });
    expect(created.body.token).toMatch(/^stw_[A-Za-z0-9_-]{43}$/);
    boxToken = created.body.token;
    const registered = await t.call("POST", "/api/workers/register", {
      json: { role: "local", gpus: GPUS, hostname: "box-1", host_stats: { load_avg_5min: 0.5, memory_percent: 12 } },
      auth: { bearer: boxToken },
    });
    expect(registered.status).toBe(200);
    expect(registered.body).toMatchObject({ status: "IDLE", heartbeat_timeout_seconds: 90, assignments: [] });
  });

  it("starts a job at once on the lowest free GPU, and queues the next behind local_job_max_concurrent", async () => {
    const first = await submit(researcher, { config_name: "one-gpu", target: "local" });
    expect(first.body).toMatchObject({ success: true, status: "running", allocated_gpus: [0], queue_position: null });
    const second = await submit(researcher, { config_name: "one-gpu", target: "local" });
    expect(second.body).toMatchObject({ status: "queued", queue_position: 1, wait_reason: "local_job_limit" });
    const position = await t.call("GET", `/api/queue/position/${second.body.job_id}`, { auth: as(viewer) });
    expect(position.body).toEqual({
      job_id: second.body.job_id,
      status: "pending",
      position: 1,
      waiting_ahead: 0,
      wait_reason: "local_job_limit",
      wait_message: "1 of 1 local jobs are running (local_job_max_concurrent)",
      effective_priority: 10,
      // The running job has no expected end, so the start is unknown; a viewer is not told how it was estimated.
      expected_start_at: null,
      expected_start_basis: null,
    });
    // Raising the limit is a scheduling event: the waiting job starts without waiting for the tick.
    expect((await limits({ local_job_max_concurrent: 8 })).body.local_job_max_concurrent).toBe(8);
    const now = await t.call("GET", `/api/queue/position/${second.body.job_id}`, { auth: as(viewer) });
    expect(now.body).toMatchObject({ status: "running", position: null, wait_reason: null });
    const status = await t.call("GET", "/api/system/status?include_allocation=true", { auth: as(viewer) });
    expect(status.body.gpu_allocation).toMatchObject({ allocated_gpus: [0, 1], available_gpus: [2, 3], running_local_jobs: 2 });
    expect(status.body.gpu_allocation.devices[0]).toEqual({
      index: 0,
      name: "NVIDIA A100-SXM4-80GB",
      memory_gb: 80,
      allocated: true,
      job_id: first.body.job_id,
    });
    expect(status.body).toMatchObject({ load_avg_5min: 0.5, memory_percent: 12, gpu_inventory: { backend: "cuda", count: 4 } });
  });

  it("honours configured devices unless any_gpu, and says why a job cannot fit", async () => {
    const pinned = await submit(researcher, { config_name: "pinned", target: "local" });
    expect(pinned.body).toMatchObject({ status: "running", allocated_gpus: [2, 3] });
    const busy = await submit(other, { config_name: "pinned", target: "local", no_wait: true });
    expect(busy.body).toMatchObject({
      status: "rejected",
      wait_reason: "gpus_busy",
      message: "rejected (no_wait): needs 2 GPU(s) of [2, 3]; free now: []",
    });
    const huge = await submit(other, { config_name: "huge", target: "local" });
    expect(huge.body).toMatchObject({
      status: "queued",
      wait_reason: "insufficient_gpus",
      message: "queued: needs 8 GPU(s) but the local box has 4",
    });
    const cpu = await submit(other, { config_name: "cpu", target: "local" });
    expect(cpu.body).toMatchObject({ status: "running", allocated_gpus: [] });
    const me = await t.call("GET", "/api/queue/me", { auth: as(other) });
    expect(me.body).toMatchObject({ pending_count: 1, running_count: 1, blocked_count: 0, best_position: 1 });
    expect(me.body.pending_jobs[0]).toMatchObject({ job_id: huge.body.job_id, wait_reason: "insufficient_gpus", position: 1 });
    const stats = await t.call("GET", "/api/queue/stats", { auth: as(viewer) });
    expect(stats.body.local).toEqual({
      running_jobs: 4,
      pending_jobs: 1,
      allocated_gpus: [0, 1, 2, 3],
      available_gpus: [],
      total_gpus: 4,
      max_concurrent_gpus: null,
      max_concurrent_jobs: 8,
    });
    expect(stats.body).toMatchObject({
      queue_depth: 0,
      running: 0,
      max_concurrent: 5,
      user_max_concurrent: 2,
      local_job_max_concurrent: 8,
    });
    expect(stats.body.by_status).toMatchObject({ running: 4, pending: 1 });
    await drain();
  });

  it("orders waiting jobs by level priority, then submission, and lets a lead override", async () => {
    const r = await submit(researcher, { config_name: "one-gpu", target: "local" });
    const l = await submit(lead, { config_name: "one-gpu", target: "local" });
    const a = await submit(admin, { config_name: "one-gpu", target: "local" });
    const order = (await list()).filter((j) => j.status === "pending").map((j) => [j.job_id, j.position, j.effective_priority]);
    expect(order).toEqual([
      [a.body.job_id, 1, 30],
      [l.body.job_id, 2, 20],
      [r.body.job_id, 3, 10],
    ]);
    expect((await t.call("POST", `/api/queue/${r.body.job_id}/priority`, { json: { priority: 25 }, auth: as(researcher) })).status).toBe(
      403,
    );
    const bumped = await t.call("POST", `/api/queue/${r.body.job_id}/priority`, { json: { priority: 25 }, auth: as(lead) });
    expect(bumped.body.job).toMatchObject({ priority_override: 25, effective_priority: 25, position: 2 });
    expect((await t.call("POST", `/api/queue/${r.body.job_id}/priority`, { json: { priority: 101 }, auth: as(lead) })).status).toBe(422);
    await drain();
  });

  it("lets researchers cancel only their own waiting jobs, and refuses to cancel a running one here", async () => {
    const mine = await submit(researcher, { config_name: "one-gpu", target: "local" });
    expect(mine.body.status).toBe("queued");
    const refused = await t.call("POST", `/api/queue/${mine.body.job_id}/cancel`, { auth: as(other) });
    expect(refused.status).toBe(403);
    expect((await t.call("GET", `/api/queue/position/${mine.body.job_id}`, { auth: as(viewer) })).body.status).toBe("pending");
    const cancelled = await t.call("POST", `/api/queue/${mine.body.job_id}/cancel`, { auth: as(researcher) });
    expect(cancelled.body.job).toMatchObject({ status: "cancelled", error_message: "Cancelled before it started" });
    expect((await t.call("POST", `/api/queue/${mine.body.job_id}/cancel`, { auth: as(researcher) })).status).toBe(409);
    const running = (await list()).find((j) => j.status === "running")!;
    const onRunning = await t.call("POST", `/api/queue/${running.job_id}/cancel`, { auth: as(admin) });
    expect(onRunning.status).toBe(409);
    expect(onRunning.body.code).toBe("job_running");
    expect((await t.call("POST", "/api/queue/no-such-job/cancel", { auth: as(admin) })).status).toBe(404);
  });

  it("keeps a job caught by an approval rule blocked, even with free GPUs, until an admin approves", async () => {
    // A fresh box with free GPUs: re-registering replaces the inventory; running jobs keep theirs.
    await limits({ local_job_max_concurrent: 50 });
    await t.call("POST", "/api/workers/register", {
      json: {
        role: "local",
        gpus: [...GPUS, ...[4, 5, 6, 7].map((index) => ({ index, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }))],
      },
      auth: { bearer: boxToken },
    });
    expect((await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 1 }, auth: as(admin) })).body).toEqual({
      cloud_cost_threshold: 50,
      local_gpu_threshold: 1,
    });
    const blocked = await submit(researcher, { config_name: "two-gpu", target: "local" });
    expect(blocked.body).toMatchObject({
      success: true,
      status: "blocked",
      wait_reason: "awaiting_approval",
      message: "awaiting an admin's approval: asks for 2 GPUs; more than 1 needs approval",
    });
    expect((await t.call("POST", "/api/queue/process", { auth: as(admin) })).body.started).toEqual([]);
    const still = await t.call("GET", `/api/queue/position/${blocked.body.job_id}`, { auth: as(viewer) });
    expect(still.body).toMatchObject({ status: "blocked", wait_reason: "awaiting_approval", position: null });
    expect((await t.call("POST", `/api/queue/${blocked.body.job_id}/approve`, { auth: as(lead) })).status).toBe(403);
    const approved = await t.call("POST", `/api/queue/${blocked.body.job_id}/approve`, { auth: as(admin) });
    expect(approved.body.job).toMatchObject({ status: "running", requires_approval: true, allocated_gpus: [4, 5] });
    expect((await t.call("POST", `/api/queue/${blocked.body.job_id}/approve`, { auth: as(admin) })).body.code).toBe(
      "not_awaiting_approval",
    );

    const second = await submit(researcher, { config_name: "two-gpu", target: "local" });
    expect((await t.call("POST", `/api/queue/${second.body.job_id}/reject`, { auth: as(admin) })).status).toBe(422);
    const rejected = await t.call("POST", `/api/queue/${second.body.job_id}/reject?reason=${encodeURIComponent("too big for today")}`, {
      auth: as(admin),
    });
    expect(rejected.body.job).toMatchObject({ status: "cancelled", error_message: "Rejected: too big for today", allocated_gpus: null });
    await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: null }, auth: as(admin) });
  });

  it("never gives a GPU to two jobs when 50 submissions race", async () => {
    const before = allocations(await list());
    const free = 8 - before.length;
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) => submit(i % 2 ? researcher : other, { config_name: "one-gpu", target: "local", any_gpu: true })),
    );
    expect(replies.every((r) => r.status === 200 && r.body.success)).toBe(true);
    expect(replies.filter((r) => r.body.status === "running")).toHaveLength(free);
    expect(replies.filter((r) => r.body.status === "queued").map((r) => r.body.wait_reason)).toEqual(Array(50 - free).fill("gpus_busy"));
    const jobs = await list();
    const given = allocations(jobs);
    expect(new Set(given).size).toBe(given.length);
    expect(given.sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    for (const job of jobs.filter((j) => j.status === "pending")) expect(job.allocated_gpus).toBeNull();
    expect(jobs.filter((j) => j.status === "pending").map((j) => j.position)).toEqual(Array.from({ length: 50 - free }, (_, i) => i + 1));
    await drain();
  });

  it("decides a burst of submissions together, each with its own answer; refused and rejected ones store nothing", async () => {
    await env("broken", { "--accelerate_visible_devices": "lots" });
    // The race above left every GPU taken, so the burst's GPU jobs wait (or, with no_wait, are rejected).
    await limits({ local_job_max_concurrent: 100 });
    const before = (await list()).length;
    const gpu = { config_name: "one-gpu", target: "local", any_gpu: true };
    // Interleaved, so a rejected submission sits between queued ones in the same decision.
    const bodies = [
      gpu,
      { ...gpu, no_wait: true },
      gpu,
      { config_name: "nope" },
      { ...gpu, no_wait: true },
      gpu,
      { config_name: "broken" },
      gpu,
      { ...gpu, no_wait: true },
      { config_name: "cpu", target: "local" },
      gpu,
      { config_name: "nope" },
      gpu,
      { config_name: "broken" },
    ];
    const replies = await Promise.all(bodies.map((body, i) => submit(i % 2 ? researcher : other, body)));
    const of = (test: (b: Record<string, unknown>) => boolean) => replies.filter((_, i) => test(bodies[i]!));
    const queued = of((b) => b.config_name === "one-gpu" && !b.no_wait);
    expect(queued.map((r) => [r.status, r.body.status, r.body.wait_reason])).toEqual(Array(6).fill([200, "queued", "gpus_busy"]));
    expect(queued.map((r) => r.body.queue_position).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(of((b) => b.no_wait === true).map((r) => [r.body.status, r.body.job_id, r.body.wait_reason])).toEqual(
      Array(3).fill(["rejected", null, "gpus_busy"]),
    );
    expect(of((b) => b.config_name === "nope").map((r) => [r.status, r.body.detail])).toEqual(
      Array(2).fill([404, "Environment nope not found"]),
    );
    expect(of((b) => b.config_name === "broken").map((r) => [r.status, r.body.code])).toEqual(Array(2).fill([422, "invalid_environment"]));
    const [cpu] = of((b) => b.config_name === "cpu");
    expect(cpu!.body).toMatchObject({ status: "running", allocated_gpus: [] });
    const jobs = await list();
    expect(jobs).toHaveLength(before + 7);
    expect(new Set([...queued, cpu!].map((r) => r.body.job_id)).size).toBe(7);
    // The queue's positions agree with the answers, with no gap where the rejected ones were.
    const pending = jobs.filter((j) => j.status === "pending");
    expect(pending.map((j) => j.position)).toEqual([1, 2, 3, 4, 5, 6]);
    for (const r of queued) expect(pending.find((j) => j.job_id === r.body.job_id)?.position).toBe(r.body.queue_position);
    await drain();
  });
});

describe("changes seen by the very next submission", () => {
  it("uses an environment's new GPU options and a new approval rule at once", async () => {
    await env("shifting", { "--num_processes": 0 });
    const before = await submit(researcher, { config_name: "shifting", target: "local" });
    expect(before.body).toMatchObject({ status: "running", allocated_gpus: [] });
    // Every GPU is taken by now: with one GPU asked for, the very next submission must wait.
    expect(
      (
        await t.call("PUT", "/api/configs/shifting", {
          json: { config: { "--model_family": "flux", "--num_processes": 1 } },
          auth: as(admin),
        })
      ).status,
    ).toBe(200);
    const after = await submit(researcher, { config_name: "shifting", target: "local", no_wait: true });
    expect(after.body).toMatchObject({ status: "rejected", wait_reason: "gpus_busy" });
    // And a rule made just now catches the next one.
    expect((await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 0 }, auth: as(admin) })).status).toBe(200);
    expect((await submit(researcher, { config_name: "shifting", target: "local" })).body.status).toBe("blocked");
    await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: null }, auth: as(admin) });
    await drain();
  });
});

describe("settings and housekeeping", () => {
  it("validates limits and keeps fields not sent", async () => {
    const bad = await limits({ max_concurrent: -1, local_gpu_max_concurrent: "many" });
    expect(bad.status).toBe(422);
    expect(bad.body.errors.map((e: { path: string }) => e.path).sort()).toEqual(["body.local_gpu_max_concurrent", "body.max_concurrent"]);
    const before = (await t.call("GET", "/api/queue/concurrency", { auth: as(viewer) })).body;
    const after = await limits({ max_concurrent: 7, enable_fair_share: true, local_gpu_max_concurrent: 6 });
    expect(after.body).toEqual({ ...before, max_concurrent: 7, enable_fair_share: true, local_gpu_max_concurrent: 6 });
    expect((await t.call("GET", "/api/queue/concurrency", { auth: as(viewer) })).body).toEqual(after.body);
    expect((await t.call("POST", "/api/queue/concurrency", { json: { max_concurrent: 1 }, auth: as(lead) })).status).toBe(403);
  });

  it("takes a starvation threshold in fractions of a minute, refuses one that is not a number of minutes from 0 to a week, and lets only admins set it", async () => {
    const before = (await t.call("GET", "/api/queue/concurrency", { auth: as(viewer) })).body;
    for (const bad of [-0.5, 10_081, "0.5", null, Number.MAX_VALUE]) {
      const reply = await limits({ starvation_threshold_minutes: bad });
      expect(reply.status, JSON.stringify(bad)).toBe(422);
      expect(reply.body.errors.map((e: { path: string }) => e.path)).toEqual(["body.starvation_threshold_minutes"]);
    }
    const byLead = await t.call("POST", "/api/queue/concurrency", { json: { starvation_threshold_minutes: 0.5 }, auth: as(lead) });
    expect(byLead.status).toBe(403);
    expect((await t.call("GET", "/api/queue/concurrency", { auth: as(viewer) })).body).toEqual(before);
    const half = await limits({ starvation_threshold_minutes: 0.5 });
    expect(half.body).toEqual({ ...before, starvation_threshold_minutes: 0.5 });
    expect((await limits({ starvation_threshold_minutes: before.starvation_threshold_minutes })).status).toBe(200);
  });

  it("bounds cleanup days to 1..365 and never deletes active entries", async () => {
    for (const days of [0, 366, "x"])
      expect((await t.call("POST", `/api/queue/cleanup?days=${days}`, { auth: as(admin) })).status).toBe(422);
    const active = (await list()).length;
    const done = await t.call("POST", "/api/queue/cleanup?days=1", { auth: as(admin) });
    expect(done.body).toEqual({ success: true, deleted: 0, days: 1 });
    expect((await list()).length).toBe(active);
    expect((await t.call("POST", "/api/queue/cleanup", { auth: as(admin) })).body.days).toBe(30);
  });
});
