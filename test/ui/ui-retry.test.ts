// The job page's Retry button (issue 30, Build 6) in chromium against the real stack with its
// local runner: the owner retries a failed job and is shown a link to the new job, which the API
// confirms is a retry of it; another researcher and a viewer see no Retry button on the same page.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAS_CHROMIUM, launchBrowser, openDashboard, screenshot, seriousA11yViolations } from "../helpers/browser";
import { createUserWithKey, setUpAdmin, startStackWithLocalRunner, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

describe.skipIf(!HAS_CHROMIUM)("the Retry button on the job page", () => {
  const runnerDir = mkdtempSync(join(tmpdir(), "ui-retry-runner-"));
  let t: TestStack;
  let browser: Browser;
  let admin: { key: string };
  let rita: { key: string; cookie: string; id: number };
  let olga: { key: string; cookie: string };
  let vera: { key: string; cookie: string };
  let failed: string;

  const http = async (method: string, path: string, who: { key: string }, json?: unknown) => {
    const reply = await t.call(method, path, { auth: { key: who.key }, ...(json === undefined ? {} : { json }) });
    if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
    return reply.body;
  };
  const jobCount = async () => (await http("GET", "/api/queue?include_completed=true&limit=1000", admin)).jobs.length as number;

  beforeAll(async () => {
    t = await startStackWithLocalRunner(runnerDir);
    admin = await setUpAdmin(t);
    rita = await createUserWithKey(t, admin, "researcher", "rita");
    olga = await createUserWithKey(t, admin, "researcher", "olga");
    vera = await createUserWithKey(t, admin, "viewer", "vera");
    await http("POST", "/api/configs/environments", rita, { name: "broken", from_example: "demo" });
    const { config } = await http("GET", "/api/configs/broken", rita);
    // The demo trainer refuses a step time that is not a number at start-up: the job fails at once.
    await http("PUT", "/api/configs/broken", rita, { config: { ...config, "--demo_step_ms": "slow" } });
    failed = (await http("POST", "/api/queue/submit", rita, { config_name: "broken" })).job_id;
    await until("the job to fail", async () => (await http("GET", `/api/queue/jobs/${failed}`, rita)).status === "failed", {
      timeoutMs: 60_000,
    });
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
    rmSync(runnerDir, { recursive: true, force: true });
  });

  it("retries the owner's failed job and links to the new job", async () => {
    const dashboard = await openDashboard(browser, t, { cookie: rita.cookie, hash: `#/jobs/${failed}` });
    const { page } = dashboard;
    const button = page.getByRole("button", { name: "Retry" });
    await button.waitFor();
    expect(await seriousA11yViolations(page)).toEqual([]);
    const before = await jobCount();
    await button.click();
    const said = page.getByRole("status").filter({ hasText: "Retried as" });
    await said.waitFor();
    expect(await said.textContent()).toContain("from the start (no checkpoint recorded)");
    const link = said.getByRole("link");
    const newId = (await link.textContent())!;
    expect(await jobCount()).toBe(before + 1);
    expect(await http("GET", `/api/queue/jobs/${newId}`, rita)).toMatchObject({ retry_of: failed, user_id: rita.id });
    // One click, one job: the button is spent.
    expect(await button.isDisabled()).toBe(true);
    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "job-retry");
    await link.click();
    await page.getByRole("heading", { name: `Job ${newId}` }).waitFor();
    expect(dashboard.problems).toEqual([]);
    await dashboard.close();
  }, 90_000);

  it("shows no Retry button to another researcher or a viewer, and their API call queues nothing", async () => {
    for (const who of [olga, vera]) {
      const dashboard = await openDashboard(browser, t, { cookie: who.cookie, hash: `#/jobs/${failed}` });
      await dashboard.page.getByRole("heading", { name: `Job ${failed}` }).waitFor();
      await dashboard.page.getByText("failed").first().waitFor();
      expect(await dashboard.page.getByRole("button", { name: "Retry" }).count()).toBe(0);
      expect(await seriousA11yViolations(dashboard.page)).toEqual([]);
      await dashboard.close();
      const before = await jobCount();
      expect((await t.call("POST", `/api/queue/${failed}/retry`, { auth: { key: who.key } })).status).toBe(403);
      expect(await jobCount()).toBe(before);
    }
  }, 60_000);
});
