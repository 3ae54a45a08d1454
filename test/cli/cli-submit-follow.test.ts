// `jobs submit --follow` and `jobs logs --tail/--since <duration>`: the binary run as a subprocess
// (no terminal) against the real stack with its local runner, whose demo trainer ends CPU jobs in
// a second or two. Exit codes follow the job's end; each outcome is read back over HTTP.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jobs } from "../helpers/cli";
import { createUserWithKey, setUpAdmin, startStackWithLocalRunner, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let rita: { key: string; id: number };
let olga: { key: string; id: number };
const runnerDir = mkdtempSync(join(tmpdir(), "cli-submit-follow-runner-"));

const asRita = () => ({ SERVICE_URL: t.base, SERVICE_API_KEY: rita.key });
const http = async (method: string, path: string, who: { key: string }, json?: unknown) => {
  const reply = await t.call(method, path, { auth: { key: who.key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
};
async function environment(name: string, changes: Record<string, unknown>) {
  await http("POST", "/api/configs/environments", admin, { name, from_example: "demo" });
  const { config } = await http("GET", `/api/configs/${name}`, admin);
  await http("PUT", `/api/configs/${name}`, admin, { config: { ...config, ...changes } });
}
const ritasJobs = async () => (await http("GET", "/api/queue?include_completed=true&limit=1000", rita)).jobs as any[];
const jobOf = async (id: string) => (await http("GET", `/api/queue/jobs/${id}`, rita)) as any;
const apiEvents = async (jobId: string) => (await http("GET", `/api/training/events?job_id=${jobId}&limit=1000`, rita)).events as any[];
/** The job id `submit --follow` names first on stderr. */
const submittedId = (stderr: string) => /^(local-[0-9a-f]+) /.exec(stderr)?.[1] ?? "";
const types = (stdout: string) =>
  stdout
    .trimEnd()
    .split("\n")
    .map((line) => line.split(" ")[1]);

beforeAll(async () => {
  t = await startStackWithLocalRunner(runnerDir);
  admin = await setUpAdmin(t);
  rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
  olga = await createUserWithKey(t, { key: admin.key }, "researcher", "olga");
  await environment("quick", { "--max_train_steps": 6, "--demo_step_ms": 10, "--validation_steps": 0, "--checkpointing_steps": 0 });
  await environment("slow", { "--max_train_steps": 400, "--demo_step_ms": 100, "--validation_steps": 0, "--checkpointing_steps": 0 });
  // The demo trainer refuses a step time that is not a number at start-up: the job fails at once. (An option the
  // service knows, such as a batch of 0, is refused when the environment is saved.)
  await environment("broken", { "--demo_step_ms": "slow" });
}, 60_000);
afterAll(async () => {
  await t?.stop();
  rmSync(runnerDir, { recursive: true, force: true });
});

describe("jobs submit --follow", () => {
  it("prints a completed job's events and exits 0; JSON lines with --format json", async () => {
    const text = await jobs(["submit", "quick", "--follow"], { env: asRita(), timeoutMs: 60_000 });
    expect(text.code, text.stderr).toBe(0);
    const id = submittedId(text.stderr);
    expect((await jobOf(id)).status).toBe("completed");
    const events = await apiEvents(id);
    expect(events.length).toBeGreaterThan(6);
    expect(types(text.stdout)).toEqual(events.map((e) => e.type));
    expect(text.stderr.split("\n").filter(Boolean)).toEqual([expect.stringMatching(new RegExp(`^${id} `)), `job ${id} ended: completed`]);

    const json = await jobs(["submit", "quick", "--follow", "--format", "json"], { env: asRita(), timeoutMs: 60_000 });
    expect(json.code, json.stderr).toBe(0);
    const jsonId = submittedId(json.stderr);
    expect(json.jsonLines()).toEqual(await apiEvents(jsonId));
    expect(json.stderr.endsWith(`job ${jsonId} ended: completed\n`)).toBe(true);
  }, 90_000);

  it("exits 1 when the job is cancelled while it is followed, saying so on stderr", async () => {
    let cancelled: Promise<unknown> | null = null;
    const run = await jobs(["submit", "slow", "--follow"], {
      env: asRita(),
      timeoutMs: 60_000,
      onStdout: () => {
        cancelled ??= (async () => {
          const running = (await ritasJobs()).find((j) => j.config_name === "slow" && j.status === "running");
          await http("POST", "/api/training/cancel", rita, { job_id: running.job_id });
        })();
      },
    });
    await cancelled;
    // Cancelling a running local job pauses local starts until the queue is processed again.
    await http("POST", "/api/queue/process", admin);
    const id = submittedId(run.stderr);
    const job = await jobOf(id);
    expect(job.status).toBe("cancelled");
    expect(run.code).toBe(1);
    expect(run.stdout).not.toBe("");
    expect(run.stderr.endsWith(`error: job ${id} ended: cancelled: ${job.error_message}\n`)).toBe(true);
    const stored = (await apiEvents(id)).map((e) => e.type);
    // Events the trainer sends while it stops are stored after the end was streamed.
    expect(stored.slice(0, types(run.stdout).length)).toEqual(types(run.stdout));
  }, 90_000);

  it("exits 1 when the job fails, with the job's error on stderr (a JSON error job_failed with --format json)", async () => {
    const run = await jobs(["submit", "broken", "--follow"], { env: asRita(), timeoutMs: 60_000 });
    const id = submittedId(run.stderr);
    const job = await jobOf(id);
    expect(job.status).toBe("failed");
    expect(job.error_message).toBeTruthy();
    expect(run.code).toBe(1);
    expect(run.stderr.endsWith(`error: job ${id} ended: failed: ${job.error_message}\n`)).toBe(true);

    const json = await jobs(["submit", "broken", "--follow", "--format", "json"], { env: asRita(), timeoutMs: 60_000 });
    expect(json.code).toBe(1);
    const jsonId = submittedId(json.stderr);
    const error = JSON.parse(json.stderr.trimEnd().split("\n").at(-1)!).error;
    expect(error).toEqual({ code: "job_failed", detail: `job ${jsonId} ended: failed: ${(await jobOf(jsonId)).error_message}` });
  }, 90_000);

  it("refuses --follow with --dry-run as a usage error (exit 2), storing nothing", async () => {
    const before = (await ritasJobs()).length;
    for (const extra of [[], ["--cloud", "replicate"]]) {
      const run = await jobs(["submit", "quick", "--follow", "--dry-run", ...extra], { env: asRita() });
      expect([run.code, run.stdout, run.stderr]).toEqual([
        2,
        "",
        "error: --follow cannot go with --dry-run: a dry run starts no job to follow\n",
      ]);
    }
    expect((await ritasJobs()).length).toBe(before);
  });
});

describe("jobs logs --tail and --since", () => {
  let done: string;
  let events: any[];
  beforeAll(async () => {
    done = (await http("POST", "/api/queue/submit", rita, { config_name: "quick" })).job_id;
    await until(`job ${done} to end`, async () => (await jobOf(done)).status === "completed", { timeoutMs: 60_000 });
    events = await apiEvents(done);
    expect(events.length).toBeGreaterThan(5);
  }, 90_000);

  it("--tail 3 prints exactly the last 3 events; with --since, the last N of those; with --follow, then the end", async () => {
    const json = await jobs(["logs", done, "--tail", "3", "--format", "json"], { env: asRita() });
    expect([json.code, json.stderr]).toEqual([0, ""]);
    expect(json.jsonLines()).toEqual(events.slice(-3));
    const text = await jobs(["logs", done, "--tail", "3"], { env: asRita() });
    expect(types(text.stdout)).toEqual(events.slice(-3).map((e) => e.type));
    const window = await jobs(["logs", done, "--since", "1", "--tail", "2", "--format", "json"], { env: asRita() });
    expect(window.jsonLines()).toEqual(events.slice(1).slice(-2));
    const none = await jobs(["logs", done, "--tail", "0"], { env: asRita() });
    expect([none.code, none.stdout]).toEqual([0, ""]);
    const followed = await jobs(["logs", done, "--tail", "3", "--follow", "--format", "json"], { env: asRita() });
    expect([followed.code, followed.stderr]).toEqual([0, `job ${done} ended: completed\n`]);
    expect(followed.jsonLines()).toEqual(events.slice(-3));
  });

  it("--since 1h prints all of a fresh job's events; --since 1s two seconds after it ended prints none", async () => {
    const hour = await jobs(["logs", done, "--since", "1h", "--format", "json"], { env: asRita() });
    expect(hour.code, hour.stderr).toBe(0);
    expect(hour.jsonLines()).toEqual(events);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const second = await jobs(["logs", done, "--since", "1s"], { env: asRita() });
    expect([second.code, second.stdout, second.stderr]).toEqual([0, "", ""]);
    const followed = await jobs(["logs", done, "--since", "1s", "--follow"], { env: asRita() });
    expect([followed.code, followed.stdout, followed.stderr]).toEqual([0, "", `job ${done} ended: completed\n`]);
  });

  it("refuses a bad --since or --tail (exit 2) naming the accepted forms", async () => {
    for (const since of ["10x", "1.5h", "-5m", "", "m", "1 h"]) {
      const run = await jobs(["logs", done, "--since", since], { env: asRita() });
      expect([run.code, run.stdout, run.stderr], since).toEqual([
        2,
        "",
        `error: --since must be an event index (0 or more) or a duration such as 30s, 10m, 2h or 1d, not ${JSON.stringify(since)}\n`,
      ]);
    }
    for (const tail of ["abc", "-1", "2.5", ""]) {
      const run = await jobs(["logs", done, "--tail", tail], { env: asRita() });
      expect([run.code, run.stdout, run.stderr], tail).toEqual([
        2,
        "",
        `error: --tail must be a number of events (0 or more), not ${JSON.stringify(tail)}\n`,
      ]);
    }
  });

  it("--tail on another user's job is the API's 403 (exit 1) and prints none of its events", async () => {
    const theirs = await t.call("GET", `/api/training/events?job_id=${done}`, { auth: { key: olga.key } });
    expect(theirs.status).toBe(403);
    const asOlga = { SERVICE_URL: t.base, SERVICE_API_KEY: olga.key };
    for (const args of [
      ["logs", done, "--tail", "3"],
      ["logs", done, "--tail", "3", "--follow"],
      ["logs", done, "--since", "1h"],
    ]) {
      const run = await jobs(args, { env: asOlga });
      expect([run.code, run.stdout, run.stderr], args.join(" ")).toEqual([1, "", `error: ${theirs.body.detail}\n`]);
    }
  });
});
