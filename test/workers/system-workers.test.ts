// GET /api/system/workers over real HTTP: every level sees the workers and which job holds each
// GPU; nothing secret (token, hash, host) leaves; anonymous callers are refused.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let viewer: { key: string };
let researcher: { key: string };
let boxToken: string;
let remoteToken: string;
const gpus = (n: number, name: string) => Array.from({ length: n }, (_, index) => ({ index, name, memory_mb: 24576 }));

async function createWorker(name: string): Promise<string> {
  const created = await t.call("POST", "/api/admin/workers", { json: { name }, auth: { key: admin.key } });
  expect(created.status).toBe(201);
  return created.body.token as string;
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  viewer = await createUserWithKey(t, { cookie: admin.cookie }, "viewer");
  researcher = await createUserWithKey(t, { cookie: admin.cookie }, "researcher");
  await t.call("POST", "/api/queue/concurrency", { json: { worker_heartbeat_timeout_seconds: 86_400 }, auth: { key: admin.key } });
  boxToken = await createWorker("box-1");
  remoteToken = await createWorker("remote-1");
  await createWorker("never-registered");
  const local = await t.call("POST", "/api/workers/register", {
    json: { role: "local", gpus: gpus(3, "NVIDIA RTX 4090"), hostname: "secret-host", host_stats: { load_avg_5min: 1 } },
    auth: { bearer: boxToken },
  });
  expect(local.status).toBe(200);
  const remote = await t.call("POST", "/api/workers/register", {
    json: { role: "remote", labels: { gpu: "a100", zone: "eu" }, gpus: gpus(2, "NVIDIA A100"), hostname: "secret-remote" },
    auth: { bearer: remoteToken },
  });
  expect(remote.status).toBe(200);
  await t.call("POST", "/api/configs/environments", { json: { name: "one-gpu" }, auth: { key: researcher.key } });
  await t.call("PUT", "/api/configs/one-gpu", { json: { config: { "--num_processes": 1 } }, auth: { key: researcher.key } });
});
afterAll(async () => {
  await t?.stop();
});

describe("GET /api/system/workers", () => {
  it("shows a viewer every worker with labels, status, GPUs and the job holding each", async () => {
    const local = await t.call("POST", "/api/queue/submit", {
      json: { config_name: "one-gpu", target: "local" },
      auth: { key: researcher.key },
    });
    expect(local.body).toMatchObject({ status: "running", allocated_gpus: [0] });
    const remote = await t.call("POST", "/api/queue/submit", {
      json: { config_name: "one-gpu", target: "worker", worker_labels: { gpu: "a100" } },
      auth: { key: researcher.key },
    });
    expect(remote.body).toMatchObject({ status: "running" });

    const answer = await t.call("GET", "/api/system/workers", { auth: { key: viewer.key } });
    expect(answer.status).toBe(200);
    const [box, never, remoteWorker] = answer.body.workers;
    expect(box).toMatchObject({
      name: "box-1",
      role: "local",
      status: "busy",
      labels: {},
      gpus: [
        { index: 0, name: "NVIDIA RTX 4090", memory_mb: 24576, job_id: local.body.job_id },
        { index: 1, name: "NVIDIA RTX 4090", memory_mb: 24576, job_id: null },
        { index: 2, name: "NVIDIA RTX 4090", memory_mb: 24576, job_id: null },
      ],
      running_jobs: [local.body.job_id],
    });
    expect(typeof box.last_seen).toBe("string");
    expect(never).toMatchObject({
      name: "never-registered",
      role: "remote",
      status: "connecting",
      last_seen: null,
      gpus: [],
      running_jobs: [],
    });
    // A remote worker is given to one job whole: it holds every GPU there.
    expect(remoteWorker).toMatchObject({
      name: "remote-1",
      role: "remote",
      status: "busy",
      labels: { gpu: "a100", zone: "eu" },
      gpus: [
        { index: 0, name: "NVIDIA A100", memory_mb: 24576, job_id: remote.body.job_id },
        { index: 1, name: "NVIDIA A100", memory_mb: 24576, job_id: remote.body.job_id },
      ],
      running_jobs: [remote.body.job_id],
    });
  });

  it("answers only the public fields: no token, hash or host, for every worker and GPU", async () => {
    const answer = await t.call("GET", "/api/system/workers", { auth: { key: viewer.key } });
    expect(Object.keys(answer.body)).toEqual(["workers"]);
    for (const worker of answer.body.workers) {
      expect(Object.keys(worker).sort()).toEqual([
        "gpus",
        "id",
        "labels",
        "last_seen",
        "name",
        "role",
        "running_jobs",
        "status",
        "trainers",
        "xid_readable",
      ]);
      for (const gpu of worker.gpus)
        expect(Object.keys(gpu).sort()).toEqual(["health", "index", "job_id", "memory_mb", "name", "quarantine"]);
    }
    expect(answer.text).not.toContain("stw_");
    expect(answer.text).not.toContain(boxToken.slice(0, 12));
    expect(answer.text).not.toContain("secret-host");
    expect(answer.text).not.toMatch(/[0-9a-f]{64}/);
  });

  it("refuses a caller without a credential, or with a worker token", async () => {
    const anonymous = await t.call("GET", "/api/system/workers");
    expect(anonymous.status).toBe(401);
    expect(anonymous.text).not.toContain("box-1");
    expect((await t.call("GET", "/api/system/workers", { auth: { bearer: boxToken } })).status).toBe(401);
    expect((await t.call("GET", "/api/system/workers", { auth: { key: "st_" + "x".repeat(43) } })).status).toBe(401);
  });
});
