// Every waiting job's expected start (edge/scheduler/forecast.ts), over real HTTP against the real
// stack, and as `jobs list`, `jobs status` and `jobs submit --dry-run` print it. A registered local
// box of one GPU that no runner serves: what the Scheduler starts there stays running, so the
// known inputs (each environment's --max_runtime_minutes) give exact expected starts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PUBLIC_QUEUE_FIELDS } from "../../shared/schemas/queue";
import { gpuInventory, registerBox } from "../helpers/boxes";
import { jobs } from "../helpers/cli";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let alice: { key: string; id: number };
let bob: { key: string; id: number };
let vera: { key: string; id: number };
let running: any;
let first: string;
let second: string;
let held: string;

const MIN = 60_000;
const as = (who: { key: string }, args: string[]) => jobs(args, { env: { SERVICE_URL: t.base, SERVICE_API_KEY: who.key } });
const http = async (method: string, path: string, who: { key: string }, json?: unknown) => {
  const reply = await t.call(method, path, { auth: { key: who.key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
};
const entry = (who: { key: string }, jobId: string) => http("GET", `/api/queue/jobs/${jobId}`, who);
const ms = (iso: string) => Date.parse(iso);
const minute = (at: number) => `${new Date(at).toISOString().slice(0, 16)}Z`;
/** Everything stored, to show that a refused request changed nothing. */
const snapshot = async () => (await http("GET", "/api/queue?include_completed=true&order=submitted&limit=1000", admin)).jobs;

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  alice = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "alice");
  bob = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "bob");
  vera = await createUserWithKey(t, { cookie: admin.cookie }, "viewer", "vera");
  for (const [name, minutes] of [
    ["hour", 60],
    ["half", 30],
    ["three-quarters", 45],
  ] as const) {
    await http("POST", "/api/configs/environments", alice, { name, model_family: "flux", model_type: "lora" });
    await http("PUT", `/api/configs/${name}`, alice, {
      config: { "--model_family": "flux", "--num_processes": 1, "--max_runtime_minutes": minutes },
    });
  }
  await registerBox(t, admin.key, "box", "local", gpuInventory(1, "NVIDIA A100-SXM4-80GB"));
  await http("POST", "/api/queue/concurrency", admin, { worker_heartbeat_timeout_seconds: 86_400 });

  const started = await http("POST", "/api/queue/submit", alice, { config_name: "hour" });
  expect(started).toMatchObject({ status: "running", allocated_gpus: [0] });
  running = await entry(alice, started.job_id);
  first = (await http("POST", "/api/queue/submit", alice, { config_name: "half" })).job_id;
  second = (await http("POST", "/api/queue/submit", bob, { config_name: "three-quarters" })).job_id;
  // A pass after both submissions places them (the listing reads the last pass).
  await http("POST", "/api/queue/process", admin);
}, 60_000);

afterAll(async () => {
  await t?.stop();
});

describe("an expected start for every waiting job", () => {
  it("gives the running job's expected end from its --max_runtime_minutes", () => {
    expect(running).toMatchObject({ status: "running", expected_end_method: "max_runtime" });
    expect(ms(running.expected_end_at)).toBe(ms(running.started_at) + 60 * MIN);
  });

  it("lists each waiting job's expected start as the simulation gives it: the second after the first", async () => {
    const end = ms(running.expected_end_at);
    const { jobs: listed } = await http("GET", "/api/queue", admin);
    const one = listed.find((j: any) => j.job_id === first);
    const two = listed.find((j: any) => j.job_id === second);
    expect(one).toMatchObject({
      position: 1,
      expected_start_at: new Date(end).toISOString(),
      expected_start_basis: `after ${running.job_id} ends (expected ${minute(end)})`,
      expected_run_seconds: 1800,
      expected_run_basis: "its --max_runtime_minutes (30)",
    });
    expect(two).toMatchObject({
      position: 2,
      expected_start_at: new Date(end + 30 * MIN).toISOString(),
      expected_start_basis: `after ${first} ends (expected ${minute(end + 30 * MIN)})`,
      expected_run_seconds: 2700,
      expected_run_basis: "its --max_runtime_minutes (45)",
    });
    // The job's own answer and its position say the same.
    expect(await entry(alice, first)).toMatchObject({
      expected_start_at: one.expected_start_at,
      expected_start_basis: one.expected_start_basis,
    });
    expect(await http("GET", `/api/queue/position/${second}`, bob)).toMatchObject({
      position: 2,
      expected_start_at: two.expected_start_at,
      expected_start_basis: two.expected_start_basis,
    });
    // Running jobs have none.
    expect(listed.find((j: any) => j.job_id === running.job_id)).toMatchObject({ expected_start_at: null, expected_start_basis: null });
  });

  it("says unknown, with the reason, for a job awaiting approval", async () => {
    await http("PUT", "/api/queue/approval-rules", admin, { local_gpu_threshold: 0 });
    try {
      const blocked = await http("POST", "/api/queue/submit", alice, { config_name: "half" });
      expect(blocked.status).toBe("blocked");
      held = blocked.job_id;
      expect(await entry(alice, held)).toMatchObject({
        status: "blocked",
        expected_start_at: null,
        expected_start_basis: "unknown: waits for an admin's approval",
        expected_run_seconds: 1800,
      });
      const dry = await http("POST", "/api/queue/submit", alice, { config_name: "half", dry_run: true });
      expect(dry).toMatchObject({
        status: "blocked",
        expected_start_at: null,
        expected_start_basis: "unknown: waits for an admin's approval",
      });
    } finally {
      await http("PUT", "/api/queue/approval-rules", admin, { local_gpu_threshold: null });
    }
  });

  it("answers a dry run with the start it would have: after the last job ahead, nothing stored", async () => {
    const before = await snapshot();
    const dry = await http("POST", "/api/queue/submit", alice, { config_name: "half", dry_run: true });
    const end = ms(running.expected_end_at) + 75 * MIN;
    expect(dry).toMatchObject({
      status: "queued",
      queue_position: 3,
      expected_start_at: new Date(end).toISOString(),
      expected_start_basis: `after ${second} ends (expected ${minute(end)})`,
      expected_run_seconds: 1800,
      expected_run_basis: "its --max_runtime_minutes (30)",
    });
    expect(await snapshot()).toEqual(before);
  });
});

describe("the jobs command line prints it", () => {
  it("jobs list: a START column, relative to now", async () => {
    const run = await as(admin, ["list"]);
    expect(run.code, run.stderr).toBe(0);
    const rows = run.stdout.split("\n").filter(Boolean);
    const header = rows[0]!.split(/ {2,}/);
    const startCol = header.indexOf("START");
    expect(startCol).toBeGreaterThan(0);
    const cellOf = (jobId: string) => rows.find((r) => r.startsWith(jobId))!.split(/ {2,}/)[startCol];
    // 60 min after the running job started, less the seconds since; 90 min for the second.
    expect(cellOf(first)).toBe("in 59m");
    expect(cellOf(second)).toBe("in 1h");
    expect(cellOf(held)).toBe("unknown");
    expect(cellOf(running.job_id)).toBe("-");
  });

  it("jobs status: the expected start with how it was estimated, and the run time", async () => {
    const api = await entry(alice, first);
    const run = await as(alice, ["status", first]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`Expected start  ${api.expected_start_at} (in 59m): ${api.expected_start_basis}`);
    expect(run.stdout).toContain("Expected run    30m: its --max_runtime_minutes (30)");
    const blocked = await as(alice, ["status", held]);
    expect(blocked.stdout).toContain("Expected start  unknown: waits for an admin's approval");
  });

  it("jobs submit --dry-run: the plan's start and run time rows", async () => {
    const run = await as(alice, ["submit", "half", "--dry-run"]);
    expect(run.code, run.stderr).toBe(0);
    const end = ms(running.expected_end_at) + 75 * MIN;
    const rows = Object.fromEntries(
      run.stdout
        .split("\n")
        .filter(Boolean)
        .map((r) => {
          const [label, ...value] = r.split(/ {2,}/);
          return [label!, value.join("  ")];
        }),
    );
    expect(rows.start).toBe(`${new Date(end).toISOString()} (in 2h): after ${second} ends (expected ${minute(end)})`);
    expect(rows["run time"]).toBe("30m: its --max_runtime_minutes (30)");
  });
});

describe("what others may see and change", () => {
  it("a viewer sees another user's waiting job with the public fields only: the start, not how it was estimated", async () => {
    const { jobs: listed } = await http("GET", "/api/queue", vera);
    for (const job of listed) expect(Object.keys(job).sort()).toEqual([...PUBLIC_QUEUE_FIELDS].sort());
    const one = listed.find((j: any) => j.job_id === first);
    expect(one.expected_start_at).toBe(new Date(ms(running.expected_end_at)).toISOString());
    expect(await entry(vera, first)).not.toHaveProperty("expected_start_basis");
    // Bob's position on Alice's job: the start, not its basis (it names other jobs).
    expect(await http("GET", `/api/queue/position/${first}`, bob)).toMatchObject({
      expected_start_at: one.expected_start_at,
      expected_start_basis: null,
    });
  });

  it("refuses an expected_start_at in a submission, and one in metadata moves nothing", async () => {
    const before = await snapshot();
    const refused = await t.call("POST", "/api/queue/submit", {
      auth: { key: bob.key },
      json: { config_name: "half", expected_start_at: "2020-01-01T00:00:00.000Z" },
    });
    expect(refused.status).toBe(422);
    expect(refused.text).toContain("expected_start_at");
    expect(await snapshot()).toEqual(before);

    const sneaky = await http("POST", "/api/queue/submit", bob, {
      config_name: "half",
      metadata: { expected_start_at: "2020-01-01T00:00:00.000Z", expected_start_basis: "<b>now</b>" },
    });
    await http("POST", "/api/queue/process", admin);
    const shown = await until("the next pass to place it", async () => {
      const e = await entry(bob, sneaky.job_id);
      return e.expected_start_at !== null && e;
    });
    // Behind the jobs ahead of it: 75 min after the running job ends (the first 30, the second 45).
    const end = ms(running.expected_end_at) + 75 * MIN;
    expect(shown.expected_start_at).toBe(new Date(end).toISOString());
    expect(shown.expected_start_basis).toBe(`after ${second} ends (expected ${minute(end)})`);
    // The jobs ahead kept theirs.
    expect((await entry(alice, first)).expected_start_at).toBe(new Date(ms(running.expected_end_at)).toISOString());
    await http("POST", `/api/queue/${sneaky.job_id}/cancel`, bob);
  });
});
