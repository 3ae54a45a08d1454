// Notifications from the features that are not a job's status change (issue 30, Builds 2, 3, 4 and 5),
// over real HTTP against the real stack, each heard at a webhook sink started here and verified as
// Standard Webhooks: a job that stops stepping (job.stalled, to its owner); a budget crossing its
// warning share and 100 % on the Scheduler's beat without any submission (budget.warning to the user
// it is for, budget.exceeded to every member of a team), told once however often it is seen; a GPU
// quarantined by a heartbeat (gpu.quarantined, to the admins). Attackers: a user subscribed to every
// kind hears nothing of another user's stall, another team's budget, or a GPU (admins only).
// Remote workers post steps and heartbeats as a runner does; the stall threshold is made small (2 s).
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NOTIFICATION_KINDS } from "../../shared/notification-kinds";
import { gpuInventory, healthSample, registerWorker } from "../helpers/boxes";
import { startHttpSink, type HttpSink, type ReceivedRequest } from "../helpers/sinks";
import { finishJob, setStoredDuration } from "../helpers/spend";
import { sessionCookie, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let hooks: HttpSink;
let admin: { key: string; cookie: string };
const users: Record<string, { key: string; id: number; secret: string }> = {};
const EVERY_KIND = [...NOTIFICATION_KINDS];

async function call(method: string, path: string, key: string, json?: unknown) {
  const reply = await t.call(method, path, { auth: { key }, ...(json === undefined ? {} : { json }) });
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
  return reply.body;
}

/** Creates `username` (researcher, in `team`) with an API key, subscribed to every kind by webhook at /<username>. */
async function user(username: string, team: string | null, level = "researcher") {
  const password = `${username}-password`;
  const created = await call("POST", "/api/users", admin.key, {
    email: `${username}@example.com`,
    username,
    password,
    level_names: [level],
    ...(team ? { team_id: team } : {}),
  });
  const cookie = sessionCookie(await t.call("POST", "/api/cloud/auth/login", { json: { username, password } }));
  const key = (await t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "k" }, auth: { cookie } })).body.key as string;
  const saved = await call("PUT", "/api/users/me/notifications", key, {
    kinds: EVERY_KIND,
    channels: { webhook: { url: `${hooks.url}/${username}` }, slack: null, email: null },
  });
  users[username] = { key, id: created.id as number, secret: saved.webhook_secret as string };
}

/** The messages `username`'s webhook received, verified with their own secret. */
function received(username: string): { type: string; data: Record<string, any> }[] {
  const secret = username === "admin" ? adminSecret : users[username]!.secret;
  return hooks.requests
    .filter((r: ReceivedRequest) => r.path === `/${username}`)
    .map((r) => {
      const headers = Object.fromEntries(["webhook-id", "webhook-timestamp", "webhook-signature"].map((h) => [h, String(r.headers[h])]));
      return new Webhook(secret).verify(r.body, headers) as { type: string; data: Record<string, any> };
    });
}
const ofKind = (username: string, kind: string) => received(username).filter((m) => m.type === kind);
let adminSecret = "";

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  hooks = await startHttpSink();
  await call("PUT", "/api/admin/webhooks", admin.key, { allow_private_targets: true });
  adminSecret = (
    await call("PUT", "/api/users/me/notifications", admin.key, {
      kinds: ["gpu.quarantined"],
      channels: { webhook: { url: `${hooks.url}/admin` }, slack: null, email: null },
    })
  ).webhook_secret;
  await user("rita", "vision");
  await user("vera", "vision");
  await user("bob", "nlp");
  await call("POST", "/api/queue/concurrency", admin.key, { worker_heartbeat_timeout_seconds: 86_400, user_max_concurrent: 20 });
  for (const [name, processes] of [
    ["plain", 1],
    ["pair", 2],
  ] as const) {
    await call("POST", "/api/configs/environments", admin.key, { name });
    await call("PUT", `/api/configs/${name}`, admin.key, { config: { "--num_processes": processes } });
  }
  await call("PUT", "/api/admin/stall-detection", admin.key, { min_seconds: 2 });
}, 120_000);
afterAll(async () => {
  await hooks?.close();
  await t?.stop();
});

describe("a stalled job", () => {
  it("is told to its owner (job.stalled, with the last step) and to nobody else", async () => {
    const box = await registerWorker(t, admin.key, "box-s", "remote", gpuInventory(1, "NVIDIA L4"), { pool: "s" });
    const submitted = await call("POST", "/api/queue/submit", users.rita!.key, {
      config_name: "plain",
      target: "worker",
      worker_labels: { pool: "s" },
      metadata: { name: "<b>stuck</b>" },
    });
    expect(submitted.status).toBe("running");
    const id = submitted.job_id as string;
    const steps = [1, 2].map((n, seq) => ({ seq, event: { type: "training.progress", data: { step: n, total_steps: 100 } } }));
    const posted = await t.call("POST", `/api/workers/jobs/${id}/events`, {
      json: { attempt: 1, events: steps },
      auth: { bearer: box.token },
    });
    expect(posted.status, posted.text).toBe(200);
    const [message] = await until("rita to hear of the stall", async () => {
      const got = ofKind("rita", "job.stalled");
      return got.length > 0 && got;
    });
    const job = await call("GET", `/api/queue/jobs/${id}`, users.rita!.key);
    expect(message!.data).toMatchObject({
      job_id: id,
      job_name: "<b>stuck</b>",
      owner: "rita",
      status: "running",
      last_step: 2,
      policy: "notify",
      stalled_since: job.stalled_since,
    });
    expect(message!.data.reason).toMatch(/^No training step for .* after step 2 \(threshold 2 s\)$/);
    // The delivery is recorded for rita with its outcome.
    const mine = (await call("GET", "/api/users/me/notifications/deliveries?limit=50", users.rita!.key)).deliveries as any[];
    expect(mine.filter((d) => d.kind === "job.stalled").map((d) => [d.channel, d.status])).toEqual([["webhook", "delivered"]]);
    // Subscribed to every kind, vera and bob hear nothing of rita's job; the admin (who did not ask) neither.
    for (const other of ["vera", "bob"]) expect(ofKind(other, "job.stalled")).toEqual([]);
    expect(received("admin").filter((m) => m.type !== "gpu.quarantined")).toEqual([]);
    // Told once: another beat past the mark sends nothing more.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(ofKind("rita", "job.stalled")).toHaveLength(1);
    await finishJob(t, id, box.token);
  });
});

describe("a quarantined GPU", () => {
  it("is told to the admins (gpu.quarantined, the box, the GPU, the fault, the job requeued) and to no researcher", async () => {
    const box = await registerWorker(t, admin.key, "box-q", "remote", gpuInventory(2, "NVIDIA L4"), { pool: "q" });
    const job = await call("POST", "/api/queue/submit", users.bob!.key, {
      config_name: "pair",
      target: "worker",
      worker_labels: { pool: "q" },
    });
    expect(job.status).toBe("running");
    const sample = (index: number, probe_error: string | null) =>
      healthSample(index, { utilization_percent: 90, memory_used_mb: 1000, memory_total_mb: 23034, temperature_c: 60, probe_error });
    const beat = await t.call("POST", "/api/workers/heartbeat", {
      json: { gpu_health: [sample(0, null), sample(1, "<img src=x onerror=alert(1)>")] },
      auth: { bearer: box.token },
    });
    expect(beat.status, beat.text).toBe(200);
    expect(beat.body.quarantined_gpus).toEqual([1]);
    const [message] = await until("the admin to hear of the quarantine", async () => {
      const got = ofKind("admin", "gpu.quarantined");
      return got.length > 0 && got;
    });
    expect(message!.data).toEqual({
      worker: "box-q",
      worker_id: box.id,
      gpu_index: 1,
      reason: "device probe failed: <img src=x onerror=alert(1)>",
      requeued_jobs: job.job_id,
      failed_jobs: null,
    });
    // The same heartbeat again quarantines nothing new and tells nobody again.
    expect(
      (await t.call("POST", "/api/workers/heartbeat", { json: { gpu_health: [sample(1, "again")] }, auth: { bearer: box.token } })).status,
    ).toBe(200);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(ofKind("admin", "gpu.quarantined")).toHaveLength(1);
    // Researchers subscribed to gpu.quarantined hear nothing: it is for admins.
    for (const u of ["rita", "vera", "bob"]) expect(ofKind(u, "gpu.quarantined")).toEqual([]);
  });
});

describe("budgets", () => {
  it("tell the user at the warning share and every team member at 100 %, on the beat, once per period; other teams hear nothing", async () => {
    // rita has used 2 GPU-hours at $1: $2 (a local job of 2 GPUs for an hour, finished by its box).
    const local = await registerWorker(t, admin.key, "gpu-box", "local", gpuInventory(2, "NVIDIA H100 80GB HBM3"));
    await call("POST", "/api/queue/concurrency", admin.key, { local_job_max_concurrent: 4 });
    const ran = await call("POST", "/api/queue/submit", users.rita!.key, { config_name: "pair", target: "local" });
    expect(ran.status).toBe("running");
    await finishJob(t, ran.job_id, local.token);
    await setStoredDuration(t, ran.job_id, 3600);
    await call("PUT", "/api/admin/gpu-prices", admin.key, { default_usd_per_gpu_hour: 1 });
    const before = hooks.requests.length;

    // A $2.40 budget for rita is 83 % used: her warning comes with no submission, from the Scheduler's beat.
    await call("PUT", "/api/admin/budgets", admin.key, { warn_at_percent: 80, users: { [String(users.rita!.id)]: 2.4 } });
    const [warning] = await until("rita's budget warning", async () => {
      const got = ofKind("rita", "budget.warning");
      return got.length > 0 && got;
    });
    expect(warning!.data).toMatchObject({
      budget: "user rita",
      period: "month",
      limit_usd: 2.4,
      warn_at_percent: 80,
      on_exceeded: "block",
    });
    // The stalled job of the first test ran for a few seconds on one GPU at $1 an hour too.
    expect(warning!.data.used_usd).toBeGreaterThanOrEqual(2);
    expect(warning!.data.used_usd).toBeLessThan(2.1);
    expect(warning!.data.reason).toMatch(/^the user rita's monthly budget of \$2\.40 \(\$2\.0\d used\)$/);

    // A $2 budget for team vision is used up: rita and vera both hear of it; bob (nlp) does not.
    await call("PUT", "/api/admin/budgets", admin.key, { teams: { vision: 2 } });
    for (const member of ["rita", "vera"]) {
      const [exceeded] = await until(`${member} to hear that vision's budget is used up`, async () => {
        const got = ofKind(member, "budget.exceeded");
        return got.length > 0 && got;
      });
      expect(exceeded!.data).toMatchObject({ budget: "team vision", limit_usd: 2 });
    }
    // A refused submission (402) and more beats tell nobody again.
    const refused = await t.call("POST", "/api/queue/submit", {
      json: { config_name: "plain", target: "local" },
      auth: { key: users.rita!.key },
    });
    expect(refused.status).toBe(402);
    await new Promise((r) => setTimeout(r, 6_000));
    expect(ofKind("rita", "budget.warning")).toHaveLength(1);
    expect(ofKind("rita", "budget.exceeded")).toHaveLength(1);
    expect(ofKind("vera", "budget.exceeded")).toHaveLength(1);
    expect(ofKind("vera", "budget.warning")).toEqual([]);
    expect(received("bob").filter((m) => m.type.startsWith("budget."))).toEqual([]);
    expect(hooks.requests.slice(before).every((r) => ["/rita", "/vera"].includes(r.path))).toBe(true);
  });

  it("tell a used-up budget to its user once, whether a submission or the beat finds it first (bob, $0)", async () => {
    await call("PUT", "/api/admin/budgets", admin.key, { on_exceeded: "require_approval", users: { [String(users.bob!.id)]: 0 } });
    const waiting = await call("POST", "/api/queue/submit", users.bob!.key, { config_name: "plain", target: "local" });
    expect(waiting).toMatchObject({ status: "blocked", budget: { scope: "user", name: "bob", state: "exceeded" } });
    const [told] = await until("bob to hear that his budget is used up", async () => {
      const got = ofKind("bob", "budget.exceeded");
      return got.length > 0 && got;
    });
    expect(told!.data).toMatchObject({ budget: "user bob", limit_usd: 0, on_exceeded: "require_approval" });
    expect(ofKind("bob", "budget.exceeded")).toHaveLength(1);
  });
});
