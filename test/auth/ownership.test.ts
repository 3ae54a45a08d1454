// Ownership over real HTTP (issue 12): environments belong to their creator, the active
// environment is per user, --trainer_command is admin-only, and a job runs the configuration
// snapshotted at submit, whatever happens to its environment afterwards.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUserWithKey, setUpAdmin, startTestStack, type Credentials, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: Credentials & { cookie: string };
let alice: Credentials;
let bob: Credentials;
let lead: Credentials;
let viewer: Credentials;

const create = (name: string, auth: Credentials, config?: Record<string, unknown>) =>
  t.call("POST", "/api/configs/environments", { json: { name, model_family: "flux", model_type: "lora" }, auth }).then(async (r) => {
    expect(r.status).toBe(201);
    if (config) expect((await t.call("PUT", `/api/configs/${name}`, { json: { config }, auth })).status).toBe(200);
  });
const get = (name: string, auth: Credentials) => t.call("GET", `/api/configs/${name}`, { auth });
const activeOf = async (auth: Credentials) =>
  ((await t.call("GET", "/api/configs/", { auth })).body.environments as { name: string; active: boolean }[])
    .filter((e) => e.active)
    .map((e) => e.name);
// The stored jobs by id: a Scheduler pass may fill in an entry's expected start between two readings.
const jobs = async () =>
  (
    (await t.call("GET", "/api/queue?include_completed=true&limit=1000", { auth: { key: admin.key } })).body.jobs as { job_id: string }[]
  ).map((j) => j.job_id);

const NOT_OWNER = (name: string) => ({
  code: "not_owner",
  detail: `Environment "${name}" belongs to another user: only its owner, a lead or an admin may change, activate or delete it`,
});

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  alice = { key: (await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "alice")).key };
  bob = { key: (await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "bob")).key };
  lead = { key: (await createUserWithKey(t, { cookie: admin.cookie }, "lead", "lena")).key };
  viewer = { key: (await createUserWithKey(t, { cookie: admin.cookie }, "viewer", "vic")).key };
});
afterAll(async () => {
  await t?.stop();
});

describe("another researcher's environment", () => {
  it("cannot be edited, renamed, activated, regenerated or deleted: 403 not_owner, and it is unchanged", async () => {
    await create("alice-env", alice, { "--model_family": "flux", "--model_type": "lora", "--learning_rate": 0.0001 });
    expect((await t.call("POST", "/api/configs/alice-env/activate", { auth: alice })).status).toBe(200);
    const before = (await get("alice-env", alice)).body;
    expect(before).toMatchObject({ owner: "alice", active: true });

    const attempts = [
      await t.call("PUT", "/api/configs/alice-env", { json: { config: { "--model_family": "flux", "--learning_rate": 0.9 } }, auth: bob }),
      await t.call("PUT", "/api/configs/alice-env", { json: { name: "bobs-now" }, auth: bob }),
      await t.call("PUT", "/api/configs/alice-env", { json: { description: "mine" }, auth: bob }),
      await t.call("POST", "/api/configs/alice-env/activate", { auth: bob }),
      await t.call("POST", "/api/configs/alice-env/dataloader", { auth: bob }),
      await t.call("DELETE", "/api/configs/alice-env", { auth: bob }),
    ];
    for (const reply of attempts) {
      expect(reply.status).toBe(403);
      expect(reply.body).toEqual(NOT_OWNER("alice-env"));
    }
    expect((await get("alice-env", alice)).body).toEqual(before);
    expect((await get("bobs-now", alice)).status).toBe(404);
    expect(await activeOf(bob)).toEqual([]);
    expect(await activeOf(alice)).toEqual(["alice-env"]);
  });

  it("is refused to a viewer by level before ownership is considered", async () => {
    const reply = await t.call("DELETE", "/api/configs/alice-env", { auth: viewer });
    expect(reply.status).toBe(403);
    expect(reply.body.code).toBe("forbidden");
    expect((await get("alice-env", viewer)).status).toBe(200);
  });

  it("cannot be squatted by creating another user's inline-run name", async () => {
    const aliceId = (await t.call("GET", "/api/users/me", { auth: alice })).body.id;
    const reply = await t.call("POST", "/api/configs/environments", { json: { name: `inline-run-${aliceId}` }, auth: bob });
    expect(reply.status).toBe(422);
    expect(reply.body.code).toBe("reserved_name");
    expect((await get(`inline-run-${aliceId}`, alice)).status).toBe(404);
  });
});

describe("the owner, leads and admins", () => {
  it("let the owner edit and delete, a lead edit and activate, and an admin delete any", async () => {
    await create("owned", alice);
    const edited = await t.call("PUT", "/api/configs/owned", { json: { description: "by alice" }, auth: alice });
    expect(edited.status).toBe(200);
    expect(edited.body).toMatchObject({ description: "by alice", owner: "alice" });

    const byLead = await t.call("PUT", "/api/configs/owned", { json: { tags: ["reviewed"] }, auth: lead });
    expect(byLead.status).toBe(200);
    expect(byLead.body).toMatchObject({ tags: ["reviewed"], owner: "alice" });
    expect((await t.call("POST", "/api/configs/owned/activate", { auth: lead })).status).toBe(200);
    expect(await activeOf(lead)).toEqual(["owned"]);
    expect(await activeOf(alice)).toEqual(["alice-env"]); // the lead's choice is the lead's own

    const deleted = await t.call("DELETE", "/api/configs/owned", { auth: { key: admin.key } });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ success: true, deleted: "owned" });
    expect((await get("owned", alice)).status).toBe(404);
    expect(await activeOf(lead)).toEqual([]);
    expect((await t.call("DELETE", "/api/configs/owned", { auth: alice })).status).toBe(404);

    await create("short-lived", alice);
    expect((await t.call("DELETE", "/api/configs/short-lived", { auth: alice })).status).toBe(200);
    expect((await get("short-lived", alice)).status).toBe(404);
  });
});

describe("--trainer_command", () => {
  it("is refused from a researcher's PUT with 422 naming it, and nothing is saved", async () => {
    const before = (await get("alice-env", alice)).body;
    const reply = await t.call("PUT", "/api/configs/alice-env", {
      json: { description: "sneaky", config: { "--model_family": "flux", "--trainer_command": "cat /data/service.db" } },
      auth: alice,
    });
    expect(reply.status).toBe(422);
    expect(reply.body).toMatchObject({
      code: "admin_only_option",
      errors: [{ path: "body.config.--trainer_command", message: "admin only" }],
    });
    expect(reply.body.detail).toContain("--trainer_command may be set only by an admin");
    expect((await get("alice-env", alice)).body).toEqual(before);
  });

  it("is refused from a lead too, while --trainer <name> stays open to researchers", async () => {
    const byLead = await t.call("PUT", "/api/configs/alice-env", { json: { config: { "--trainer_command": "true" } }, auth: lead });
    expect(byLead.status).toBe(422);
    const named = await t.call("PUT", "/api/configs/alice-env", {
      json: { config: { "--model_family": "flux", "--model_type": "lora", "--trainer": "demo" } },
      auth: alice,
    });
    expect(named.status).toBe(200);
    expect(named.body.config["--trainer"]).toBe("demo");
  });

  it("is accepted from an admin; a researcher's submit of that environment is 422 and stores no job, an admin's goes through", async () => {
    await create("admin-raw", { key: admin.key }, { "--num_processes": 0, "--max_train_steps": 5, "--trainer_command": "python train.py" });
    expect((await get("admin-raw", alice)).body.config["--trainer_command"]).toBe("python train.py");
    const before = await jobs();
    const refused = await t.call("POST", "/api/queue/submit", { json: { config_name: "admin-raw" }, auth: alice });
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({
      code: "admin_only_option",
      errors: [{ path: "environment.config.--trainer_command", message: "admin only" }],
    });
    expect(refused.body.detail).toContain("--trainer_command");
    expect(await jobs()).toEqual(before);

    const accepted = await t.call("POST", "/api/queue/submit", { json: { config_name: "admin-raw" }, auth: { key: admin.key } });
    expect(accepted.status).toBe(200);
    expect(accepted.body.success).toBe(true);
    expect((await jobs()).length).toBe(before.length + 1);
    await t.call("POST", `/api/queue/${accepted.body.job_id}/cancel`, { auth: { key: admin.key } });
  });

  it("is a problem on the training forms for a researcher: validate names it, start refuses with 422 and saves nothing", async () => {
    const form = { "--max_train_steps": "5", "--trainer_command": "sh -c id" };
    const validated = await t.call("POST", "/api/training/validate", { json: form, auth: alice });
    expect(validated.status).toBe(200);
    expect(validated.body.valid).toBe(false);
    expect(validated.body.errors).toContainEqual({ field: "--trainer_command", message: "may be set only by an admin" });

    const before = { env: (await get("alice-env", alice)).body, jobs: await jobs() };
    const started = await t.call("POST", "/api/training/start", { json: form, auth: alice });
    expect(started.status).toBe(422);
    expect(started.body.errors).toContainEqual({ path: "form.--trainer_command", message: "may be set only by an admin" });
    expect((await get("alice-env", alice)).body).toEqual(before.env);
    expect(await jobs()).toEqual(before.jobs);
  });
});

describe("a submitted job", () => {
  const GPU = [{ index: 0, uuid: "GPU-0", name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }];
  let box: Credentials;
  beforeAll(async () => {
    const created = await t.call("POST", "/api/admin/workers", { json: { name: "box" }, auth: { key: admin.key } });
    box = { bearer: created.body.token };
    expect(
      (await t.call("POST", "/api/workers/register", { json: { role: "local", gpus: GPU, hostname: "box-1" }, auth: box })).status,
    ).toBe(200);
  });

  it("runs the configuration snapshotted at submit, not the environment as edited or deleted while it waited", async () => {
    const original = {
      "--model_family": "flux",
      "--num_processes": 1,
      "--max_train_steps": 10,
      "--learning_rate": 0.001,
      "--trainer": "demo",
    };
    await create("snap", alice, original);
    expect(
      (await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 0 }, auth: { key: admin.key } })).status,
    ).toBe(200);
    const queued = await t.call("POST", "/api/queue/submit", { json: { config_name: "snap", target: "local" }, auth: alice });
    expect(queued.body).toMatchObject({ success: true, status: "queued", wait_reason: "local_job_limit" });
    const jobId = queued.body.job_id as string;

    const edited = {
      "--model_family": "flux",
      "--num_processes": 1,
      "--max_train_steps": 99999,
      "--learning_rate": 0.5,
      "--trainer": "demo",
      "--output_dir": "elsewhere",
    };
    expect((await t.call("PUT", "/api/configs/snap", { json: { config: edited }, auth: alice })).status).toBe(200);
    expect((await t.call("POST", "/api/configs/snap/dataloader", { auth: alice })).status).toBe(200);

    expect(
      (await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 1 }, auth: { key: admin.key } })).status,
    ).toBe(200);
    const assignment = async () =>
      ((await t.call("POST", "/api/workers/heartbeat", { json: {}, auth: box })).body.assignments as any[]).find((a) => a.job_id === jobId);
    const given = await assignment();
    expect(given).toMatchObject({ job_id: jobId, config_name: "snap", config: original, num_processes: 1 });
    expect(given.dataloader.map((d: { id: string }) => d.id)).toEqual(["snap-images", "snap-text-embeds"]);

    const shown = await t.call("GET", `/api/training/config?job_id=${jobId}`, { auth: alice });
    expect(shown.status).toBe(200);
    expect(shown.body).toEqual({ job_id: jobId, config_name: "snap", config: original, dataloader: given.dataloader });

    // Gone altogether: the runner still gets the snapshot.
    expect((await t.call("DELETE", "/api/configs/snap", { auth: alice })).status).toBe(200);
    expect((await assignment()).config).toEqual(original);
    expect((await t.call("GET", `/api/training/config?job_id=${jobId}`, { auth: alice })).body.config).toEqual(original);
  });

  it("started from the form in quick succession, each carries the options saved for it", async () => {
    await create("forms-env", alice, {
      "--model_family": "flux",
      "--model_type": "lora",
      "--num_processes": 0,
      "--trainer": "demo",
      "--max_train_steps": 3,
    });
    expect((await t.call("POST", "/api/configs/forms-env/activate", { auth: alice })).status).toBe(200);
    // A form is the whole configuration (it replaces the environment's options).
    const form = {
      "--model_family": "flux",
      "--model_type": "lora",
      "--pretrained_model_name_or_path": "none",
      "--output_dir": "output",
      "--data_backend_config": "d.json",
      "--num_processes": "0",
      "--trainer": "demo",
    };
    const first = await t.call("POST", "/api/training/start", { json: { ...form, "--max_train_steps": "5" }, auth: alice });
    const second = await t.call("POST", "/api/training/start", { json: { ...form, "--max_train_steps": "7" }, auth: alice });
    expect([first.status, second.status]).toEqual([200, 200]);
    const steps = async (id: string) =>
      (await t.call("GET", `/api/training/config?job_id=${id}`, { auth: alice })).body.config["--max_train_steps"];
    expect([await steps(first.body.job_id), await steps(second.body.job_id)]).toEqual([5, 7]);
  });
});
