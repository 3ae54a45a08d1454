// The dashboard's queue view follows the queue's change stream in headless chromium against the
// real stack (no local box, so jobs wait): rita has the queue open; otto submits and cancels
// through the API, and rita's table shows the job and then its end without any click, under a
// "Live" note. The GPU view follows the same stream.
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAS_CHROMIUM, launchBrowser, openDashboard, screenshot, seriousA11yViolations, sessionOf } from "../helpers/browser";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

const T = 60_000;

describe.skipIf(!HAS_CHROMIUM)("the live queue", () => {
  let t: TestStack;
  let browser: Browser;
  let admin: { key: string; cookie: string };
  let otto: { key: string };

  const open = async (username: string, hash: string) => {
    return openDashboard(browser, t, { cookie: await sessionOf(t, username, `${username}-password`), hash });
  };
  const submit = async (key: string): Promise<string> => {
    const reply = await t.call("POST", "/api/queue/submit", { json: { config_name: "demo", target: "local" }, auth: { key } });
    expect(reply.status, reply.text).toBe(200);
    return reply.body.job_id;
  };

  beforeAll(async () => {
    t = await startTestStack();
    admin = await setUpAdmin(t);
    await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
    otto = await createUserWithKey(t, { key: admin.key }, "researcher", "otto");
    await createUserWithKey(t, { key: admin.key }, "viewer", "vic");
    expect(
      (await t.call("POST", "/api/configs/environments", { json: { name: "demo", from_example: "demo" }, auth: { key: admin.key } }))
        .status,
    ).toBe(201);
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    // Closing the browser closes every page's context.
    await browser?.close();
    await t?.stop();
  });

  it(
    "shows another user's new job, then its cancellation, in the open queue without a click",
    async () => {
      const { page, problems } = await open("rita", "#/queue?status=all");
      const jobs = page.getByRole("region", { name: "Jobs" });
      await jobs.getByText("No jobs match.").waitFor();
      await jobs.getByRole("status").getByText("Live", { exact: true }).waitFor();
      const pendingBefore = page.getByRole("region", { name: "Now" }).getByText("Pending").locator("xpath=..").locator("dd");
      expect(await pendingBefore.innerText()).toBe("0");

      const jobId = await submit(otto.key);
      const row = jobs.getByRole("row").filter({ hasText: jobId });
      await row.waitFor();
      expect(await row.getByText("otto", { exact: true }).count()).toBe(1);
      await row.getByText("pending", { exact: true }).waitFor();
      // The Now panel follows too.
      await page
        .getByRole("region", { name: "Now" })
        .getByText("Pending")
        .locator("xpath=..")
        .locator("dd")
        .getByText("1", { exact: true })
        .waitFor();
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, "queue-live");

      expect((await t.call("POST", `/api/queue/${jobId}/cancel`, { auth: { key: otto.key } })).status).toBe(200);
      await row.getByText("cancelled", { exact: true }).waitFor();
      await jobs.getByRole("status").getByText("Live", { exact: true }).waitFor();
      expect(problems).toEqual([]);
    },
    T,
  );

  it(
    "takes a job that leaves the active list out of the default view",
    async () => {
      const { page, problems } = await open("vic", "#/queue");
      const jobs = page.getByRole("region", { name: "Jobs" });
      await jobs.getByRole("status").getByText("Live", { exact: true }).waitFor();
      const jobId = await submit(otto.key);
      const row = jobs.getByRole("row").filter({ hasText: jobId });
      await row.waitFor();
      expect((await t.call("POST", `/api/queue/${jobId}/cancel`, { auth: { key: admin.key } })).status).toBe(200);
      await row.waitFor({ state: "detached" });
      expect(problems).toEqual([]);
    },
    T,
  );

  it(
    "shows a GPU taken by a job that starts, without a click (the last test: the local box admits jobs from here on)",
    async () => {
      await t.call("POST", "/api/queue/concurrency", { json: { worker_heartbeat_timeout_seconds: 86_400 }, auth: { key: admin.key } });
      const worker = await t.call("POST", "/api/admin/workers", { json: { name: "box-1" }, auth: { key: admin.key } });
      const gpus = [0, 1].map((index) => ({ index, name: "NVIDIA RTX 4090", memory_mb: 24_576 }));
      const registered = await t.call("POST", "/api/workers/register", {
        json: { role: "local", gpus, hostname: "box-1" },
        auth: { bearer: worker.body.token },
      });
      expect(registered.status, registered.text).toBe(200);
      await t.call("POST", "/api/configs/environments", { json: { name: "one-gpu" }, auth: { key: admin.key } });
      await t.call("PUT", "/api/configs/one-gpu", { json: { config: { "--num_processes": 1 } }, auth: { key: admin.key } });

      const { page, problems } = await open("vic", "#/system");
      const box = page.getByRole("region", { name: "Local box: box-1" });
      await box.getByText("0 of 2 GPUs in use.").waitFor();
      await page.getByRole("status").getByText("Live", { exact: true }).waitFor();
      const job = await t.call("POST", "/api/queue/submit", { json: { config_name: "one-gpu", target: "local" }, auth: { key: otto.key } });
      expect(job.body).toMatchObject({ status: "running", allocated_gpus: [0] });
      await box.getByText("1 of 2 GPUs in use.").waitFor();
      expect(await box.getByRole("link", { name: job.body.job_id }).count()).toBe(1);
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, "system-live");
      expect(problems).toEqual([]);
    },
    T,
  );
});
