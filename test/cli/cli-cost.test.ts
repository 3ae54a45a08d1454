// `jobs cost`: the built binary against the real local stack, over jobs of known GPU-seconds on a
// priced box: the table, `--format json` (the API's answer), `--format csv` (the API's CSV), a
// researcher's own view and their refused filter, and --format csv refused by other commands.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jobs } from "../helpers/cli";
import { finishJob, gpuInventory, registerBox, setStoredDuration } from "../helpers/spend";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let ada: { key: string };
let bob: { key: string };

const as = (who: { key: string }, args: string[]) => jobs(args, { env: { SERVICE_URL: t.base, SERVICE_API_KEY: who.key } });

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  ada = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "ada");
  bob = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "bob");
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "train" }, auth: admin })).status).toBe(201);
  await t.call("PUT", "/api/configs/train", { json: { config: { "--num_processes": 1 } }, auth: admin });
  const box = await registerBox(t, admin.key, "box", "local", gpuInventory(2, "NVIDIA L40S"));
  await t.call("PUT", "/api/admin/gpu-prices", { json: { workers: { box: 1.25 } }, auth: admin });
  // ada: 2 h on one GPU ($2.50); bob: 1 h ($1.25).
  for (const [who, seconds] of [
    [ada, 7200],
    [bob, 3600],
  ] as const) {
    const submitted = await t.call("POST", "/api/queue/submit", { json: { config_name: "train", target: "local" }, auth: who });
    expect(submitted.body.status, submitted.text).toBe("running");
    await finishJob(t, submitted.body.job_id, box);
    await setStoredDuration(t, submitted.body.job_id, seconds);
  }
}, 60_000);
afterAll(() => t?.stop());

describe("jobs cost", () => {
  it("prints a table of the groups and their total", async () => {
    const run = await as(admin, ["cost", "--by", "user", "--since", "30d"]);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout
      .trimEnd()
      .split("\n")
      .map((l) => l.trim().split(/\s{2,}/));
    expect(lines).toEqual([
      ["USER", "GPU-HOURS", "COST (USD)", "JOBS"],
      ["ada", "2.00", "$2.50", "1"],
      ["bob", "1.00", "$1.25", "1"],
      ["TOTAL", "3.00", "$3.75", "2"],
    ]);
    expect(run.stderr).toMatch(/ to /);
  });

  it("prints the API's answer with --format json and its CSV with --format csv", async () => {
    const json = await as(admin, ["cost", "--by", "user", "--format", "json"]);
    expect(json.code, json.stderr).toBe(0);
    const api = await t.call("GET", "/api/cost?by=user&since=30d", { auth: admin });
    expect({ ...json.json(), since: null, until: null }).toEqual({ ...api.body, since: null, until: null });
    expect(json.json().total).toEqual({ gpu_hours: 3, cost: 3.75, jobs: 2 });
    const csv = await as(admin, ["cost", "--by", "user", "--format", "csv"]);
    expect(csv.code, csv.stderr).toBe(0);
    expect(csv.stdout).toBe("user,gpu_hours,cost,currency,jobs\r\nada,2,2.5,USD,1\r\nbob,1,1.25,USD,1\r\ntotal,3,3.75,USD,2\r\n");
    expect(csv.stdout).toBe((await t.call("GET", "/api/cost?by=user&since=30d&format=csv", { auth: admin })).text);
  });

  it("shows a researcher their own jobs and refuses another user's", async () => {
    const own = await as(ada, ["cost", "--format", "json"]);
    expect(own.json()).toMatchObject({ scope: "own", groups: [{ key: "ada", cost: 2.5 }], total: { cost: 2.5, jobs: 1 } });
    const other = await as(ada, ["cost", "--user", "bob"]);
    expect(other.code).toBe(1);
    expect(other.stdout).toBe("");
    expect(other.stderr).toMatch(/another user's cost/);
  });

  it("refuses a bad grouping or period and --format csv on other commands (exit 2 or 1, nothing on stdout)", async () => {
    const by = await as(admin, ["cost", "--by", "owner"]);
    expect([by.code, by.stdout]).toEqual([2, ""]);
    const since = await as(admin, ["cost", "--since", "yesterday"]);
    expect([since.code, since.stdout]).toEqual([1, ""]);
    expect(since.stderr).toMatch(/since "yesterday"/);
    const list = await as(admin, ["list", "--format", "csv"]);
    expect([list.code, list.stdout]).toEqual([2, ""]);
    expect(list.stderr).toMatch(/--format csv is for jobs cost/);
  });
});
