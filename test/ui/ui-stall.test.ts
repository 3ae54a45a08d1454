// A stalled job in the dashboard, in headless chromium against the real stack: a remote worker
// (this test, over HTTP) runs a job that stops stepping; the queue shows a "stalled" badge beside
// its status and the job's page "stalled since ...", which goes away live when the next step
// arrives. No serious accessibility violations on either view.
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAS_CHROMIUM, launchBrowser, openDashboard, seriousA11yViolations, sessionOf, type DashboardPage } from "../helpers/browser";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

describe.skipIf(!HAS_CHROMIUM)("a stalled job in the dashboard", () => {
  let t: TestStack;
  let browser: Browser;
  let admin: { key: string; cookie: string };
  let rita: { key: string; id: number };
  let box: { token: string };
  const pages: DashboardPage[] = [];
  let seq = 0;
  const post = (id: string, event: Record<string, unknown>) =>
    t.call("POST", `/api/workers/jobs/${id}/events`, {
      json: { attempt: 1, events: [{ seq: seq++, event }] },
      auth: { bearer: box.token },
    });

  beforeAll(async () => {
    t = await startTestStack();
    admin = await setUpAdmin(t);
    rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
    await t.call("PUT", "/api/admin/stall-detection", { json: { min_seconds: 2 }, auth: { key: admin.key } });
    await t.call("POST", "/api/queue/concurrency", { json: { worker_heartbeat_timeout_seconds: 86_400 }, auth: { key: admin.key } });
    await t.call("POST", "/api/configs/environments", { json: { name: "plain" }, auth: { key: admin.key } });
    await t.call("PUT", "/api/configs/plain", { json: { config: { "--num_processes": 1 } }, auth: { key: admin.key } });
    const created = await t.call("POST", "/api/admin/workers", { json: { name: "box" }, auth: { key: admin.key } });
    box = { token: created.body.token };
    const gpus = [{ index: 0, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }];
    await t.call("POST", "/api/workers/register", { json: { role: "remote", labels: { pool: "a" }, gpus }, auth: { bearer: box.token } });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    for (const p of pages) await p.close();
    await browser?.close();
    await t?.stop();
  });

  it("shows the badge in the queue and on the job's page, and the page drops it live when training resumes", async () => {
    const submitted = await t.call("POST", "/api/queue/submit", {
      json: { config_name: "plain", target: "worker", worker_labels: { pool: "a" } },
      auth: { key: rita.key },
    });
    const id = submitted.body.job_id as string;
    expect((await post(id, { type: "training.progress", data: { step: 1, total_steps: 50 } })).status).toBe(200);
    await until("the job to be marked stalled", async () => {
      const job = await t.call("GET", `/api/queue/jobs/${id}`, { auth: { key: rita.key } });
      return job.body.stalled_since !== null;
    });
    const cookie = await sessionOf(t, "rita", "rita-password");

    const queue = await openDashboard(browser, t, { cookie, hash: "#/queue" });
    pages.push(queue);
    const row = queue.page.locator(".queue-table tbody tr", { hasText: id });
    await expect.poll(() => row.locator(".status-stalled").innerText(), { timeout: 30_000 }).toBe("stalled");
    expect(await seriousA11yViolations(queue.page)).toEqual([]);

    const job = await openDashboard(browser, t, { cookie, hash: `#/jobs/${id}` });
    pages.push(job);
    const badge = job.page.locator(".job-terms .status-stalled");
    await expect.poll(() => badge.count(), { timeout: 30_000 }).toBe(1);
    expect(await badge.innerText()).toMatch(/stalled since/);
    expect(await seriousA11yViolations(job.page)).toEqual([]);

    expect((await post(id, { type: "training.progress", data: { step: 2, total_steps: 50 } })).status).toBe(200);
    await expect.poll(() => badge.count(), { timeout: 30_000 }).toBe(0);
    expect(queue.problems.concat(job.problems)).toEqual([]);
  });
});
