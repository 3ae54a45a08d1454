// What the `jobs` CLI reads from the queue API, over real HTTP: one job by id, a dry-run
// submission that answers what would happen and stores nothing, and the list filtered by user.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PUBLIC_QUEUE_FIELDS, QueueEntry } from "../../shared/schemas/queue";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let lead: { key: string };
let researcher: { key: string };
let other: { key: string };
let viewer: { key: string };
let boxToken: string;

const as = (who: { key: string }) => ({ key: who.key });
const gpus = (n: number) =>
  Array.from({ length: n }, (_, index) => ({ index, uuid: `GPU-${index}`, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }));
/** A full entry as GET /api/queue lists it; GET /api/queue/jobs/{job_id} adds its lineage (the chain of retries). */
const FULL_KEYS = Object.keys(QueueEntry.shape)
  .filter((key) => key !== "lineage")
  .sort();
const LOOKUP_KEYS = [...FULL_KEYS, "lineage"].sort();
/** A looked-up job without the lineage it adds to the listed entry. */
const withoutLineage = ({ lineage: _, ...entry }: Record<string, unknown>) => entry;
const PUBLIC_KEYS = [...PUBLIC_QUEUE_FIELDS].sort();

async function env(name: string, config: Record<string, unknown>) {
  expect(
    (await t.call("POST", "/api/configs/environments", { json: { name, model_family: "flux", model_type: "lora" }, auth: as(admin) }))
      .status,
  ).toBe(201);
  expect(
    (await t.call("PUT", `/api/configs/${name}`, { json: { config: { "--model_family": "flux", ...config } }, auth: as(admin) })).status,
  ).toBe(200);
}
const submit = (who: { key: string }, body: Record<string, unknown>) => t.call("POST", "/api/queue/submit", { json: body, auth: as(who) });
const lookup = (who: { key: string } | null, jobId: string) =>
  t.call("GET", `/api/queue/jobs/${encodeURIComponent(jobId)}`, who ? { auth: as(who) } : {});
const newestAudit = async () =>
  (await t.call("GET", "/api/audit?limit=1", { auth: as(admin) })).body.entries[0] as { id: number; event_type: string };
/** Waits for an admin change's audit entry (written after its answer), so a later snapshot sees a settled audit log. */
const audited = (eventType: string) => until(`a ${eventType} audit entry`, async () => (await newestAudit()).event_type === eventType);
const register = (count: number) =>
  t.call("POST", "/api/workers/register", { json: { role: "local", gpus: gpus(count) }, auth: { bearer: boxToken } });

/** Everything a submission could store or change: the queue, the submitter's summary, the local GPUs, the audit log. */
async function snapshot() {
  const queue = await t.call("GET", "/api/queue?include_completed=true&limit=1000", { auth: as(admin) });
  const me = await t.call("GET", "/api/queue/me", { auth: as(researcher) });
  const stats = await t.call("GET", "/api/queue/stats", { auth: as(admin) });
  return {
    total: queue.body.total,
    jobs: queue.body.jobs.map((j: any) => [j.job_id, j.status, j.position, j.wait_reason, j.allocated_gpus, j.approval_id]),
    me: [me.body.pending_count, me.body.running_count, me.body.blocked_count, me.body.best_position],
    gpus: stats.body.local,
    audit: (await newestAudit()).id,
  };
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
  await env("broken", { "--accelerate_visible_devices": "lots" });
  const created = await t.call("POST", "/api/admin/workers", { json: { name: "box" }, auth: as(admin) });
  expect(created.status).toBe(201);
  boxToken = created.body.token;
  expect((await register(2)).status).toBe(200);
  expect((await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 20 }, auth: as(admin) })).status).toBe(200);
  await audited("limits_changed");
});
afterAll(async () => {
  await t?.stop();
});

describe("POST /api/queue/submit with dry_run", () => {
  let waiting: string;

  it("answers running with the exact GPUs it would take, storing nothing and taking no GPU", async () => {
    const before = await snapshot();
    const dry = await submit(researcher, { config_name: "two-gpu", target: "local", dry_run: true });
    expect(dry.status).toBe(200);
    expect(dry.body).toEqual({
      success: true,
      dry_run: true,
      job_id: null,
      status: "running",
      allocated_gpus: [0, 1],
      worker_id: null,
      queue_position: null,
      wait_reason: null,
      message: "would run on GPUs [0, 1]",
    });
    expect(await snapshot()).toEqual(before);
    // The GPUs the dry run named are still free: a real submission gets them.
    const real = await submit(researcher, { config_name: "two-gpu", target: "local" });
    expect(real.body).toMatchObject({ dry_run: false, status: "running", allocated_gpus: [0, 1] });
  });

  it("answers queued with the position and reason while GPUs are busy, leaving a waiting job where it was", async () => {
    const pending = await submit(other, { config_name: "one-gpu", target: "local" });
    expect(pending.body).toMatchObject({ status: "queued", queue_position: 1, wait_reason: "gpus_busy" });
    waiting = pending.body.job_id;
    const before = await snapshot();
    const dry = await submit(researcher, { config_name: "one-gpu", target: "local", dry_run: true });
    expect(dry.body).toEqual({
      success: true,
      dry_run: true,
      job_id: null,
      status: "queued",
      allocated_gpus: null,
      worker_id: null,
      queue_position: 2,
      wait_reason: "gpus_busy",
      message: "would queue at position 2: needs 1 GPU(s) of [0, 1]; free now: []",
      // The job on both GPUs has no --max_runtime_minutes and no progress: no end to expect.
      expected_start_at: null,
      expected_start_basis: expect.stringMatching(/^unknown: local-[0-9a-f]{12} runs with no expected end$/),
      expected_run_seconds: null,
      expected_run_basis: "unknown: no --max_runtime_minutes, and no completed run of its environment on as many GPUs in the last 30 days",
    });
    // An admin's job would go first (higher priority), yet the waiting job keeps its place.
    const ahead = await submit(admin, { config_name: "one-gpu", target: "local", dry_run: true });
    expect(ahead.body).toMatchObject({ dry_run: true, job_id: null, status: "queued", queue_position: 1, wait_reason: "gpus_busy" });
    expect(await snapshot()).toEqual(before);
    expect((await lookup(other, waiting)).body).toMatchObject({ status: "pending", position: 1, wait_reason: "gpus_busy" });
  });

  it("answers rejected for no_wait when nothing is free, storing nothing", async () => {
    const before = await snapshot();
    const dry = await submit(researcher, { config_name: "one-gpu", target: "local", no_wait: true, dry_run: true });
    expect(dry.body).toEqual({
      success: false,
      dry_run: true,
      job_id: null,
      status: "rejected",
      allocated_gpus: null,
      worker_id: null,
      queue_position: null,
      wait_reason: "gpus_busy",
      message: "would be rejected (no_wait): needs 1 GPU(s) of [0, 1]; free now: []",
    });
    expect(await snapshot()).toEqual(before);
  });

  it("answers blocked when an approval rule would catch it, storing no job and no approval request", async () => {
    expect((await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 0 }, auth: as(admin) })).status).toBe(200);
    await audited("approval_rules_changed");
    const before = await snapshot();
    const dry = await submit(researcher, { config_name: "one-gpu", target: "local", dry_run: true });
    expect(dry.body).toEqual({
      success: true,
      dry_run: true,
      job_id: null,
      status: "blocked",
      allocated_gpus: null,
      worker_id: null,
      queue_position: null,
      wait_reason: "awaiting_approval",
      message: "would wait for an admin's approval: asks for 1 GPUs; more than 0 needs approval",
      expected_start_at: null,
      expected_start_basis: "unknown: waits for an admin's approval",
    });
    expect(await snapshot()).toEqual(before);
    expect((await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: null }, auth: as(admin) })).status).toBe(200);
    await audited("approval_rules_changed");
  });

  it("refuses an unknown environment, bad GPU options and a bad body exactly as a real submission does", async () => {
    const before = await snapshot();
    for (const body of [{ config_name: "nope" }, { config_name: "broken" }, { config_name: "one-gpu", target: "moon" }]) {
      const dry = await submit(researcher, { ...body, dry_run: true });
      const real = await submit(researcher, body);
      expect([dry.status, dry.body]).toEqual([real.status, real.body]);
    }
    expect((await submit(researcher, { config_name: "nope", dry_run: true })).body).toEqual({
      detail: "Environment nope not found",
      code: "not_found",
    });
    expect((await submit(researcher, { config_name: "broken", dry_run: true })).body).toMatchObject({
      code: "invalid_environment",
      detail: '--accelerate_visible_devices must list device indices like "0,1", not "lots"',
    });
    const notBoolean = await submit(researcher, { config_name: "one-gpu", dry_run: "yes" });
    expect(notBoolean.status).toBe(422);
    expect(notBoolean.body.errors.map((e: { path: string }) => e.path)).toEqual(["body.dry_run"]);
    expect(await snapshot()).toEqual(before);
  });

  it("refuses a dry run to a viewer, and POST /api/training/start refuses a dry_run field rather than starting a job", async () => {
    const before = await snapshot();
    expect((await submit(viewer, { config_name: "one-gpu", dry_run: true })).status).toBe(403);
    const start = await t.call("POST", "/api/training/start", {
      json: {
        dry_run: true,
        "--model_family": "flux",
        "--model_type": "lora",
        "--pretrained_model_name_or_path": "black-forest-labs/FLUX.1-dev",
        "--output_dir": "out",
        "--data_backend_config": "[]",
        "--max_train_steps": "5",
      },
      auth: as(researcher),
    });
    expect(start.status).toBe(422);
    expect(start.body.code).toBe("invalid_configuration");
    expect(start.body.errors.map((e: { path: string }) => e.path)).toEqual(["form.dry_run"]);
    expect(await snapshot()).toEqual(before);
  });

  it("left the waiting job's admission alone: it takes the next free GPU", async () => {
    expect((await register(3)).status).toBe(200);
    await t.call("POST", "/api/queue/process", { auth: as(admin) });
    expect((await lookup(other, waiting)).body).toMatchObject({ status: "running", allocated_gpus: [2], position: null });
  });
});

describe("GET /api/queue/jobs/{job_id}", () => {
  let mine: string;
  const listed = async (who: { key: string }, jobId: string) =>
    ((await t.call("GET", "/api/queue?limit=1000", { auth: as(who) })).body.jobs as any[]).find((j) => j.job_id === jobId);
  // The lookup and the listing are two reads, and a Scheduler pass between them (the 5 s timer fills in the
  // expected start) would make them differ for a reason these tests are not about: the listing is taken between
  // two lookups that agree (tried again, at most 5 times, when a pass came between them).
  const lookedUpAndListed = async (who: { key: string }, jobId: string) => {
    for (let tries = 1; ; tries++) {
      const before = await lookup(who, jobId);
      const list = await listed(who, jobId);
      const got = await lookup(who, jobId);
      if (JSON.stringify(before.body) === JSON.stringify(got.body) || tries === 5) return { got, list };
    }
  };

  beforeAll(async () => {
    // Every GPU is busy by now: this one waits, with a live position and reason.
    const submitted = await submit(researcher, { config_name: "two-gpu", target: "local" });
    expect(submitted.body).toMatchObject({ status: "queued", wait_reason: "gpus_busy" });
    mine = submitted.body.job_id;
  });

  it("shows the owner their job in full, as the queue lists it", async () => {
    const { got, list } = await lookedUpAndListed(researcher, mine);
    expect(got.status).toBe(200);
    expect(Object.keys(got.body).sort()).toEqual(LOOKUP_KEYS);
    expect(got.body).toMatchObject({ job_id: mine, owner: "researcher-user", status: "pending", position: 1, wait_reason: "gpus_busy" });
    expect(got.body.lineage).toEqual({ id: mine, jobs: [mine], gpu_hours: 0, cost: 0 });
    expect(withoutLineage(got.body)).toEqual(list);
  });

  it("shows another researcher and a viewer only the public fields", async () => {
    for (const who of [other, viewer]) {
      const { got, list } = await lookedUpAndListed(who, mine);
      expect(got.status).toBe(200);
      expect(Object.keys(got.body).sort()).toEqual(PUBLIC_KEYS);
      expect(got.body).toEqual(list);
    }
  });

  it("shows leads and admins any job in full", async () => {
    for (const who of [lead, admin]) {
      const { got, list } = await lookedUpAndListed(who, mine);
      expect(Object.keys(got.body).sort()).toEqual(LOOKUP_KEYS);
      expect(withoutLineage(got.body)).toEqual(list);
    }
  });

  it("answers 404 naming an unknown id, 422 for an id too long, 401 without a credential", async () => {
    expect(await lookup(researcher, "local-000000000000").then((r) => [r.status, r.body])).toEqual([
      404,
      { detail: "Job local-000000000000 not found", code: "not_found" },
    ]);
    const long = await lookup(researcher, "x".repeat(300));
    expect(long.status).toBe(422);
    expect(long.body.code).toBe("invalid_request");
    expect((await lookup(null, mine)).status).toBe(401);
  });
});

describe("GET /api/queue?user=", () => {
  const page = (who: { key: string }, query: string) => t.call("GET", `/api/queue?${query}`, { auth: as(who) });

  /** Every page of a walk, one entry at a time. */
  async function walk(who: { key: string }, query: string) {
    const pages: any[] = [];
    let reply = await page(who, `limit=1&${query}`);
    for (;;) {
      expect(reply.status).toBe(200);
      pages.push(reply.body);
      if (reply.body.next_cursor === null) return pages;
      // The cursor alone carries the filter.
      reply = await page(who, `limit=1&cursor=${reply.body.next_cursor}`);
    }
  }

  it("lists only that user's entries on every page, with total counting them", async () => {
    const everything = (await page(admin, "limit=1000")).body.jobs as any[];
    const theirs = everything.filter((j) => j.owner === "researcher-user").map((j) => j.job_id);
    expect(theirs.length).toBeGreaterThan(1);
    expect(everything.length).toBeGreaterThan(theirs.length);
    const pages = await walk(viewer, "user=researcher-user");
    expect(pages).toHaveLength(theirs.length);
    for (const p of pages) {
      expect(p.total).toBe(theirs.length);
      expect(p.jobs).toHaveLength(1);
      expect(p.jobs[0].owner).toBe("researcher-user");
      // A viewer still sees another user's entries with only the public fields.
      expect(Object.keys(p.jobs[0]).sort()).toEqual(PUBLIC_KEYS);
    }
    expect(pages.map((p) => p.jobs[0].job_id)).toEqual(theirs);
    const own = await walk(researcher, "user=researcher-user&status=pending");
    expect(own.map((p) => p.jobs[0].status)).toEqual(Array(own.length).fill("pending"));
    expect(Object.keys(own[0].jobs[0]).sort()).toEqual(FULL_KEYS);
  });

  it("accepts the same user with a cursor and refuses a different one, or one added mid-walk", async () => {
    const first = await page(admin, "limit=1&user=researcher-user");
    const cursor = first.body.next_cursor as string;
    expect((await page(admin, `limit=1&user=researcher-user&cursor=${cursor}`)).body.jobs[0].owner).toBe("researcher-user");
    const changed = await page(admin, `limit=1&user=other-researcher&cursor=${cursor}`);
    expect(changed.status).toBe(422);
    expect(changed.body).toEqual({
      code: "invalid_cursor",
      detail:
        "cursor continues a walk with user=researcher-user, but this request asks for user=other-researcher: send the same user as the first page, or leave cursor out to start a new walk",
    });
    const unfiltered = (await page(admin, "limit=1")).body.next_cursor as string;
    expect((await page(admin, `limit=1&user=researcher-user&cursor=${unfiltered}`)).body.code).toBe("invalid_cursor");
  });

  it("answers 404 no_such_user for a name nobody has, however it is written", async () => {
    for (const name of ["ghost", "researcher-user' OR '1'='1"]) {
      const reply = await page(viewer, `user=${encodeURIComponent(name)}`);
      expect([reply.status, reply.body]).toEqual([404, { code: "no_such_user", detail: `No user named ${name}` }]);
    }
    expect((await page(viewer, "user=")).status).toBe(422);
  });
});
