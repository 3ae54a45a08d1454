// `jobs submit --dry-run`'s plan: the built binary against the real local stack, with a registered
// local box of 2 GPUs that no runner serves and a fake Replicate for cloud submissions. Each plan
// row is compared with the API's own dry-run answer; nothing is ever queued; a viewer's dry run is
// the API's refusal; bad arguments exit 2 before any request.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeReplicate, type FakeReplicate } from "../fakes/fake-replicate";
import { jobs, type JobsRun } from "../helpers/cli";
import { fakeReplicateSettings } from "../helpers/fake-provider";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

const TOKEN = "r8_clidryruntesttoken0123456789ab";

let t: TestStack;
let fake: FakeReplicate;
let admin: { key: string; cookie: string };
let alice: { key: string; id: number };
let vera: { key: string; id: number };

const as = (who: { key: string }, args: string[]) => jobs(args, { env: { SERVICE_URL: t.base, SERVICE_API_KEY: who.key } });
const http = async (method: string, path: string, who: { key: string }, json?: unknown) => {
  const reply = await t.call(method, path, { auth: { key: who.key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
};
const limits = (body: Record<string, unknown>) => http("POST", "/api/queue/concurrency", admin, body);
const gpuRule = (threshold: number | null) => http("PUT", "/api/queue/approval-rules", admin, { local_gpu_threshold: threshold });
/** Every job ever stored, to show a dry run stores none. */
const total = async () => (await http("GET", "/api/queue?include_completed=true", admin)).total as number;
/** The plan's rows as [label, value] (columns are separated by two or more spaces), after its PLAN header. */
function plan(run: JobsRun): string[][] {
  const rows = run.stdout.split("\n").filter(Boolean);
  const start = rows.findIndex((row) => row.trim() === "PLAN");
  expect(start, run.stdout).toBeGreaterThanOrEqual(0);
  return rows.slice(start + 1).map((row) => {
    const [label, ...value] = row.split(/ {2,}/);
    return [label!, value.join("  ")];
  });
}
const NOT_GIVEN = "- (not in the service's dry-run answer)";

beforeAll(async () => {
  fake = await startFakeReplicate({ token: TOKEN, run: { outcome: "manual" } });
  t = await startTestStack(undefined, { REPLICATE_API_TOKEN: TOKEN });
  admin = await setUpAdmin(t);
  alice = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "alice");
  vera = await createUserWithKey(t, { cookie: admin.cookie }, "viewer", "vera");
  for (const [name, processes] of [
    ["cpu", 0],
    ["one-gpu", 1],
    ["two-gpu", 2],
  ] as const) {
    await http("POST", "/api/configs/environments", alice, { name, model_family: "flux", model_type: "lora" });
    await http("PUT", `/api/configs/${name}`, alice, { config: { "--model_family": "flux", "--num_processes": processes } });
  }
  const box = await http("POST", "/api/admin/workers", admin, { name: "box" });
  const gpus = [0, 1].map((index) => ({ index, uuid: `GPU-${index}`, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }));
  const registered = await t.call("POST", "/api/workers/register", {
    json: { role: "local", gpus, hostname: "box-1", host_stats: { load_avg_5min: 0.1, memory_percent: 5 } },
    auth: { bearer: box.token },
  });
  expect(registered.status).toBe(200);
  await limits({ worker_heartbeat_timeout_seconds: 86_400, local_job_max_concurrent: 8 });
  await http("PUT", "/api/cloud/providers/replicate", admin, fakeReplicateSettings(fake));
  await http("PUT", "/api/cloud/settings", admin, { public_url: t.base, poll_interval_seconds: 1 });
}, 60_000);

afterAll(async () => {
  await Promise.all([t?.stop(), fake?.stop()]);
});

describe("jobs submit --dry-run (local)", () => {
  it("a job that would start now: its GPUs, start now, no cost; JSON is the API's answer; nothing queued", async () => {
    const before = await total();
    const run = await as(alice, ["submit", "one-gpu", "--target", "local", "--dry-run"]);
    expect([run.code, run.stderr]).toEqual([0, "Dry run: nothing was queued.\n"]);
    expect(plan(run)).toEqual([
      ["where", "GPUs [0]"],
      ["outcome", "would start now"],
      ["position", "-"],
      ["why", "-"],
      ["start", "now"],
      ["run time", "-"],
      ["cost", "- (local: not billed)"],
    ]);
    const json = await as(alice, ["submit", "one-gpu", "--target", "local", "--dry-run", "--format", "json"]);
    expect(json.json()).toEqual(await http("POST", "/api/queue/submit", alice, { config_name: "one-gpu", target: "local", dry_run: true }));
    expect(await total()).toBe(before);
  });

  it("a job that would wait: its position and the API's reason; where is decided when admitted", async () => {
    await limits({ local_job_max_concurrent: 0 });
    try {
      const before = await total();
      const run = await as(alice, ["submit", "cpu", "--dry-run"]);
      expect(run.code, run.stderr).toBe(0);
      const api = await http("POST", "/api/queue/submit", alice, { config_name: "cpu", dry_run: true });
      expect(api).toMatchObject({ status: "queued", wait_reason: "local_job_limit" });
      expect(plan(run)).toEqual([
        ["where", "- (decided when admitted)"],
        ["outcome", "would wait in the queue"],
        ["position", String(api.queue_position)],
        ["why", `local_job_limit: ${api.message}`],
        // Nothing runs, so nothing expected to end can lift the limit: unknown, and why.
        [
          "start",
          "unknown: no job is expected to end that would let it start (local_job_limit: 0 of 0 local jobs are running (local_job_max_concurrent))",
        ],
        ["run time", "unknown: no --max_runtime_minutes, and no completed run of its environment on as many GPUs in the last 30 days"],
        ["cost", "- (local: not billed)"],
      ]);
      // --no-wait: the dry run says it would be refused, exit 1, still nothing stored.
      const refused = await as(alice, ["submit", "cpu", "--dry-run", "--no-wait"]);
      expect([refused.code, refused.stdout]).toEqual([1, ""]);
      expect(refused.stderr).toMatch(/^error: dry run: would be /);
      expect(await total()).toBe(before);
    } finally {
      await limits({ local_job_max_concurrent: 8 });
    }
  });

  it("a job an approval rule would hold: waits for an admin, the API's message as why", async () => {
    await gpuRule(1);
    try {
      const run = await as(alice, ["submit", "two-gpu", "--target", "local", "--dry-run"]);
      expect(run.code, run.stderr).toBe(0);
      const api = await http("POST", "/api/queue/submit", alice, { config_name: "two-gpu", target: "local", dry_run: true });
      expect(api.status).toBe("blocked");
      expect(plan(run).slice(1, 5)).toEqual([
        ["outcome", "would wait for an admin's approval"],
        ["position", api.queue_position === null ? "-" : String(api.queue_position)],
        ["why", api.wait_reason ? `${api.wait_reason}: ${api.message}` : api.message],
        ["start", "unknown: waits for an admin's approval"],
      ]);
    } finally {
      await gpuRule(null);
    }
  });

  it("a viewer's dry run is the API's 403 (exit 1), nothing stored", async () => {
    const before = await total();
    const run = await as(vera, ["submit", "cpu", "--dry-run"]);
    expect([run.code, run.stdout]).toEqual([1, ""]);
    expect(run.stderr).toMatch(/^error: /);
    expect(await total()).toBe(before);
  });

  it("bad arguments exit 2 before any request (a key the service would refuse shows none was made)", async () => {
    const nobody = { key: "st_notakeynotakeynotakey" };
    for (const args of [
      ["submit", "cpu", "--dry-run", "--target", "moon"],
      ["submit", "cpu", "--dry-run", "--follow"],
      ["submit", "cpu", "--dry-run", "--label", "gpu"],
      ["submit", "--dry-run"],
      ["submit", "cpu", "--dry-run", "--cloud", "replicate", "--no-wait"],
    ]) {
      const run = await as(nobody, args);
      expect([run.code, run.stdout], `${args.join(" ")}: ${run.stderr}`).toEqual([2, ""]);
    }
  });
});

describe("jobs submit --cloud --dry-run", () => {
  it("adds the plan after the package summary: the provider and hardware, the estimate's run time and cost", async () => {
    await http("POST", "/api/configs/environments", alice, { name: "faces", model_family: "flux", model_type: "lora" });
    const form = new FormData();
    form.set("target_path", "faces");
    form.append("files[]", new Blob(["a face"]), "001.txt");
    const uploaded = await t.call("POST", "/api/datasets/upload", { body: form, auth: { key: alice.key } });
    expect(uploaded.status, uploaded.text).toBe(201);
    const before = await total();
    const requests = fake.requests.length;
    const run = await as(alice, ["submit", "faces", "--cloud", "replicate", "--dry-run"]);
    expect([run.code, run.stderr]).toEqual([0, "Dry run: nothing was uploaded or queued.\n"]);
    const api = await http("POST", "/api/cloud/jobs/submit", alice, { config_name: "faces", provider: "replicate", dry_run: true });
    expect(plan(run)).toEqual([
      ["where", `replicate (${api.estimate.hardware})`],
      ["outcome", api.message],
      ["position", NOT_GIVEN],
      ["why", "-"],
      ["start", NOT_GIVEN],
      ["run time", "1h (the estimate's run time)"],
      ["cost", "about $5.04 at $0.0014/s"],
    ]);
    expect(api.estimate).toMatchObject({ expected_seconds: 3600, estimated_cost_usd: 5.04 });
    expect(fake.requests.length).toBe(requests);
    expect(await total()).toBe(before);
  });
});
