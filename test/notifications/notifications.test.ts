// Notifications over real HTTP against the real stack (issue 30, Build 4), with the local runner
// training the demo trainer, an SMTP sink and webhook sinks started here: preferences saved and
// honoured; a job's completion signed as Standard Webhooks (verified as a receiver would), as a
// Slack body and as an e-mail; a failing receiver retried then recorded; an approval decided
// once from its link. Attackers: another user's preferences, a private target without the
// admin's permission, HTML in a job's name.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mailParts, startHttpSink, startSmtpSink, type HttpSink, type SmtpSink } from "../helpers/sinks";
import { createUserWithKey, setUpAdmin, startStackWithLocalRunner, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let rita: { key: string; id: number };
let bob: { key: string; id: number };
let smtp: SmtpSink;
const sinks: HttpSink[] = [];
const HTML_NAME = `<b>bold</b> & <script>alert(1)</script>`;

const as = (key: string) => ({ auth: { key } });
const sink = async (script: number[] = [], port = 0) => {
  const s = await startHttpSink(script, port);
  sinks.push(s);
  return s;
};
const deliveries = async (key: string) =>
  (await t.call("GET", "/api/users/me/notifications/deliveries?limit=200", as(key))).body.deliveries as any[];
async function environment(name: string, changes: Record<string, unknown>) {
  expect((await t.call("POST", "/api/configs/environments", { json: { name, from_example: "demo" }, ...as(admin.key) })).status).toBe(201);
  const { config } = (await t.call("GET", `/api/configs/${name}`, as(admin.key))).body;
  const put = await t.call("PUT", `/api/configs/${name}`, { json: { config: { ...config, ...changes } }, ...as(admin.key) });
  expect(put.status, put.text).toBe(200);
}
async function submit(key: string, config_name: string, metadata?: Record<string, unknown>): Promise<string> {
  const reply = await t.call("POST", "/api/queue/submit", { json: { config_name, ...(metadata ? { metadata } : {}) }, ...as(key) });
  expect(reply.status, reply.text).toBeLessThan(300);
  return reply.body.job_id;
}
const statusOf = async (jobId: string) => (await t.call("GET", `/api/queue/jobs/${jobId}`, as(admin.key))).body.status as string;
const noChannels = { webhook: null, slack: null, email: null };

beforeAll(async () => {
  t = await startStackWithLocalRunner(mkdtempSync(join(tmpdir(), "notify-test-runner-")));
  admin = await setUpAdmin(t);
  rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
  bob = await createUserWithKey(t, { key: admin.key }, "researcher", "bob");
  smtp = await startSmtpSink();
  await environment("quick", { "--max_train_steps": 4, "--demo_step_ms": 10, "--validation_steps": 0, "--checkpointing_steps": 0 });
}, 120_000);
afterAll(async () => {
  for (const s of sinks) await s.close();
  await smtp?.close();
  await t?.stop();
});

describe("targets on private addresses", () => {
  it("are refused (422, naming the field) while private targets are not allowed, and nothing is saved", async () => {
    const before = (await t.call("GET", "/api/users/me/notifications", as(rita.key))).body;
    for (const url of ["http://127.0.0.1:9/h", "http://localhost/h", "http://169.254.169.254/latest", "http://[::1]/h"]) {
      const refused = await t.call("PUT", "/api/users/me/notifications", {
        json: { kinds: ["job.completed"], channels: { ...noChannels, webhook: { url } } },
        ...as(rita.key),
      });
      expect(refused.status, url).toBe(422);
      expect(refused.body.code).toBe("notification_target_refused");
      expect(refused.body.errors[0].path).toBe("body.channels.webhook.url");
    }
    const slack = await t.call("PUT", "/api/users/me/notifications", {
      json: { kinds: ["job.completed"], channels: { ...noChannels, slack: { url: "http://10.0.0.5/hook" } } },
      ...as(rita.key),
    });
    expect(slack.status).toBe(422);
    const host = await t.call("PUT", "/api/admin/notifications/smtp", {
      json: { host: "127.0.0.1", port: 25, tls: "none", username: "", from: "jobs@example.com" },
      ...as(admin.key),
    });
    expect(host.status).toBe(422);
    expect(host.body.errors[0].path).toBe("body.host");
    expect((await t.call("GET", "/api/users/me/notifications", as(rita.key))).body).toEqual(before);
    expect((await t.call("GET", "/api/admin/notifications/smtp", as(admin.key))).body.host).toBe("");
  });

  it("then saves them once an admin allows private targets (as the test stack does for webhooks)", async () => {
    expect((await t.call("PUT", "/api/admin/webhooks", { json: { allow_private_targets: true }, ...as(admin.key) })).status).toBe(200);
    const saved = await t.call("PUT", "/api/admin/notifications/smtp", {
      json: { host: "127.0.0.1", port: smtp.port, tls: "none", username: "mailer", password: "s3cret-pass", from: "jobs@example.com" },
      ...as(admin.key),
    });
    expect(saved.status, saved.text).toBe(200);
    expect(saved.body).toEqual({
      host: "127.0.0.1",
      port: smtp.port,
      tls: "none",
      username: "mailer",
      password: "********",
      from: "jobs@example.com",
    });
    // A researcher may neither read nor change them.
    expect((await t.call("GET", "/api/admin/notifications/smtp", as(rita.key))).status).toBe(403);
    expect((await t.call("PUT", "/api/admin/notifications/smtp", { json: saved.body, ...as(rita.key) })).status).toBe(403);
  });

  it("the SMTP test-send delivers one message to the sink, authenticated as the configured user", async () => {
    const before = smtp.mails.length;
    const sent = await t.call("POST", "/api/admin/notifications/smtp/test", { json: { to: "ops@example.com" }, ...as(admin.key) });
    expect(sent.body).toEqual({ sent: true, error: null });
    const mail = smtp.mails[before]!;
    expect(mail).toMatchObject({ from: "jobs@example.com", to: ["ops@example.com"], user: "mailer" });
    expect(mailParts(mail.data).subject).toBe("[training] SMTP test");
  });
});

describe("a job's notifications", () => {
  let hook: HttpSink;
  let slack: HttpSink;
  let jobId: string;

  beforeAll(async () => {
    hook = await sink();
    slack = await sink();
    const saved = await t.call("PUT", "/api/users/me/notifications", {
      json: {
        kinds: ["job.completed", "job.failed"],
        channels: {
          webhook: { url: `${hook.url}/rita` },
          slack: { url: `${slack.url}/services/T/B/X` },
          email: { address: "rita@example.com" },
        },
      },
      ...as(rita.key),
    });
    expect(saved.status, saved.text).toBe(200);
    jobId = await submit(rita.key, "quick", { name: HTML_NAME });
    await until("the job to complete", async () => (await statusOf(jobId)) === "completed", { timeoutMs: 60_000 });
    await until("three deliveries", async () => (await deliveries(rita.key)).filter((d) => d.status === "delivered").length >= 3, {
      timeoutMs: 30_000,
    });
  }, 120_000);

  it("saves the preferences and shows them back only to their owner", async () => {
    const mine = (await t.call("GET", "/api/users/me/notifications", as(rita.key))).body;
    expect(mine.kinds).toEqual(["job.completed", "job.failed"]);
    expect(mine.channels.email).toEqual({ address: "rita@example.com" });
    expect(mine.webhook_secret).toMatch(/^whsec_/);
    const bobs = (await t.call("GET", "/api/users/me/notifications", as(bob.key))).body;
    expect(bobs).toMatchObject({ channels: noChannels, webhook_secret: "", updated_at: null });
  });

  it("honours the kinds: a completed job is told on each channel, its start (not wanted) on none", async () => {
    const mine = await deliveries(rita.key);
    expect(mine.map((d) => `${d.kind} ${d.channel} ${d.status}`).sort()).toEqual([
      "job.completed email delivered",
      "job.completed slack delivered",
      "job.completed webhook delivered",
    ]);
    expect(mine.every((d) => d.attempts === 1 && d.last_error === null && d.delivered_at && d.event_at)).toBe(true);
    expect(hook.requests.map((r) => JSON.parse(r.body).type)).toEqual(["job.completed"]);
  });

  it("signs the webhook as Standard Webhooks with the user's own secret (verified as a receiver would)", async () => {
    const { webhook_secret } = (await t.call("GET", "/api/users/me/notifications", as(rita.key))).body;
    const request = hook.requests[0]!;
    const headers = {
      "webhook-id": String(request.headers["webhook-id"]),
      "webhook-timestamp": String(request.headers["webhook-timestamp"]),
      "webhook-signature": String(request.headers["webhook-signature"]),
    };
    const payload = new Webhook(webhook_secret).verify(request.body, headers) as any;
    expect(payload).toMatchObject({
      type: "job.completed",
      data: { job_id: jobId, job_name: HTML_NAME, status: "completed", owner: "rita" },
    });
    // Another secret (the service's, say) does not verify it.
    const serviceSecret = (await t.call("GET", "/api/admin/webhooks", as(admin.key))).body.signing_secret;
    expect(() => new Webhook(serviceSecret).verify(request.body, headers)).toThrow();
    expect(() => new Webhook(webhook_secret).verify(request.body.replace("completed", "failed"), headers)).toThrow();
  });

  it("sends Slack {text, blocks} with the job's name escaped as Slack asks (&, <, >)", () => {
    const body = JSON.parse(slack.requests[0]!.body);
    expect(slack.requests[0]!.path).toBe("/services/T/B/X");
    expect(slack.requests[0]!.headers["content-type"]).toBe("application/json");
    expect(body.text).toContain("&lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;alert(1)&lt;/script&gt;: completed");
    expect(body.text).not.toContain("<script>");
    expect(body.blocks).toEqual([{ type: "section", text: { type: "mrkdwn", text: body.text } }]);
  });

  it("e-mails a text and an HTML part, the name escaped in the HTML", () => {
    const mail = smtp.mails.find((m) => m.to.includes("rita@example.com"))!;
    expect(mail.from).toBe("jobs@example.com");
    const parts = mailParts(mail.data);
    expect(parts.subject).toBe(`[training] ${HTML_NAME}: completed`);
    expect(parts.text).toContain(`[training] ${HTML_NAME}: completed`);
    expect(parts.text).toContain(`Job: ${jobId}`);
    expect(parts.html).toContain("&lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;alert(1)&lt;/script&gt;");
    expect(parts.html).not.toContain("<script>");
    expect(parts.html).not.toContain("<b>bold");
  });

  it("another user can neither read nor change someone's preferences (no route names another user; rita's unchanged)", async () => {
    const before = (await t.call("GET", "/api/users/me/notifications", as(rita.key))).body;
    for (const method of ["GET", "PUT"]) {
      const reply = await t.call(method, `/api/users/${rita.id}/notifications`, {
        ...(method === "PUT" ? { json: { kinds: [], channels: noChannels } } : {}),
        ...as(bob.key),
      });
      expect([403, 404], `${method} ${reply.status}`).toContain(reply.status);
    }
    // Bob's own save changes only his.
    const bobs = await t.call("PUT", "/api/users/me/notifications", { json: { kinds: [], channels: noChannels }, ...as(bob.key) });
    expect(bobs.status).toBe(200);
    expect((await t.call("GET", "/api/users/me/notifications", as(rita.key))).body).toEqual(before);
    expect(await deliveries(bob.key)).toEqual([]);
  });
});

describe("a job that starts and fails", () => {
  it("tells the owner both, the failure with its error", async () => {
    await environment("broken", { "--demo_step_ms": "slow" });
    const hook = await sink();
    const saved = await t.call("PUT", "/api/users/me/notifications", {
      json: { kinds: ["job.started", "job.failed"], channels: { ...noChannels, webhook: { url: `${hook.url}/bob` } } },
      ...as(bob.key),
    });
    expect(saved.status).toBe(200);
    const jobId = await submit(bob.key, "broken");
    await until("the job to fail", async () => (await statusOf(jobId)) === "failed", { timeoutMs: 60_000 });
    const bodies = await until("both messages", () => hook.requests.length >= 2 && hook.requests.map((r) => JSON.parse(r.body)));
    expect(bodies.map((b) => b.type)).toEqual(["job.started", "job.failed"]);
    expect(bodies[1].data).toMatchObject({ job_id: jobId, status: "failed", error: expect.any(String) });
    expect(bodies[1].data.error.length).toBeGreaterThan(0);
  }, 90_000);
});

describe("a failing receiver", () => {
  it("is retried with backoff until it takes the message, and a refusing one is recorded as failed", async () => {
    const flaky = await sink([500]);
    const refusing = await sink([404]);
    const saved = await t.call("PUT", "/api/users/me/notifications", {
      json: {
        kinds: ["job.completed"],
        channels: { webhook: { url: `${flaky.url}/in` }, slack: { url: `${refusing.url}/in` }, email: null },
      },
      ...as(bob.key),
    });
    expect(saved.status).toBe(200);
    const jobId = await submit(bob.key, "quick");
    await until("the job to complete", async () => (await statusOf(jobId)) === "completed", { timeoutMs: 60_000 });
    const failed = await until("the refusing receiver's delivery to be recorded", async () =>
      (await deliveries(bob.key)).find((d) => d.channel === "slack" && d.status !== "pending"),
    );
    expect(failed).toMatchObject({ kind: "job.completed", status: "failed", attempts: 1, last_error: "HTTP 404", delivered_at: null });
    const retried = await until(
      "the flaky receiver's retry",
      async () =>
        (await deliveries(bob.key)).find((d) => d.kind === "job.completed" && d.channel === "webhook" && d.status === "delivered"),
      { timeoutMs: 30_000 },
    );
    expect(retried).toMatchObject({ status: "delivered", attempts: 2, last_error: "HTTP 500" });
    expect(flaky.requests).toHaveLength(2);
    // The same message both times (one webhook-id), the retry at least the first backoff (5 s) later.
    expect(flaky.requests[1]!.headers["webhook-id"]).toBe(flaky.requests[0]!.headers["webhook-id"]);
    expect(flaky.requests[1]!.at - flaky.requests[0]!.at).toBeGreaterThanOrEqual(4_900);
    expect(refusing.requests).toHaveLength(1);
  }, 90_000);
});

describe("approval links", () => {
  let adminHook: HttpSink;
  let ritaHook: HttpSink;
  let first: string;
  let second: string;
  const linkOf = (jobId: string) => {
    const request = adminHook.requests.find((r) => JSON.parse(r.body).data.job_id === jobId);
    return request ? (JSON.parse(request.body).data.approval_url as string) : null;
  };
  const tokenOf = (url: string) => url.split("/").pop()!;
  const post = (token: string, form: Record<string, string>, origin = t.base) =>
    fetch(`${t.base}/api/notifications/approval/${token}`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin },
      body: new URLSearchParams(form),
    });

  beforeAll(async () => {
    adminHook = await sink();
    ritaHook = await sink();
    const adminPrefs = await t.call("PUT", "/api/users/me/notifications", {
      json: { kinds: ["approval.needed"], channels: { ...noChannels, webhook: { url: `${adminHook.url}/admin` } } },
      ...as(admin.key),
    });
    expect(adminPrefs.status).toBe(200);
    const ritaPrefs = await t.call("PUT", "/api/users/me/notifications", {
      json: { kinds: ["approval.decided", "approval.needed"], channels: { ...noChannels, webhook: { url: `${ritaHook.url}/rita` } } },
      ...as(rita.key),
    });
    expect(ritaPrefs.status).toBe(200);
    expect((await t.call("POST", "/api/configs/environments", { json: { name: "one-gpu" }, ...as(admin.key) })).status).toBe(201);
    await t.call("PUT", "/api/configs/one-gpu", { json: { config: { "--num_processes": 1 } }, ...as(admin.key) });
    await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 0 }, ...as(admin.key) });
    first = await submit(rita.key, "one-gpu", { name: HTML_NAME });
    second = await submit(rita.key, "one-gpu");
    expect(await statusOf(first)).toBe("blocked");
    await until("both links", () => linkOf(first) && linkOf(second));
  }, 60_000);

  it("goes to admins only, and shows a confirmation page that changes nothing, the job's name as text", async () => {
    expect(ritaHook.requests.filter((r) => JSON.parse(r.body).type === "approval.needed")).toEqual([]);
    const page = await fetch(`${t.base}/api/notifications/approval/${tokenOf(linkOf(first)!)}`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("form-action 'self'");
    const html = await page.text();
    expect(html).toContain("&lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;");
    expect(html).not.toContain("<script>");
    expect(html).toContain('name="decision" value="approve"');
    expect(await statusOf(first)).toBe("blocked");
  });

  it("refuses a tampered link (404 page) and a cross-site post (403), deciding nothing", async () => {
    const token = tokenOf(linkOf(first)!);
    const [id, signature] = token.split(".");
    const otherId = tokenOf(linkOf(second)!).split(".")[0];
    const flipped = signature!.slice(0, -1) + (signature!.endsWith("A") ? "B" : "A");
    for (const bad of [`${id}.${flipped}`, `${otherId}.${signature}`, `${id}`, `${id}.${signature}.x`]) {
      const reply = await post(bad, { decision: "approve" });
      expect(reply.status, bad).toBe(404);
      expect(await reply.text()).toContain("not valid");
    }
    const crossSite = await post(token, { decision: "approve" }, "https://evil.example");
    expect(crossSite.status).toBe(403);
    expect(await statusOf(first)).toBe("blocked");
    expect(await statusOf(second)).toBe("blocked");
  });

  it("decides its own job once, as the admin, whoever posts it; the second use is refused (410)", async () => {
    // Rita (a researcher) cannot approve through the API, and her post of the admin's link decides only its own job.
    expect((await t.call("POST", `/api/queue/${second}/approve`, as(rita.key))).status).toBe(403);
    const used = await post(tokenOf(linkOf(first)!), { decision: "approve" });
    expect(used.status).toBe(200);
    expect(await used.text()).toContain("approved");
    expect(["pending", "running"]).toContain(await statusOf(first));
    expect(await statusOf(second)).toBe("blocked");

    const again = await post(tokenOf(linkOf(first)!), { decision: "reject", reason: "changed my mind" });
    expect(again.status).toBe(410);
    expect(await again.text()).toContain("already used");
    expect((await fetch(`${t.base}/api/notifications/approval/${tokenOf(linkOf(first)!)}`)).status).toBe(410);
    expect(["pending", "running"]).toContain(await statusOf(first));

    const audit = (await t.call("GET", "/api/audit?event_type=job_approved", as(admin.key))).body.entries as any[];
    expect(audit.find((e) => e.target === first)).toMatchObject({ actor: "admin", details: { via: "approval link" } });
    // The owner hears of the decision.
    const decided = await until("the owner's approval.decided", () =>
      ritaHook.requests.map((r) => JSON.parse(r.body)).find((b) => b.type === "approval.decided" && b.data.job_id === first),
    );
    // Approved, it waits (no GPU here): the message says where, from the pass the approval ran.
    expect(decided.data).toMatchObject({
      decision: "approved",
      job_name: HTML_NAME,
      status: "pending",
      queue_position: expect.any(Number),
    });
  });

  it("rejects with a reason; a rejection without one is refused (422) and decides nothing", async () => {
    const token = tokenOf(linkOf(second)!);
    expect((await post(token, { decision: "reject" })).status).toBe(422);
    expect(await statusOf(second)).toBe("blocked");
    const rejected = await post(token, { decision: "reject", reason: "too big today" });
    expect(rejected.status).toBe(200);
    expect(await statusOf(second)).toBe("cancelled");
    await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: null }, ...as(admin.key) });
  });
});

describe("a delivery waiting for its retry", () => {
  it("survives a restart: the restarted service sends it when it is due", async () => {
    const gone = await sink();
    const port = Number(new URL(gone.url).port);
    await gone.close();
    const saved = await t.call("PUT", "/api/users/me/notifications", {
      json: { kinds: ["job.completed"], channels: { ...noChannels, webhook: { url: `http://127.0.0.1:${port}/in` } } },
      ...as(bob.key),
    });
    expect(saved.status).toBe(200);
    const jobId = await submit(bob.key, "quick");
    await until("the job to complete", async () => (await statusOf(jobId)) === "completed", { timeoutMs: 60_000 });
    const waiting = await until("the first attempt to fail", async () =>
      (await deliveries(bob.key)).find(
        (d) => d.kind === "job.completed" && d.channel === "webhook" && d.attempts === 1 && d.status === "pending" && d.event_at,
      ),
    );
    expect(waiting.last_error).toBeTruthy();

    const dataDir = t.dataDir;
    await t.stop({ keepData: true });
    const back = await sink([], port);
    t = await startTestStack(dataDir);
    const delivered = await until(
      "the retry after the restart",
      async () => (await deliveries(bob.key)).find((d) => d.id === waiting.id && d.status === "delivered"),
      { timeoutMs: 30_000 },
    );
    expect(delivered.attempts).toBe(2);
    expect(back.requests.map((r) => JSON.parse(r.body).data.job_id)).toEqual([jobId]);
  }, 120_000);
});
