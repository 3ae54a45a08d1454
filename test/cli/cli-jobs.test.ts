// `jobs submit`, `jobs list`, `jobs status` and `jobs cancel`: the built binary run as a subprocess
// (no terminal) against the real local stack, with a registered local box of 4 GPUs that no runner
// serves (its jobs stay running until cancelled) and a fake Replicate for cloud submissions. Each
// outcome is read back over HTTP.
import { fakeReplicateSettings } from "../helpers/fake-provider";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeReplicate, type FakeReplicate } from "../fakes/fake-replicate";
import { jobs, type JobsRun } from "../helpers/cli";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

const TOKEN = "r8_clijobstesttoken0123456789abcd";
const PNG = Buffer.from(
  "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5e2b3b40000000049454e44ae426082",
  "hex",
);
const ESC = "\u001b";

let t: TestStack;
let fake: FakeReplicate;
let admin: { key: string; cookie: string };
let alice: { key: string; id: number };
let bob: { key: string; id: number };

/** `jobs` as a user, with the connection in SERVICE_URL / SERVICE_API_KEY. */
const as = (who: { key: string }, args: string[], env: NodeJS.ProcessEnv = {}) =>
  jobs(args, { env: { SERVICE_URL: t.base, SERVICE_API_KEY: who.key, ...env } });
const http = async (method: string, path: string, who: { key: string }, json?: unknown) => {
  const reply = await t.call(method, path, { auth: { key: who.key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
};
const entries = async (query = "") => (await http("GET", `/api/queue?limit=1000${query}`, admin)).jobs as any[];
const entry = async (id: string) => (await entries("&include_completed=true")).find((e) => e.job_id === id);
const submitHttp = async (who: { key: string }, body: Record<string, unknown>) =>
  (await http("POST", "/api/queue/submit", who, { target: "local", ...body })).job_id as string;
const limits = (body: Record<string, unknown>) => http("POST", "/api/queue/concurrency", admin, body);
const gpuRule = (threshold: number | null) => http("PUT", "/api/queue/approval-rules", admin, { local_gpu_threshold: threshold });
/** stdout's lines, without the trailing newline. */
const lines = (run: JobsRun) => run.stdout.split("\n").filter((line) => line !== "");
/** A table row's cells (columns are separated by two or more spaces). */
const cells = (line: string) => line.split(/ {2,}/);

/** Ends every active job (running ones too) and lets local jobs start again: each test group starts from an empty queue. */
async function clearQueue() {
  for (const job of await entries()) await http("POST", "/api/training/cancel", admin, { job_id: job.job_id });
  await http("POST", "/api/queue/process", admin);
}

async function environment(name: string, owner: { key: string }, config: Record<string, unknown>) {
  await http("POST", "/api/configs/environments", owner, { name, model_family: "flux", model_type: "lora" });
  await http("PUT", `/api/configs/${name}`, owner, { config: { "--model_family": "flux", ...config } });
}

beforeAll(async () => {
  fake = await startFakeReplicate({ token: TOKEN, run: { outcome: "manual" } });
  t = await startTestStack(undefined, { REPLICATE_API_TOKEN: TOKEN });
  admin = await setUpAdmin(t);
  alice = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "alice");
  bob = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "bob");
  await environment("cpu", admin, { "--num_processes": 0 });
  await environment("one-gpu", admin, { "--num_processes": 1 });
  await environment("two-gpu", admin, { "--num_processes": 2 });
  // A local box that nobody serves: its jobs stay running, and it never times out during the file.
  const box = await http("POST", "/api/admin/workers", admin, { name: "box" });
  const gpus = [0, 1, 2, 3].map((index) => ({ index, uuid: `GPU-${index}`, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }));
  const registered = await t.call("POST", "/api/workers/register", {
    json: { role: "local", gpus, hostname: "box-1", host_stats: { load_avg_5min: 0.1, memory_percent: 5 } },
    auth: { bearer: box.token },
  });
  expect(registered.status).toBe(200);
  await limits({ worker_heartbeat_timeout_seconds: 86_400, local_job_max_concurrent: 8, user_max_concurrent: 10 });
  // Cloud: Replicate (the fake) with the built-in storage endpoint; consent stays "ask".
  await http("PUT", "/api/cloud/providers/replicate", admin, fakeReplicateSettings(fake));
  await http("PUT", "/api/cloud/settings", admin, { public_url: t.base, poll_interval_seconds: 1 });
  await http("POST", "/api/configs/environments", alice, { name: "faces", model_family: "flux", model_type: "lora" });
  const form = new FormData();
  form.set("target_path", "faces");
  for (const [bytes, name] of [
    [PNG, "001.png"],
    ["a face", "001.txt"],
    ["SECRET=1", ".env.txt"],
  ] as const)
    form.append("files[]", new Blob([typeof bytes === "string" ? bytes : new Uint8Array(bytes)]), name);
  const uploaded = await t.call("POST", "/api/datasets/upload", { body: form, auth: { key: alice.key } });
  expect(uploaded.status, uploaded.text).toBe(201);
}, 60_000);
afterAll(async () => {
  await Promise.all([t?.stop(), fake?.stop()]);
});

describe("connection, errors and output conventions", () => {
  it("prints an empty queue as 'No jobs.' on stderr, and [] as JSON", async () => {
    const table = await as(alice, ["list"]);
    expect([table.code, table.stdout, table.stderr]).toEqual([0, "", "No jobs.\n"]);
    const json = await as(alice, ["list", "--format", "json"]);
    expect([json.code, json.json(), json.stderr]).toEqual([0, [], ""]);
  });

  it("takes the URL and key from --url and --api-key as well as from the environment", async () => {
    const run = await jobs(["--url", t.base, "--api-key", alice.key, "list", "--format", "json"]);
    expect([run.code, run.json()]).toEqual([0, []]);
    const after = await jobs(["list", "--url", t.base, "--api-key", alice.key, "--format", "json"]);
    expect([after.code, after.json()]).toEqual([0, []]);
  });

  it("exits 2 with the hint when no URL is configured, calling nothing", async () => {
    const run = await jobs(["list"], { env: { SERVICE_API_KEY: alice.key } });
    expect([run.code, run.stdout, run.stderr]).toEqual([
      2,
      "",
      "error: no service URL: pass --url, set SERVICE_URL, or run `jobs login`\n",
    ]);
  });

  it("exits 1 with the service's detail for a wrong API key, as JSON on stderr with --format json", async () => {
    const refused = await t.call("GET", "/api/queue", { auth: { key: "st_wrongwrongwrongwrong" } });
    expect(refused.status).toBe(401);
    const run = await as({ key: "st_wrongwrongwrongwrong" }, ["list"]);
    expect([run.code, run.stdout, run.stderr]).toEqual([1, "", `error: ${refused.body.detail}\n`]);
    const json = await as({ key: "st_wrongwrongwrongwrong" }, ["list", "--format", "json"]);
    expect([json.code, json.stdout]).toEqual([1, ""]);
    expect(JSON.parse(json.stderr)).toEqual({ error: { status: 401, code: refused.body.code, detail: refused.body.detail } });
  });

  it("reports usage errors as JSON on stderr with --format json (exit 2)", async () => {
    const run = await as(alice, ["list", "-o", "job_id,nope", "--format", "json"]);
    expect([run.code, run.stdout]).toEqual([2, ""]);
    const error = JSON.parse(run.stderr).error;
    expect(error.code).toBe("usage");
    expect(error.detail).toMatch(/^unknown field "nope" in -o; valid fields: id, job_id, user_id, owner, /);
  });

  it("writes no escape codes without a terminal, with or without NO_COLOR", async () => {
    const id = await submitHttp(alice, { config_name: "cpu" });
    for (const env of [{}, { NO_COLOR: "1" }, { TERM: "xterm-256color", FORCE_COLOR: "1" }]) {
      for (const args of [["list"], ["status"], ["cancel", "local-000000000000"], ["list", "--status", "nope"]]) {
        const run = await as(alice, args, env);
        expect(run.stdout + run.stderr, `${args.join(" ")} ${JSON.stringify(env)}`).not.toContain(ESC);
      }
    }
    await http("POST", "/api/training/cancel", alice, { job_id: id });
  });

  it("has --help with a description and an example on each command", async () => {
    for (const command of ["submit", "list", "status", "cancel"]) {
      const run = await jobs([command, "--help"]);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain(`Usage: jobs ${command}`);
      expect(run.stdout).toContain(`Examples:\n  $ jobs ${command}`);
    }
  });
});

describe("jobs submit (local and workers)", () => {
  beforeAll(clearQueue);

  it("starts a job at once and prints its id and GPUs", async () => {
    const run = await as(alice, ["submit", "one-gpu", "--target", "local"]);
    expect(run.code, run.stderr).toBe(0);
    const [id, ...rest] = run.stdout.split(" ");
    expect(rest.join(" ")).toBe("running on GPUs [0]\n");
    expect(await entry(id!)).toMatchObject({ status: "running", owner: "alice", allocated_gpus: [0], config_name: "one-gpu" });
  });

  it("queues a job, saying its position and why it waits; --format json prints the service's answer", async () => {
    await limits({ local_job_max_concurrent: 1 });
    const run = await as(alice, ["submit", "cpu", "--target", "local"]);
    expect(run.code, run.stderr).toBe(0);
    const id = run.stdout.split(" ")[0]!;
    expect(run.stdout).toBe(`${id} queued at position 1 (local_job_limit: 1 of 1 local jobs are running (local_job_max_concurrent))\n`);
    expect(await entry(id)).toMatchObject({ status: "pending", position: 1, wait_reason: "local_job_limit" });

    const json = await as(alice, ["submit", "cpu", "--target", "local", "--format", "json"]);
    expect(json.code).toBe(0);
    expect(json.json()).toEqual({
      success: true,
      dry_run: false,
      job_id: expect.stringMatching(/^local-/),
      status: "queued",
      allocated_gpus: null,
      worker_id: null,
      queue_position: 2,
      wait_reason: "local_job_limit",
      message: "queued: 1 of 1 local jobs are running (local_job_max_concurrent)",
    });
  });

  it("exits 1 with the reason on stderr when --no-wait is rejected, storing nothing", async () => {
    const before = (await entries("&include_completed=true")).length;
    const run = await as(alice, ["submit", "cpu", "--target", "local", "--no-wait"]);
    expect([run.code, run.stdout]).toEqual([1, ""]);
    expect(run.stderr).toBe("error: rejected (no_wait): 1 of 1 local jobs are running (local_job_max_concurrent)\n");
    const json = await as(alice, ["submit", "cpu", "--target", "local", "--no-wait", "--format", "json"]);
    expect(json.code).toBe(1);
    expect(json.json()).toMatchObject({ success: false, status: "rejected", job_id: null });
    expect(JSON.parse(json.stderr).error.detail).toContain("rejected (no_wait)");
    expect((await entries("&include_completed=true")).length).toBe(before);
    await limits({ local_job_max_concurrent: 8 });
  });

  it("says a job waits for approval when a rule blocks it", async () => {
    await gpuRule(1);
    try {
      const run = await as(alice, ["submit", "two-gpu", "--target", "local"]);
      expect(run.code, run.stderr).toBe(0);
      const id = run.stdout.split(" ")[0]!;
      expect(run.stdout).toBe(`${id} blocked: awaiting an admin's approval: asks for 2 GPUs; more than 1 needs approval\n`);
      expect(await entry(id)).toMatchObject({ status: "blocked", wait_reason: "awaiting_approval" });
    } finally {
      await gpuRule(null);
    }
  });

  it("stores --label as worker labels and --meta as string metadata on the job", async () => {
    const run = await as(alice, [
      "submit",
      "cpu",
      "--target",
      "worker",
      "--label",
      "gpu=a100*",
      "--label",
      "zone=eu=west",
      "--meta",
      "run_name=sweep-1",
      "--meta",
      "lr=0.0001",
      "--any-gpu",
    ]);
    expect(run.code, run.stderr).toBe(0);
    const id = run.stdout.split(" ")[0]!;
    expect(run.stdout).toMatch(new RegExp(`^${id} queued at position \\d+ \\(no_matching_worker: `));
    expect(await entry(id)).toMatchObject({
      target: "worker",
      any_gpu: true,
      worker_labels: { gpu: "a100*", zone: "eu=west" },
      metadata: { run_name: "sweep-1", lr: "0.0001" },
    });
  });

  it("refuses a bad --label, --meta or --target as usage errors (exit 2), storing nothing", async () => {
    const before = (await entries("&include_completed=true")).length;
    for (const args of [
      ["--label", "gpu"],
      ["--label", "=a100"],
      ["--meta", "run_name"],
      ["--target", "moon"],
      ["--cloud", "replicate", "--label", "gpu=a100"],
      ["--cloud", "replicate", "--target", "local"],
    ]) {
      const run = await as(alice, ["submit", "cpu", ...args]);
      expect([run.code, run.stdout], args.join(" ")).toEqual([2, ""]);
      expect(run.stderr).toMatch(/^error: /);
    }
    const missing = await as(alice, ["submit"]);
    expect([missing.code, missing.stderr]).toEqual([2, "error: missing required argument 'config'\n(add --help for usage)\n"]);
    expect((await entries("&include_completed=true")).length).toBe(before);
  });

  it("exits 1 with the service's detail for an unknown environment", async () => {
    const refused = await t.call("POST", "/api/queue/submit", { json: { config_name: "nope" }, auth: { key: alice.key } });
    expect(refused.status).toBe(404);
    const run = await as(alice, ["submit", "nope"]);
    expect([run.code, run.stdout, run.stderr]).toEqual([1, "", `error: ${refused.body.detail}\n`]);
  });
});

describe("jobs submit --cloud", () => {
  beforeAll(clearQueue);

  it("--dry-run shows the package summary and the cost estimate, storing and uploading nothing", async () => {
    const requests = fake.requests.length;
    const run = await as(alice, ["submit", "faces", "--cloud", "replicate", "--dry-run"]);
    expect(run.code, run.stderr).toBe(0);
    const out = lines(run);
    expect(out.slice(0, 5)).toEqual([
      `Package:  2 file(s), ${PNG.length + 6} B of datasets, archive ${out[0]!.match(/archive (.+) \(limit/)![1]} (limit 95.4 MiB)`,
      `  datasets/faces: 2 file(s), ${PNG.length + 6} B`,
      "Excluded: 1 file(s), never uploaded",
      `  datasets/faces/.env.txt (${out[3]!.match(/\((.+)\)$/)![1]})`,
      "Estimate: gpu-a100-large at $0.0014/s for 1h: about $5.04",
    ]);
    expect(out[5]).toBe("Spending: no limit set");
    expect(run.stderr).toBe("Dry run: nothing was uploaded or queued.\n");

    const json = await as(alice, ["submit", "faces", "--cloud", "replicate", "--dry-run", "--format", "json"]);
    expect(json.json()).toMatchObject({
      success: true,
      dry_run: true,
      job_id: null,
      status: "dry_run",
      consent_mode: "ask",
      summary: { files: 2, bytes: PNG.length + 6 },
      estimate: { hardware: "gpu-a100-large", estimated_cost_usd: 5.04 },
    });
    expect(fake.requests.length).toBe(requests);
    expect((await entries("&include_completed=true")).filter((e) => e.job_type === "cloud")).toEqual([]);
  });

  it("needs --yes for an upload under consent 'ask' without a terminal: exit 2, nothing stored or uploaded", async () => {
    const requests = fake.requests.length;
    const run = await as(alice, ["submit", "faces", "--cloud", "replicate"]);
    expect([run.code, run.stdout]).toEqual([2, ""]);
    expect(run.stderr).toBe(
      "error: uploads to replicate need your confirmation: review them with `jobs submit faces --cloud replicate --dry-run`, then add --yes\n",
    );
    expect((await entries("&include_completed=true")).filter((e) => e.job_type === "cloud")).toEqual([]);
    expect(fake.requests.length).toBe(requests);
  });

  it("with --yes confirms exactly the summary it reviewed and submits the job", async () => {
    const run = await as(alice, ["submit", "faces", "--cloud", "replicate", "--yes", "--meta", "run_name=faces-1"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/^Confirmed with --yes: uploading 2 file\(s\), [\d.]+ (B|KiB) to replicate, about \$5\.04\.\n$/);
    const id = run.stdout.split(" ")[0]!;
    expect(id).toMatch(/^cloud-[0-9a-f]{12}$/);
    expect(run.stdout).toBe(`${id} running: admitted: packaging and uploading to the provider now\n`);
    expect(await entry(id)).toMatchObject({ job_type: "cloud", owner: "alice", metadata: { run_name: "faces-1" } });
  });

  it("queues for remote workers with --cloud workers (no consent needed: nothing is uploaded)", async () => {
    const dry = await as(alice, ["submit", "cpu", "--cloud", "workers", "--dry-run"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(lines(dry)).toContain("Estimate: workers at $0.00/s for 0s: about $0.00");
    const run = await as(alice, ["submit", "cpu", "--cloud", "workers"]);
    expect(run.code, run.stderr).toBe(0);
    const id = run.stdout.split(" ")[0]!;
    expect(run.stdout).toMatch(new RegExp(`^${id} pending: queued at position \\d+: `));
    expect(await entry(id)).toMatchObject({ status: "pending", target: "worker", wait_reason: "no_matching_worker" });
  });
});

describe("jobs list", () => {
  let mine: string[];
  let blocked: string;
  beforeAll(async () => {
    await clearQueue();
    await limits({ local_job_max_concurrent: 0 });
    await gpuRule(1);
    blocked = await submitHttp(bob, { config_name: "two-gpu" });
    await gpuRule(null);
    mine = [];
    for (const metadata of [{ run_name: "r0" }, { run_name: "r1", a: { b: 7 } }, {}, { run_name: "r3" }, { run_name: "r4" }])
      mine.push(await submitHttp(alice, { config_name: "cpu", metadata }));
  });
  afterAll(async () => {
    await limits({ local_job_max_concurrent: 8 });
  });

  it("prints the default table: id, owner, status, priority, position, GPUs, config, wait reason and age", async () => {
    const run = await as(alice, ["list"]);
    expect(run.code, run.stderr).toBe(0);
    const [header, ...rows] = lines(run);
    expect(cells(header!)).toEqual(["JOB ID", "USER", "STATUS", "PRIO", "POS", "GPUS", "CONFIG", "WAIT", "START", "AGE"]);
    const api = await entries();
    expect(rows.map((row) => cells(row)[0])).toEqual(api.map((e) => e.job_id));
    const first = api.find((e) => e.job_id === mine[0])!;
    expect(cells(rows[api.indexOf(first)]!)).toEqual([
      mine[0],
      "alice",
      "pending",
      String(first.effective_priority),
      String(first.position),
      "cpu",
      "cpu",
      "local_job_limit",
      first.expected_start_at ? expect.stringMatching(/^(now|in \d+[smhd])$/) : "unknown",
      expect.stringMatching(/^\d+[sm]$/),
    ]);
    // Bob's job as Alice sees it: the public fields only, the rest "-".
    expect(cells(rows.find((row) => row.startsWith(blocked))!)).toEqual([
      blocked,
      "bob",
      "blocked",
      expect.stringMatching(/^\d+$/),
      "-",
      "-",
      "-",
      "awaiting_approval",
      "unknown",
      expect.stringMatching(/^\d+[sm]$/),
    ]);
    expect(run.stderr).toBe("");
  });

  it("prints the API's entries as a JSON array with --format json", async () => {
    // A Scheduler pass may fill in an expected start between two reads: the CLI's output is held
    // to the API's listing read before and after it, taken again until those two agree.
    for (let tries = 1; ; tries++) {
      const before = JSON.stringify((await http("GET", "/api/queue", alice)).jobs);
      const run = await as(alice, ["list", "--format", "json"]);
      const after = (await http("GET", "/api/queue", alice)).jobs;
      if (JSON.stringify(after) !== before && tries < 5) continue;
      expect(run.json()).toEqual(after);
      break;
    }
  });

  it("-o selects fields, metadata dot paths included: JSON holds exactly those keys, null where absent", async () => {
    const run = await as(alice, ["list", "-o", "job_id,config_name,metadata.run_name,metadata.a.b", "--format", "json"]);
    expect(run.code, run.stderr).toBe(0);
    const byId = new Map((run.json() as any[]).map((row) => [row.job_id, row]));
    expect(byId.size).toBe(6);
    for (const row of byId.values()) expect(Object.keys(row)).toEqual(["job_id", "config_name", "metadata.run_name", "metadata.a.b"]);
    expect(byId.get(mine[1])).toEqual({ job_id: mine[1], config_name: "cpu", "metadata.run_name": "r1", "metadata.a.b": 7 });
    expect(byId.get(mine[2])).toEqual({ job_id: mine[2], config_name: "cpu", "metadata.run_name": null, "metadata.a.b": null });
    expect(byId.get(blocked)).toEqual({ job_id: blocked, config_name: null, "metadata.run_name": null, "metadata.a.b": null });

    const table = await as(alice, ["list", "-o", "job_id,metadata.run_name"]);
    const [header, ...rows] = lines(table);
    expect(cells(header!)).toEqual(["JOB_ID", "METADATA.RUN_NAME"]);
    expect(rows.map(cells)).toContainEqual([mine[3], "r3"]);
    expect(rows.map(cells)).toContainEqual([blocked, "-"]);
  });

  it("refuses an unknown -o field with exit 2, listing the valid ones", async () => {
    for (const spec of ["job_id,colour", "metadata.", "metadata..x", "owner.name"]) {
      const run = await as(alice, ["list", "-o", spec]);
      expect([run.code, run.stdout], spec).toEqual([2, ""]);
      expect(run.stderr).toContain("valid fields: id, job_id, user_id, owner, team_id, provider, config_name,");
      expect(run.stderr).toContain("and metadata.<key> (any depth: metadata.a.b)");
    }
  });

  it("-l limits the entries (saying how many more there are); --all walks every page, each entry once", async () => {
    const some = await as(alice, ["list", "-l", "2", "--format", "json"]);
    expect(some.json()).toHaveLength(2);
    const table = await as(alice, ["list", "-l", "2"]);
    expect(table.stderr).toBe("Showing 2 of 6 jobs: add --all for every page.\n");
    const all = await as(alice, ["list", "--all", "-l", "2", "--format", "json"]);
    const ids = (all.json() as any[]).map((e) => e.job_id);
    expect(ids).toEqual([blocked, ...mine]); // submitted order, no repeats
    for (const bad of ["0", "1001", "two", "1.5"]) {
      const run = await as(alice, ["list", "-l", bad]);
      expect([run.code, run.stdout], bad).toEqual([2, ""]);
    }
  });

  it("--status filters; --completed adds ended jobs", async () => {
    const blockedOnly = await as(alice, ["list", "--status", "blocked", "--format", "json"]);
    expect((blockedOnly.json() as any[]).map((e) => e.job_id)).toEqual([blocked]);
    const pending = await as(alice, ["list", "--status", "pending", "--all", "--format", "json"]);
    expect((pending.json() as any[]).map((e) => e.job_id)).toEqual(mine);
    const active = await as(alice, ["list", "--all", "--format", "json"]);
    const withEnded = await as(alice, ["list", "--all", "--completed", "--format", "json"]);
    const ended = (withEnded.json() as any[]).filter((e) => ["completed", "failed", "cancelled"].includes(e.status));
    expect(ended.length).toBeGreaterThan(0);
    expect(withEnded.json().length).toBe(active.json().length + ended.length);
    const bad = await as(alice, ["list", "--status", "completed"]);
    expect(bad.code).toBe(2);
  });
});

describe("jobs status (summary)", () => {
  beforeAll(async () => {
    await clearQueue();
    await limits({ local_job_max_concurrent: 1 });
  });
  afterAll(async () => {
    await limits({ local_job_max_concurrent: 8 });
  });

  it("without an id prints the caller's counts, best position and a line per job with why it waits; JSON is GET /api/queue/me", async () => {
    const running = await submitHttp(alice, { config_name: "cpu" });
    const waiting = [await submitHttp(alice, { config_name: "cpu" }), await submitHttp(alice, { config_name: "cpu" })];
    const run = await as(alice, ["status"]);
    expect(run.code, run.stderr).toBe(0);
    const me = await http("GET", "/api/queue/me", alice);
    expect(me.pending_count).toBe(2);
    expect(lines(run)).toEqual([
      `2 pending, 1 running, 0 blocked; best position ${me.best_position}`,
      `${running}  running on box  cpu`,
      ...me.pending_jobs.map(
        (job: any) =>
          `${job.job_id}  pending at position ${job.position}: local_job_limit: 1 of 1 local jobs are running (local_job_max_concurrent)`,
      ),
    ]);
    expect(me.pending_jobs.map((job: any) => job.job_id).sort()).toEqual([...waiting].sort());
    // The waiting jobs' forecast is filled in by the next scheduler pass: compared once it has been, so
    // the two reads cannot straddle that pass.
    await until("the waiting jobs' forecast", async () =>
      ((await http("GET", "/api/queue/me", alice)).pending_jobs as any[]).every(
        (job) => !String(job.expected_start_basis).startsWith("unknown until the next scheduler pass"),
      ),
    );
    const json = await as(alice, ["status", "--format", "json"]);
    expect(json.json()).toEqual(await http("GET", "/api/queue/me", alice));
    const empty = await as(bob, ["status"]);
    expect(lines(empty)).toEqual(["0 pending, 0 running, 0 blocked"]);
  });
});

describe("jobs cancel", () => {
  beforeAll(async () => {
    await clearQueue();
    await limits({ local_job_max_concurrent: 1 });
  });
  afterAll(async () => {
    await limits({ local_job_max_concurrent: 8 });
  });

  it("cancels one job, printing the service's message", async () => {
    const holder = await submitHttp(alice, { config_name: "cpu" });
    expect((await entry(holder)).status).toBe("running");
    const id = await submitHttp(alice, { config_name: "cpu" });
    const run = await as(alice, ["cancel", id]);
    expect([run.code, run.stdout, run.stderr]).toEqual([0, `Job ${id} was pending and is now cancelled\n`, ""]);
    expect((await entry(id)).status).toBe("cancelled");
    expect((await entry(holder)).status).toBe("running");
  });

  it("cancels the others when one id fails: each failure on stderr, exit 1; JSON lists every outcome", async () => {
    const [a, b] = [await submitHttp(alice, { config_name: "cpu" }), await submitHttp(alice, { config_name: "cpu" })];
    const missing = await t.call("POST", "/api/training/cancel", { json: { job_id: "local-000000000000" }, auth: { key: alice.key } });
    expect(missing.status).toBe(404);
    const run = await as(alice, ["cancel", a!, "local-000000000000", b!]);
    expect(run.code).toBe(1);
    expect(lines(run)).toEqual([`Job ${a} was pending and is now cancelled`, `Job ${b} was pending and is now cancelled`]);
    expect(run.stderr).toBe(`error: local-000000000000: ${missing.body.detail}\nerror: 1 of 3 job(s) could not be cancelled\n`);
    expect([(await entry(a!)).status, (await entry(b!)).status]).toEqual(["cancelled", "cancelled"]);

    const c = await submitHttp(alice, { config_name: "cpu" });
    const json = await as(alice, ["cancel", "local-000000000000", c, "--format", "json"]);
    expect(json.code).toBe(1);
    expect(json.json()).toEqual([
      { job_id: "local-000000000000", cancelled: false, error: missing.body.detail },
      { job_id: c, cancelled: true, message: `Job ${c} was pending and is now cancelled` },
    ]);
    expect(JSON.parse(json.stderr).error.detail).toBe("1 of 2 job(s) could not be cancelled");
  });

  it("refuses a researcher's cancel of another user's job (exit 1, the job unchanged)", async () => {
    await clearQueue();
    await submitHttp(alice, { config_name: "cpu" }); // runs, so Bob's job waits
    const id = await submitHttp(bob, { config_name: "cpu" });
    const status = (await entry(id)).status;
    expect(status).toBe("pending");
    const refused = await t.call("POST", "/api/training/cancel", { json: { job_id: id }, auth: { key: alice.key } });
    expect(refused.status).toBe(403);
    const run = await as(alice, ["cancel", id]);
    expect([run.code, run.stdout]).toEqual([1, ""]);
    expect(run.stderr).toBe(`error: ${id}: ${refused.body.detail}\nerror: 1 of 1 job(s) could not be cancelled\n`);
    expect((await entry(id)).status).toBe(status);
    const all = await as(alice, ["cancel", "--all", "--user", "bob"]);
    expect(all.code).toBe(1);
    expect((await entry(id)).status).toBe(status);
  });

  it("--all cancels only your pending and blocked jobs: not your running one, not another user's", async () => {
    await clearQueue();
    const running = await submitHttp(alice, { config_name: "cpu" });
    const pending = [await submitHttp(alice, { config_name: "cpu" }), await submitHttp(alice, { config_name: "cpu" })];
    await gpuRule(1);
    const blocked = await submitHttp(alice, { config_name: "two-gpu" });
    await gpuRule(null);
    const bobs = await submitHttp(bob, { config_name: "cpu" });
    expect((await entry(running)).status).toBe("running");

    const run = await as(alice, ["cancel", "--all"]);
    expect(run.code, run.stderr).toBe(0);
    expect(lines(run)).toEqual(
      [...pending, blocked].map((id) => `Job ${id} was ${id === blocked ? "blocked" : "pending"} and is now cancelled`),
    );
    for (const id of [...pending, blocked]) expect((await entry(id)).status).toBe("cancelled");
    expect((await entry(running)).status).toBe("running");
    expect((await entry(bobs)).status).toBe("pending");

    const nothing = await as(alice, ["cancel", "--all"]);
    expect([nothing.code, nothing.stdout, nothing.stderr]).toEqual([0, "", "Nothing to cancel.\n"]);
    const nothingJson = await as(alice, ["cancel", "--all", "--format", "json"]);
    expect([nothingJson.code, nothingJson.json()]).toEqual([0, []]);

    // An admin's --all --user: that user's jobs.
    const admins = await as(admin, ["cancel", "--all", "--user", "bob", "--format", "json"]);
    expect(admins.json()).toEqual([{ job_id: bobs, cancelled: true, message: `Job ${bobs} was pending and is now cancelled` }]);
    expect((await entry(running)).status).toBe("running");
  });

  it("refuses ids with --all, neither, and --user without --all (exit 2), cancelling nothing", async () => {
    const id = await submitHttp(alice, { config_name: "cpu" });
    for (const args of [["cancel"], ["cancel", id, "--all"], ["cancel", id, "--user", "alice"]]) {
      const run = await as(alice, args);
      expect([run.code, run.stdout], args.join(" ")).toEqual([2, ""]);
      expect(run.stderr).toMatch(/^error: /);
    }
    expect((await entry(id)).status).not.toBe("cancelled");
  });

  it("cancels a cloud job", async () => {
    const submitted = await as(alice, ["submit", "faces", "--cloud", "replicate", "--yes"]);
    const id = submitted.stdout.split(" ")[0]!;
    await until("the cloud job to reach the provider", async () => (await http("GET", `/api/cloud/jobs/${id}`, alice)).provider_job_id);
    const run = await as(alice, ["cancel", id]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^Job ${id} is cancelled`));
    expect((await entry(id)).status).toBe("cancelled");
  });
});

describe("status of one job, local dry runs and list --user", () => {
  beforeAll(async () => {
    await clearQueue();
    await limits({ local_job_max_concurrent: 1 });
  });
  afterAll(async () => {
    await limits({ local_job_max_concurrent: 8 });
  });

  it("--dry-run says what would happen and enqueues nothing", async () => {
    const before = (await http("GET", "/api/queue?include_completed=true", admin)).total;
    const run = await as(alice, ["submit", "one-gpu", "--target", "local", "--dry-run"]);
    expect([run.code, run.stderr]).toEqual([0, "Dry run: nothing was queued.\n"]);
    // The whole plan is in test/cli/cli-dry-run.test.ts.
    expect(lines(run).slice(0, 3).map(cells)).toEqual([["PLAN"], ["where", "GPUs [0]"], ["outcome", "would start now"]]);
    const json = await as(alice, ["submit", "one-gpu", "--target", "local", "--dry-run", "--format", "json"]);
    expect(json.json()).toMatchObject({ dry_run: true, job_id: null, status: "running", allocated_gpus: [0] });
    expect((await http("GET", "/api/queue?include_completed=true", admin)).total).toBe(before);
  });

  it("status of a pending job shows its position and why it waits; JSON is {job, training, cloud}", async () => {
    const running = await submitHttp(alice, { config_name: "cpu" });
    const id = await submitHttp(alice, { config_name: "cpu" });
    const run = await as(alice, ["status", id]);
    expect(run.code, run.stderr).toBe(0);
    const rows = new Map(lines(run).map((line) => [cells(line)[0], cells(line).slice(1).join("  ")]));
    expect(rows.get("Job")).toBe(id);
    expect(rows.get("Owner")).toBe("alice");
    expect(rows.get("Status")).toBe("pending");
    expect(rows.get("Position")).toBe("1");
    expect(rows.get("Waiting")).toBe("local_job_limit: 1 of 1 local jobs are running (local_job_max_concurrent)");
    expect(rows.get("Attempt")).toBe("1 of 3");
    // A new job's forecast is filled in by the next scheduler pass: compared once it has been, so
    // the CLI's read and the API's read see the same pass.
    await until("the job's forecast", async () => {
      const job = await http("GET", `/api/queue/jobs/${id}`, alice);
      return !String(job.expected_start_basis).startsWith("unknown until the next scheduler pass");
    });
    const json = await as(alice, ["status", id, "--format", "json"]);
    expect(json.json()).toEqual({ job: await http("GET", `/api/queue/jobs/${id}`, alice), training: null, cloud: null });
    const live = await as(alice, ["status", running, "--format", "json"]);
    expect(live.json().training).toMatchObject({ job_id: running, status: "running" });
  });

  it("status of an unknown job exits 1 with the service's detail", async () => {
    const refused = await t.call("GET", "/api/queue/jobs/local-000000000000", { auth: { key: alice.key } });
    expect(refused.status).toBe(404);
    const run = await as(alice, ["status", "local-000000000000"]);
    expect([run.code, run.stdout, run.stderr]).toEqual([1, "", `error: ${refused.body.detail}\n`]);
  });

  it("status of a cloud job adds its phase, upload and cost", async () => {
    const id = (await as(alice, ["submit", "faces", "--cloud", "replicate", "--yes"])).stdout.split(" ")[0]!;
    const json = await as(alice, ["status", id, "--format", "json"]);
    expect(json.json().cloud).toMatchObject({ job_id: id, provider: "replicate", hardware: "gpu-a100-large" });
    const run = await as(alice, ["status", id]);
    expect(run.stdout).toMatch(/^Phase +\w+/m);
    expect(run.stdout).toMatch(/^Cost +\$\d+(\.\d+)? so far, estimate \$5\.04$/m);
    // Running on the allowance its estimate assumed (60 minutes): an expected end from the cost cap.
    expect(run.stdout).toMatch(/^Expected end +\d{4}-\d\d-\d\dT[\d:.]+Z \(from cost cap\)$/m);
    await http("POST", "/api/training/cancel", alice, { job_id: id });
  });

  it("list --user shows only that user's jobs", async () => {
    const bobs = await submitHttp(bob, { config_name: "cpu" });
    const run = await as(alice, ["list", "--user", "bob", "--format", "json"]);
    expect((run.json() as any[]).map((e) => e.job_id)).toEqual([bobs]);
  });
});
