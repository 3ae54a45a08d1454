// `jobs approve`, `jobs reject`, `jobs priority`, `jobs gpus`, `jobs open` and `jobs list --watch`: the built binary run
// as a subprocess against the real local stack, with a registered box of 2 GPUs that no runner
// serves (its jobs stay running). Each outcome is read back over HTTP.
import { execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { healthSample } from "../helpers/boxes";
import { jobs, tempConfigHome, type JobsRun } from "../helpers/cli";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let lead: { key: string };
let alice: { key: string };
let bob: { key: string };

const as = (who: { key: string }, args: string[]) => jobs(args, { env: { SERVICE_URL: t.base, SERVICE_API_KEY: who.key } });
const http = async (method: string, path: string, who: { key: string }, json?: unknown) => {
  const reply = await t.call(method, path, { auth: { key: who.key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
};
const job = async (id: string) => http("GET", `/api/queue/jobs/${id}`, admin);
const submit = async (who: { key: string }, config_name: string) =>
  (await http("POST", "/api/queue/submit", who, { target: "local", config_name })).job_id as string;
/** A job an approval rule holds: 2 GPUs while more than 1 needs approval. */
async function blockedJob(who: { key: string }): Promise<string> {
  await http("PUT", "/api/queue/approval-rules", admin, { local_gpu_threshold: 1 });
  const id = await submit(who, "two-gpu");
  await http("PUT", "/api/queue/approval-rules", admin, { local_gpu_threshold: null });
  expect((await job(id)).status).toBe("blocked");
  return id;
}
const refused = (run: JobsRun) => [run.code, run.stdout, run.stderr.startsWith("error: ")];

async function environment(name: string, gpus: number) {
  await http("POST", "/api/configs/environments", admin, { name, model_family: "flux", model_type: "lora" });
  await http("PUT", `/api/configs/${name}`, admin, { config: { "--model_family": "flux", "--num_processes": gpus } });
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  lead = await createUserWithKey(t, { cookie: admin.cookie }, "lead", "lena");
  alice = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "alice");
  bob = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "bob");
  await environment("one-gpu", 1);
  await environment("two-gpu", 2);
  const box = await http("POST", "/api/admin/workers", admin, { name: "box" });
  const gpus = [0, 1].map((index) => ({ index, uuid: `GPU-${index}`, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }));
  const registered = await t.call("POST", "/api/workers/register", {
    json: { role: "local", gpus, hostname: "box-1", host_stats: { load_avg_5min: 0.1, memory_percent: 5 } },
    auth: { bearer: box.token },
  });
  expect(registered.status).toBe(200);
  await http("POST", "/api/queue/concurrency", admin, {
    worker_heartbeat_timeout_seconds: 86_400,
    local_job_max_concurrent: 8,
    user_max_concurrent: 10,
  });
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

describe("jobs gpus", () => {
  it("shows each GPU of each box and the job holding it", async () => {
    const id = await submit(alice, "one-gpu");
    const held = await job(id);
    expect(held.status).toBe("running");
    const table = await as(bob, ["gpus"]);
    expect(table.code).toBe(0);
    const rows = table.stdout
      .split("\n")
      .filter(Boolean)
      .map((line) => line.split(/ {2,}/));
    expect(rows[0]).toEqual(["BOX", "ROLE", "STATUS", "GPU", "NAME", "MEMORY", "HEALTH", "JOB"]);
    const holder = held.allocated_gpus[0];
    expect(rows.slice(1)).toEqual(
      [0, 1].map((index) => [
        "box",
        "local",
        expect.any(String),
        String(index),
        "NVIDIA A100-SXM4-80GB",
        "80 GiB",
        "-",
        index === holder ? id : "free",
      ]),
    );
    const json = await as(bob, ["gpus", "--format", "json"]);
    expect(json.json()).toEqual(await http("GET", "/api/system/workers", bob));
    await http("POST", "/api/training/cancel", admin, { job_id: id });
  });
});

describe("jobs gpus, health", () => {
  it("shows each GPU's latest sample, and a quarantined GPU with its fault (markup as text)", async () => {
    const box = await http("POST", "/api/admin/workers", admin, { name: "box-h" });
    const gpus = [0, 1].map((index) => ({ index, name: "NVIDIA L4", memory_mb: 23034 }));
    const registered = await t.call("POST", "/api/workers/register", {
      json: { role: "remote", labels: { pool: "h" }, gpus },
      auth: { bearer: box.token },
    });
    expect(registered.status).toBe(200);
    const sample = (index: number, probe_error: string | null) =>
      healthSample(index, { utilization_percent: 87, memory_used_mb: 2048, memory_total_mb: 23034, temperature_c: 61, probe_error });
    const beat = await t.call("POST", "/api/workers/heartbeat", {
      json: { gpu_health: [sample(0, null), sample(1, "<b>gone</b>")] },
      auth: { bearer: box.token },
    });
    expect(beat.body.quarantined_gpus).toEqual([1]);
    const table = await as(bob, ["gpus"]);
    expect(table.code).toBe(0);
    const rows = table.stdout
      .split("\n")
      .filter((line) => line.startsWith("box-h"))
      .map((line) => line.split(/ {2,}/));
    expect(rows).toEqual([
      ["box-h", "remote", expect.any(String), "0", "NVIDIA L4", "22 GiB", "ok 61°C 87% use 2.0/22.5 GiB", "free"],
      ["box-h", "remote", expect.any(String), "1", "NVIDIA L4", "22 GiB", "QUARANTINED: device probe failed: <b>gone</b>", "free"],
    ]);
  });
});

describe("jobs approve and jobs reject", () => {
  it("approves a blocked job as an admin: one line, and the job is no longer blocked", async () => {
    const id = await blockedJob(alice);
    const run = await as(admin, ["approve", id]);
    const status = (await job(id)).status;
    expect(status === "pending" || status === "running").toBe(true);
    expect([run.code, run.stdout, run.stderr]).toEqual([0, `Approved ${id}: now ${status}.\n`, ""]);
    await http("POST", "/api/training/cancel", admin, { job_id: id });
  });

  it("prints the API's answer with --format json", async () => {
    const id = await blockedJob(alice);
    const run = await as(admin, ["approve", id, "--format", "json"]);
    expect(run.code).toBe(0);
    expect(run.json()).toMatchObject({ success: true, job: { job_id: id } });
    await http("POST", "/api/training/cancel", admin, { job_id: id });
  });

  it("refuses a researcher's or a lead's approval with the API's 403 (exit 1), and the job stays blocked", async () => {
    const id = await blockedJob(alice);
    expect(refused(await as(bob, ["approve", id]))).toEqual([1, "", true]);
    expect(refused(await as(lead, ["approve", id]))).toEqual([1, "", true]);
    const own = await as(alice, ["approve", id, "--format", "json"]);
    expect(own.code).toBe(1);
    expect(JSON.parse(own.stderr).error).toMatchObject({ status: 403 });
    expect((await job(id)).status).toBe("blocked");
    await http("POST", "/api/training/cancel", admin, { job_id: id });
  });

  it("rejects a blocked job with the reason recorded", async () => {
    const id = await blockedJob(alice);
    const run = await as(admin, ["reject", id, "--reason", "too many GPUs for a test"]);
    expect([run.code, run.stdout]).toEqual([0, `Rejected ${id}: now cancelled.\n`]);
    expect(await job(id)).toMatchObject({ status: "cancelled", error_message: "Rejected: too many GPUs for a test" });
  });

  it("refuses a researcher's or a lead's rejection (exit 1), and the job stays blocked", async () => {
    const id = await blockedJob(alice);
    expect(refused(await as(bob, ["reject", id, "--reason", "mine first"]))).toEqual([1, "", true]);
    expect(refused(await as(lead, ["reject", id]))).toEqual([1, "", true]);
    expect((await job(id)).status).toBe("blocked");
    await http("POST", "/api/training/cancel", admin, { job_id: id });
  });
});

describe("jobs priority", () => {
  it("overrides a waiting job's priority as a lead, and default clears it", async () => {
    const id = await blockedJob(alice);
    const run = await as(lead, ["priority", id, "50"]);
    const after = await job(id);
    expect(after.priority_override).toBe(50);
    expect([run.code, run.stdout]).toEqual([0, `Priority of ${id}: 50 (effective ${after.effective_priority}).\n`]);
    const json = await as(lead, ["priority", id, "default", "--format", "json"]);
    expect(json.code).toBe(0);
    expect(json.json()).toMatchObject({ success: true, job: { job_id: id, priority_override: null } });
    expect((await job(id)).priority_override).toBeNull();
    await http("POST", "/api/training/cancel", admin, { job_id: id });
  });

  it("refuses a researcher's override with the API's 403 (exit 1), and the priority is unchanged", async () => {
    const id = await blockedJob(alice);
    const run = await as(alice, ["priority", id, "100", "--format", "json"]);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stderr).error).toMatchObject({ status: 403 });
    expect((await job(id)).priority_override).toBeNull();
    await http("POST", "/api/training/cancel", admin, { job_id: id });
  });

  it("exits 2 on a priority outside 0 to 100, calling nothing", async () => {
    const run = await as(lead, ["priority", "local-1", "101"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("give a whole number from 0 to 100, or default");
  });
});

describe("jobs open", () => {
  it("prints the job's dashboard page and opens nothing without --browser", async () => {
    const run = await jobs(["open", "local-3f9c2a1b04de"], { env: { SERVICE_URL: `${t.base}/`, PATH: "/nonexistent" } });
    expect([run.code, run.stdout, run.stderr]).toEqual([0, `${t.base}/#/jobs/local-3f9c2a1b04de\n`, ""]);
    const json = await jobs(["open", "local-1", "--format", "json"], { env: { SERVICE_URL: t.base } });
    expect(json.json()).toEqual({ job_id: "local-1", url: `${t.base}/#/jobs/local-1` });
  });
});

/** `jobs list --watch ...` as alice, running until stopped: its output so far, and a stop that resolves to the signal that ended it. */
function watchAsAlice(args: string[]) {
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    XDG_CONFIG_HOME: tempConfigHome(),
    SERVICE_URL: t.base,
    SERVICE_API_KEY: alice.key,
  };
  const child = spawn(process.execPath, ["runner/cli/bin.mjs", "list", "--watch", ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
  const output = { stdout: "", stderr: "" };
  child.stdout.on("data", (d: Buffer) => (output.stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (output.stderr += d.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("close", (_code, signal) => resolve(signal)));
  const stop = () => {
    child.kill("SIGINT");
    return exited;
  };
  return { output, stop };
}

describe("jobs list --watch", () => {
  it("prints the queue again when another user's job arrives, until interrupted", async () => {
    const { output, stop } = watchAsAlice(["-o", "job_id,owner,status"]);
    const context = () => output.stdout + output.stderr;
    try {
      // The first list (an empty queue says so on stderr) means the change stream is open.
      await until("the first list", () => output.stdout.includes("JOB_ID") || output.stderr.includes("No jobs."), { context });
      const id = await blockedJob(bob);
      const row = (line: string) => /^(\S+) +bob +blocked$/.exec(line)?.[1] === id;
      await until("bob's job in a new list", () => output.stdout.split("\n").some(row), { context });
      await http("POST", "/api/training/cancel", admin, { job_id: id });
    } finally {
      expect(await stop()).toBe("SIGINT");
    }
  }, 40_000);

  it("prints one line of JSON per list with --format json", async () => {
    const { output, stop } = watchAsAlice(["-o", "job_id,status", "--format", "json"]);
    const lists = () =>
      output.stdout
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { job_id: string; status: string }[]);
    const context = () => output.stdout + output.stderr;
    try {
      await until("the first list", () => lists().length > 0, { context });
      const id = await blockedJob(bob);
      await until("bob's job in a new list", () => lists().some((list) => list.some((e) => e.job_id === id && e.status === "blocked")), {
        context,
      });
      expect(output.stderr).toBe("");
      await http("POST", "/api/training/cancel", admin, { job_id: id });
    } finally {
      expect(await stop()).toBe("SIGINT");
    }
  }, 40_000);
});

describe("completion of the new commands", () => {
  it("bash completes approve, reject, priority, gpus, open and list --watch", async () => {
    const run = await jobs(["completion", "bash"]);
    expect(run.code, run.stderr).toBe(0);
    const file = join(tempConfigHome(), "jobs.bash");
    writeFileSync(file, run.stdout);
    const complete = (words: string[]) =>
      execFileSync(
        "bash",
        [
          "-c",
          `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _jobs_complete; printf '%s\\n' "\${COMPREPLY[@]}"`,
          "bash",
          file,
          ...words,
        ],
        { encoding: "utf8" },
      )
        .split("\n")
        .filter(Boolean);
    expect(complete(["jobs", "ap"])).toEqual(["approve"]);
    expect(complete(["jobs", "rej"])).toEqual(["reject"]);
    expect(complete(["jobs", "pri"])).toEqual(["priority"]);
    expect(complete(["jobs", "gp"])).toEqual(["gpus"]);
    expect(complete(["jobs", "op"])).toEqual(["open"]);
    expect(complete(["jobs", "open", "--br"])).toEqual(["--browser"]);
    expect(complete(["jobs", "reject", "--re"])).toEqual(["--reason"]);
    expect(complete(["jobs", "list", "--wa"])).toEqual(["--watch"]);
  });
});
