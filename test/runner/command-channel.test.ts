// A trainer command over the worker channel, against the real stack (issue 31: command -> trainer):
// the edge hands a new command to the job's runner on its channel right before the `wake`, only to
// that job's worker, in the heartbeat answer's shape; the heartbeat still carries it until the
// runner acknowledges it. Then a real runner (`runner start`) hands a command to its trainer.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { gpuInventory, registerWorker } from "../helpers/boxes";
import { spawnRunner, stopRunner, type RunnerProcess } from "../helpers/runner-process";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
const dir = mkdtempSync(join(tmpdir(), "command-channel-"));
const auth = () => ({ key: admin.key });

/** The worker channel as a runner opens it, and every message it has received so far. */
function openChannel(token: string): Promise<{ socket: WebSocket; messages: string[] }> {
  return new Promise((done, fail) => {
    const socket = new WebSocket(`${t.base.replace("http", "ws")}/api/workers/channel`, { headers: { authorization: `Bearer ${token}` } });
    const messages: string[] = [];
    socket.on("message", (data) => messages.push(String(data)));
    socket.on("open", () => done({ socket, messages }));
    socket.on("unexpected-response", (_req, res) => fail(new Error(`channel refused: ${res.statusCode}`)));
    socket.on("error", fail);
  });
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  await t.call("POST", "/api/queue/concurrency", { json: { worker_heartbeat_timeout_seconds: 86_400 }, auth: auth() });
  await t.call("POST", "/api/configs/environments", { json: { name: "one-gpu" }, auth: auth() });
  await t.call("PUT", "/api/configs/one-gpu", { json: { config: { "--num_processes": 1 } }, auth: auth() });
});
afterAll(async () => {
  await t?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("a trainer command on the worker channel", () => {
  it("goes to the job's own runner right before its wake, as the heartbeat carries it, and to no other worker", async () => {
    const mine = await registerWorker(t, admin.key, "box-a", "remote", gpuInventory(1, "NVIDIA A100"), { pool: "a" });
    const other = await registerWorker(t, admin.key, "box-b", "remote", gpuInventory(1, "NVIDIA A100"), { pool: "b" });
    const channel = await openChannel(mine.token);
    const otherChannel = await openChannel(other.token);
    const job = await t.call("POST", "/api/queue/submit", {
      json: { config_name: "one-gpu", target: "worker", worker_labels: { pool: "a" } },
      auth: auth(),
    });
    expect(job.body.status).toBe("running");
    const jobId = job.body.job_id as string;
    await until("the assignment's wake", () => channel.messages.includes("wake"));
    channel.messages.length = 0;
    otherChannel.messages.length = 0;

    expect((await t.call("POST", "/api/training/validation/run", { json: { job_id: jobId }, auth: auth() })).status).toBe(200);
    await until("the command's messages", () => channel.messages.length >= 2);
    const heartbeat = await t.call("POST", "/api/workers/heartbeat", { json: {}, auth: { bearer: mine.token } });
    expect(heartbeat.body.commands).toEqual([{ id: expect.any(Number), job_id: jobId, command: "validation" }]);
    expect(channel.messages).toEqual([JSON.stringify({ commands: heartbeat.body.commands }), "wake"]);
    expect(otherChannel.messages).toEqual([]);

    // Acknowledged with a heartbeat, it is not sent again; the channel's copy changed nothing there.
    const acked = await t.call("POST", "/api/workers/heartbeat", {
      json: { acked_commands: [heartbeat.body.commands[0].id] },
      auth: { bearer: mine.token },
    });
    expect(acked.body.commands).toEqual([]);
    channel.socket.close();
    otherChannel.socket.close();
  });

  it("refuses a researcher's command to another's running job (403), an unknown job (404) and an ended one (409), and nothing reaches a runner", async () => {
    // The command's write checks the owner itself (one round trip): a refused one must store nothing.
    const box = await registerWorker(t, admin.key, "box-c", "remote", gpuInventory(1, "NVIDIA A100"), { pool: "c" });
    const channel = await openChannel(box.token);
    const owner = await createUserWithKey(t, admin, "researcher", "cmd-owner");
    const intruder = await createUserWithKey(t, admin, "researcher", "cmd-intruder");
    const job = await t.call("POST", "/api/queue/submit", {
      json: { config_name: "one-gpu", target: "worker", worker_labels: { pool: "c" } },
      auth: { key: owner.key },
    });
    expect(job.body.status).toBe("running");
    const jobId = job.body.job_id as string;
    await until("the assignment's wake", () => channel.messages.includes("wake"));
    channel.messages.length = 0;

    for (const path of ["/api/training/validation/run", "/api/training/checkpoint/run", "/api/training/stop"]) {
      const refused = await t.call("POST", path, { json: { job_id: jobId }, auth: { key: intruder.key } });
      expect([refused.status, refused.body.code], path).toEqual([403, "forbidden"]);
      const unknown = await t.call("POST", path, { json: { job_id: "local-000000000000" }, auth: { key: intruder.key } });
      expect([unknown.status, unknown.body.code], path).toEqual([404, "not_found"]);
    }
    // The intruder has no running job of their own to fall back to.
    expect((await t.call("POST", "/api/training/validation/run", { auth: { key: intruder.key } })).body.code).toBe("no_active_job");
    const heartbeat = await t.call("POST", "/api/workers/heartbeat", { json: {}, auth: { bearer: box.token } });
    expect(heartbeat.body.commands).toEqual([]);
    expect(channel.messages).toEqual([]);

    // The owner's own command is taken; once the job has ended, a command is 409 and stores nothing.
    expect((await t.call("POST", "/api/training/validation/run", { json: { job_id: jobId }, auth: { key: owner.key } })).status).toBe(200);
    expect((await t.call("POST", "/api/training/cancel", { json: { job_id: jobId }, auth: { key: owner.key } })).status).toBe(200);
    const ended = await t.call("POST", "/api/training/checkpoint/run", { json: { job_id: jobId }, auth: { key: owner.key } });
    expect([ended.status, ended.body.code]).toEqual([409, "job_not_running"]);
    channel.socket.close();
  });

  it("reaches the trainer through a real runner: its signal file counts the validation once", async () => {
    const created = await t.call("POST", "/api/admin/workers", { json: { name: "runner-box" }, auth: auth() });
    const config = join(dir, "runner.json");
    writeFileSync(config, JSON.stringify({ allow_raw_commands: true, sandbox: "off", work_dir: join(dir, "work") }));
    // The trainer prints each change of its signal file as it reads it, and exits once a validation is counted.
    const trainer = `
const fs = require("node:fs");
const file = process.env.SIMPLETUNER_ACCELERATE_SIGNAL_FILE; let last = "";
console.log(JSON.stringify({ type: "trainer.ready" }));
setInterval(() => {
  let text = ""; try { text = fs.readFileSync(file, "utf8"); } catch {}
  if (text === last) return; last = text;
  console.log("signal file: " + text);
  if (JSON.parse(text || "{}").manual_validation > 0) setTimeout(() => process.exit(0), 300);
}, 5);`;
    await t.call("POST", "/api/configs/environments", { json: { name: "listens" }, auth: auth() });
    await t.call("PUT", "/api/configs/listens", {
      json: { config: { "--num_processes": 0, "--trainer_command": JSON.stringify([process.execPath, "-e", trainer, "--"]) } },
      auth: auth(),
    });
    const runner: RunnerProcess = spawnRunner(t.base, created.body.token, ["--config", config, "--label", "pool=runner"], {
      env: { PATH: `${resolve("test/fakes")}:${process.env.PATH}`, FAKE_NVIDIA_GPUS: "0" },
    });
    try {
      await until("the runner to register", () => runner.output.includes("registered as worker"), {
        timeoutMs: 30_000,
        context: () => runner.output,
      });
      const job = await t.call("POST", "/api/queue/submit", {
        json: { config_name: "listens", target: "worker", worker_labels: { pool: "runner" } },
        auth: auth(),
      });
      const jobId = job.body.job_id as string;
      const events = async () =>
        (await t.call("GET", `/api/training/events?job_id=${jobId}&limit=1000`, { auth: auth() })).body.events as any[];
      await until("the trainer to be ready", async () => (await events()).some((e) => e.type === "trainer.ready"), {
        timeoutMs: 30_000,
        context: () => runner.output,
      });
      expect((await t.call("POST", "/api/training/validation/run", { json: { job_id: jobId }, auth: auth() })).status).toBe(200);
      const ended = await until(
        "the job to end",
        async () => {
          const entry = (await t.call("GET", `/api/queue/jobs/${jobId}`, { auth: auth() })).body;
          return ["completed", "failed", "cancelled"].includes(entry.status) && entry;
        },
        { timeoutMs: 30_000, context: () => runner.output },
      );
      expect(ended.status).toBe("completed");
      const seen = (await events()).filter((e) => e.type === "log" && e.message.startsWith("signal file: ")).map((e) => e.message);
      // Handed over once (the channel's copy and the heartbeat's are the same command).
      expect(seen.at(-1)).toBe('signal file: {"manual_validation":1,"manual_checkpoint":0}');
      expect(seen.filter((line: string) => line.includes('"manual_validation":2'))).toEqual([]);
    } finally {
      await stopRunner(runner.child);
    }
  }, 120_000);
});
