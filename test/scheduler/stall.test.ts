// Stall detection (issue 30, Build 2) over real HTTP: a remote worker runs jobs and posts their
// steps and phases as a runner does; a job that stops stepping outside a validation or checkpoint
// is marked stalled (a training.stalled event, stalled_since on the job and in the listing), its
// owner's policy applies (fail, stop_and_requeue), its webhooks hear of it, and its next step clears
// the mark; `jobs status` and `jobs list` show it. Attackers: a researcher cannot change the rules
// nor another user's policy, and another worker cannot post steps for a job it does not run. The stall threshold is made small (2 s) for the test.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerWorker } from "../helpers/boxes";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";
import { jobs } from "../helpers/cli";

let t: TestStack;
let receiver: Server | undefined;
let admin: { key: string; cookie: string };
let rita: { key: string; id: number };
let oscar: { key: string; id: number };
let box: { id: number; token: string };
let other: { id: number; token: string };
const gpus = [0, 1, 2, 3].map((index) => ({ index, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }));

async function call(method: string, path: string, key: string, json?: unknown) {
  const reply = await t.call(method, path, { auth: { key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
}

const worker = (name: string, pool: string) => registerWorker(t, admin.key, name, "remote", gpus, { pool });

/** A remote worker runs one job at a time: each job here gets a box of its own, in its own pool. */
const boxes = new Map<string, { id: number; token: string }>();
/** Submits as rita to the box of `pool` (made on first use); the job id, running there. */
async function submit(pool = "a") {
  if (!boxes.has(pool)) boxes.set(pool, await worker(`box-${pool}`, pool));
  const answer = await call("POST", "/api/queue/submit", rita.key, { config_name: "plain", target: "worker", worker_labels: { pool } });
  expect(answer.status).toBe("running");
  return answer.job_id as string;
}
const job = (id: string, key = rita.key) => call("GET", `/api/queue/jobs/${id}`, key);
const listed = async (id: string) => ((await call("GET", "/api/queue?limit=1000", rita.key)).jobs as any[]).find((j) => j.job_id === id);
const events = async (id: string) => (await call("GET", `/api/training/events?job_id=${id}&since_index=0`, rita.key)).events as any[];
const seqs = new Map<string, number>();
const post = (as: { token: string }, id: string, list: Record<string, unknown>[], attempt = 1) =>
  t.call("POST", `/api/workers/jobs/${id}/events`, {
    json: {
      attempt,
      events: list.map((event) => {
        const seq = seqs.get(`${id}#${attempt}`) ?? 0;
        seqs.set(`${id}#${attempt}`, seq + 1);
        return { seq, event };
      }),
    },
    auth: { bearer: as.token },
  });
const step = (n: number) => ({ type: "training.progress", data: { step: n, total_steps: 100 } });
const stalled = (id: string) =>
  until(`job ${id} to be marked stalled`, async () => {
    const shown = await job(id);
    return shown.stalled_since !== null && shown;
  });

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  rita = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "rita");
  oscar = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "oscar");
  await call("POST", "/api/queue/concurrency", admin.key, { worker_heartbeat_timeout_seconds: 86_400, user_max_concurrent: 20 });
  await call("POST", "/api/configs/environments", admin.key, { name: "plain" });
  await call("PUT", "/api/configs/plain", admin.key, { config: { "--num_processes": 1 } });
  expect(await call("PUT", "/api/admin/stall-detection", admin.key, { min_seconds: 2 })).toEqual({
    min_seconds: 2,
    factor: 5,
    policy: "notify",
  });
  box = await worker("box-a", "a");
  boxes.set("a", box);
  other = await worker("other-box", "b");
});
afterAll(async () => {
  receiver?.close();
  await t?.stop();
});

describe("a job that stops stepping", () => {
  it("is marked stalled with an event and stalled_since, and its next step clears the mark with an event", async () => {
    const id = await submit();
    await post(box, id, [step(1)]);
    await post(box, id, [step(2)]);
    const shown = await stalled(id);
    const mark = (await events(id)).find((e) => e.type === "training.stalled");
    expect(mark.data).toMatchObject({ last_step: 2, threshold_seconds: 2, policy: "notify", since: shown.stalled_since });
    expect(mark.level).toBe("warning");
    expect((await listed(id)).stalled_since).toBe(shown.stalled_since);
    expect(shown.status).toBe("running");
    // The CLI says so too.
    const env = { SERVICE_URL: t.base, SERVICE_API_KEY: rita.key };
    const status = await jobs(["status", id], { env });
    expect(status.code).toBe(0);
    expect(status.stdout).toContain(`running, STALLED: no training step since ${shown.stalled_since}`);
    const list = await jobs(["list"], { env });
    expect(list.stdout.split("\n").find((l) => l.startsWith(id))).toMatch(/running STALLED/);

    // Another worker cannot post steps for it: refused, and the mark stays.
    expect((await post(other, id, [step(3)])).status).toBe(404);
    expect((await job(id)).stalled_since).toBe(shown.stalled_since);

    expect((await post(box, id, [step(3)])).status).toBe(200);
    expect((await job(id)).stalled_since).toBeNull();
    const cleared = (await events(id)).find((e) => e.type === "training.stall_cleared");
    expect(cleared.data).toEqual({ step: 3, stalled_since: shown.stalled_since });
    await post(box, id, [step(100)]);
    expect(
      (await t.call("POST", `/api/workers/jobs/${id}/finish`, { json: { status: "completed", exit_code: 0 }, auth: { bearer: box.token } }))
        .status,
    ).toBe(200);
  });

  it("is not marked during a long validation or a checkpoint save that began before another job's last step", async () => {
    const validating = await submit("v");
    const saving = await submit("c");
    const quiet = await submit("q");
    await post(boxes.get("v")!, validating, [step(1), { type: "validation.started", data: { step: 1 } }]);
    await post(boxes.get("c")!, saving, [step(1), { type: "checkpoint.started", data: { step: 1 } }]);
    // Its last step comes after both phases began: once it is stalled, both have been quiet longer.
    await post(boxes.get("q")!, quiet, [step(1)]);
    await stalled(quiet);
    expect((await job(validating)).stalled_since).toBeNull();
    expect((await job(saving)).stalled_since).toBeNull();
    expect((await events(validating)).some((e) => e.type === "training.stalled")).toBe(false);
    for (const id of [validating, saving, quiet]) await call("POST", "/api/training/cancel", rita.key, { job_id: id });
  });
});

describe("its webhooks", () => {
  it("send job.stalled and job.stall_cleared to the job's receivers", async () => {
    const received: any[] = [];
    receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () => {
        received.push(JSON.parse(body));
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver!.listen(0, "127.0.0.1", r));
    const hooks = JSON.stringify([
      { webhook_type: "raw", callback_url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` },
    ]);
    await call("PUT", "/api/admin/webhooks", admin.key, { allow_private_targets: true });
    await call("POST", "/api/configs/environments", admin.key, { name: "hooked" });
    await call("PUT", "/api/configs/hooked", admin.key, { config: { "--num_processes": 1, "--webhook_config": hooks } });
    boxes.set("w", await worker("box-w", "w"));
    const answer = await call("POST", "/api/queue/submit", rita.key, {
      config_name: "hooked",
      target: "worker",
      worker_labels: { pool: "w" },
    });
    const id = answer.job_id as string;
    await post(boxes.get("w")!, id, [step(1)]);
    const shown = await stalled(id);
    const message = await until("the job.stalled webhook", async () => received.find((m) => m.type === "job.stalled"));
    expect(message).toMatchObject({
      job_id: id,
      data: { since: shown.stalled_since, last_step: 1, threshold_seconds: 2, policy: "notify" },
    });
    await post(boxes.get("w")!, id, [step(2)]);
    const cleared = await until("the job.stall_cleared webhook", async () => received.find((m) => m.type === "job.stall_cleared"));
    expect(cleared).toMatchObject({ job_id: id, data: { step: 2, stalled_since: shown.stalled_since } });
    await call("POST", "/api/training/cancel", rita.key, { job_id: id });
  });
});

describe("the owner's policy", () => {
  it("fail ends the stalled job failed", async () => {
    expect(await call("PUT", `/api/users/${rita.id}/stall-policy`, rita.key, { policy: "fail" })).toEqual({
      user_id: rita.id,
      policy: "fail",
      effective: "fail",
    });
    const id = await submit("f");
    await post(boxes.get("f")!, id, [step(1)]);
    const failed = await until("the stalled job to fail", async () => {
      const shown = await job(id);
      return shown.status === "failed" && shown;
    });
    expect(failed.error_message).toMatch(/^Stalled: no training step since .* \(step 1; threshold 2 s\)$/);
    expect((await events(id)).find((e) => e.type === "training.stalled").data.policy).toBe("fail");
  });

  it("stop_and_requeue asks the trainer to stop with a checkpoint, and the stop's end queues the job again", async () => {
    await call("PUT", `/api/users/${rita.id}/stall-policy`, rita.key, { policy: "stop_and_requeue" });
    const id = await submit("s");
    const box = boxes.get("s")!;
    await post(box, id, [step(1)]);
    await stalled(id);
    const heartbeat = await t.call("POST", "/api/workers/heartbeat", { json: {}, auth: { bearer: box.token } });
    expect(heartbeat.body.commands).toContainEqual(expect.objectContaining({ job_id: id, command: "stop" }));
    // The runner's stop ends the trainer as a graceful stop does: completed, which here means "queue it again".
    const finished = await t.call("POST", `/api/workers/jobs/${id}/finish`, {
      json: { status: "completed", exit_code: 0 },
      auth: { bearer: box.token },
    });
    expect(finished.body).toEqual({ job_id: id, status: "pending" });
    const again = await until("the job to run again", async () => {
      const shown = await job(id);
      return shown.status === "running" && shown;
    });
    expect(again).toMatchObject({ attempt: 2, stalled_since: null });
    expect(again.error_message).toMatch(/^stalled: stopped with a checkpoint; retrying \(attempt 2 of 3\)/);
    await call("PUT", `/api/users/${rita.id}/stall-policy`, rita.key, { policy: null });
    await call("POST", "/api/training/cancel", rita.key, { job_id: id });
  });
});

describe("attackers", () => {
  it("a researcher cannot change the thresholds: 403, unchanged", async () => {
    const before = await call("GET", "/api/admin/stall-detection", admin.key);
    const refused = await t.call("PUT", "/api/admin/stall-detection", { auth: { key: rita.key }, json: { min_seconds: 86_400 } });
    expect(refused.status).toBe(403);
    expect(await call("GET", "/api/admin/stall-detection", admin.key)).toEqual(before);
  });

  it("a researcher cannot read or set another user's policy: 403, unchanged", async () => {
    await call("PUT", `/api/users/${rita.id}/stall-policy`, rita.key, { policy: "notify" });
    const set = await t.call("PUT", `/api/users/${rita.id}/stall-policy`, { auth: { key: oscar.key }, json: { policy: "fail" } });
    expect(set.status).toBe(403);
    expect((await t.call("GET", `/api/users/${rita.id}/stall-policy`, { auth: { key: oscar.key } })).status).toBe(403);
    expect((await call("GET", `/api/users/${rita.id}/stall-policy`, rita.key)).policy).toBe("notify");
    // An admin may set anyone's.
    expect((await call("PUT", `/api/users/${oscar.id}/stall-policy`, admin.key, { policy: "fail" })).effective).toBe("fail");
  });

  it("bad values are refused with a 422 that names the field, and change nothing", async () => {
    const before = await call("GET", "/api/admin/stall-detection", admin.key);
    for (const body of [{ min_seconds: 0 }, { factor: "five" }, { policy: "explode" }, { nope: 1 }]) {
      const reply = await t.call("PUT", "/api/admin/stall-detection", { auth: { key: admin.key }, json: body });
      expect(reply.status).toBe(422);
    }
    expect(
      (await t.call("PUT", `/api/users/${rita.id}/stall-policy`, { auth: { key: rita.key }, json: { policy: "<b>x</b>" } })).status,
    ).toBe(422);
    expect(await call("GET", "/api/admin/stall-detection", admin.key)).toEqual(before);
  });
});

describe("a restart of the service", () => {
  it("counts a job's quiet time from the service's start, not from a step before it went down", async () => {
    await call("PUT", "/api/admin/stall-detection", admin.key, { min_seconds: 3600 });
    const id = await submit("r");
    await post(boxes.get("r")!, id, [step(1)]);
    const dataDir = t.dataDir;
    await t.stop({ keepData: true });
    // Down for longer than the threshold set below: counted from the step, the job would be stalled at once.
    await new Promise((r) => setTimeout(r, 2500));
    const restartedAt = Date.now();
    t = await startTestStack(dataDir);
    await call("PUT", "/api/admin/stall-detection", admin.key, { min_seconds: 2 });
    const shown = await stalled(id);
    expect(Date.parse(shown.stalled_since)).toBeGreaterThanOrEqual(restartedAt);
    const mark = (await events(id)).find((e) => e.type === "training.stalled");
    expect(mark.data).toMatchObject({ last_step: 1, since: shown.stalled_since });
  });
});
