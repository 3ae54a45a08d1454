// A trainer's last output against the real stack and a real runner process (`runner start`): the
// runner reports a job's end as soon as its trainer has exited (node-pty's 200 ms wait no longer
// holds it, runner/agent/pty-drain.ts), and still nothing the trainer printed right before its
// exit is lost. The trainer prints SimpleTuner's recorded terminal output of a whole run and then
// a burst of numbered lines in one write, and exits at once; jobs follow each other on the same GPU.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lineToEvent } from "../../runner/agent/events";
import { OutputLines } from "../../runner/agent/output-lines";
import { spawnRunner, stopRunner, type RunnerProcess } from "../helpers/runner-process";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until as waitUntil } from "../helpers/wait";

const RECORDED = resolve("test/fixtures/simpletuner/completed-run-stdout.txt");
const BURST = 3000;

// The whole recording, then BURST numbered lines, in one write; then process.exit at once (a TTY's
// stdout is written synchronously, so all of it is in the PTY when the process is gone).
const TRAINER = `
const fs = require("node:fs");
let text = fs.readFileSync(process.argv[process.argv.indexOf("--recorded") + 1], "utf8");
for (let i = 0; i < ${BURST}; i++) text += "last line " + i + "\\n";
process.stdout.write(text);
process.exit(0);`;

/** The log lines the runner makes of `text` printed on a terminal (the PTY turns each \n into \r\n). */
function expectedLines(text: string): string[] {
  const lines: string[] = [];
  const split = new OutputLines((line) => {
    const event = lineToEvent(line);
    if (event?.type === "log") lines.push(String(event.message));
  });
  split.push(text.replaceAll("\n", "\r\n"));
  split.end();
  return lines;
}

let t: TestStack;
let admin: { key: string; cookie: string };
let runner: RunnerProcess;
const dir = mkdtempSync(join(tmpdir(), "last-output-"));
const auth = () => ({ key: admin.key });
const until = <T>(what: string, probe: () => Promise<T | undefined | null | false>) =>
  waitUntil(what, probe, { timeoutMs: 60_000, context: () => `runner output:\n${runner.output}` });

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  const created = await t.call("POST", "/api/admin/workers", { json: { name: "one-gpu-box" }, auth: auth() });
  const config = join(dir, "runner.json");
  // An admin's command runs where the box allows raw commands; unsandboxed, so it reads the recording in place.
  writeFileSync(config, JSON.stringify({ allow_raw_commands: true, sandbox: "off", work_dir: join(dir, "work") }));
  runner = spawnRunner(t.base, created.body.token, ["--local", "--config", config], {
    env: { PATH: `${resolve("test/fakes")}:${process.env.PATH}`, FAKE_NVIDIA_GPUS: "1" },
  });
  await until("the runner to register", async () => runner.output.includes("registered as worker"));
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "last-words" }, auth: auth() })).status).toBe(201);
  const trainer = {
    "--num_processes": 1,
    "--trainer_command": JSON.stringify([process.execPath, "-e", TRAINER, "--"]),
    "--recorded": RECORDED,
  };
  expect((await t.call("PUT", "/api/configs/last-words", { json: { config: trainer }, auth: auth() })).status).toBe(200);
}, 120_000);
afterAll(async () => {
  await stopRunner(runner?.child);
  await t?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("a trainer's last output", () => {
  it("reaches the job's events and its output.log whole and in order when the trainer exits right after printing it, job after job on one GPU", async () => {
    const jobs: string[] = [];
    for (let i = 0; i < 3; i++) {
      const reply = await t.call("POST", "/api/queue/submit", { json: { config_name: "last-words", target: "local" }, auth: auth() });
      expect(reply.status).toBe(200);
      jobs.push(reply.body.job_id);
    }
    const expected = expectedLines(readFileSync(RECORDED, "utf8") + Array.from({ length: BURST }, (_, i) => `last line ${i}\n`).join(""));
    // The recording's own last words are among what is checked.
    expect(expected.filter((line) => line.endsWith("[INFO] Model components unloaded successfully."))).toHaveLength(1);
    expect(expected.at(-1)).toBe(`last line ${BURST - 1}`);
    for (const jobId of jobs) {
      const entry = await until(`job ${jobId} to end`, async () => {
        const job = (await t.call("GET", `/api/queue/jobs/${jobId}`, { auth: auth() })).body;
        return ["completed", "failed", "cancelled"].includes(job.status) && job;
      });
      expect(entry.status).toBe("completed");
      const events: any[] = [];
      for (let since = 0; ;) {
        const page = (await t.call("GET", `/api/training/events?job_id=${jobId}&since_index=${since}&limit=1000`, { auth: auth() })).body;
        events.push(...page.events);
        if (!page.events.length || page.next_cursor === null) break;
        since = page.next_index;
      }
      const logged = events.filter((e) => e.type === "log").map((e) => e.message);
      expect(logged.length).toBe(expected.length);
      expect(logged).toEqual(expected);
      // Every event once, in the order the trainer printed it.
      expect(events.map((e) => e.index)).toEqual(events.map((_, i) => i));
      const log = readFileSync(join(dir, "work", "jobs", jobId, "output.log"), "utf8");
      expect(log.endsWith(`last line ${BURST - 1}\r\n`)).toBe(true);
    }
    // One GPU: each job started only after the one before it had ended (never two trainers on it).
    const entries = await Promise.all(jobs.map(async (id) => (await t.call("GET", `/api/queue/jobs/${id}`, { auth: auth() })).body));
    for (let i = 1; i < entries.length; i++)
      expect(Date.parse(entries[i].started_at)).toBeGreaterThanOrEqual(Date.parse(entries[i - 1].completed_at));
  }, 180_000);
});
