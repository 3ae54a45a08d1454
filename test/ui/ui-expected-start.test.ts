// The expected start in the dashboard's queue and job views, in headless chromium against the real
// stack: a registered local box of one GPU that no runner serves, a running job with a known
// --max_runtime_minutes and two waiting jobs. The owner sees when and how it was estimated; a
// viewer sees another user's start time only, never its basis; axe finds nothing serious.
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gpuInventory, registerBox } from "../helpers/boxes";
import { HAS_CHROMIUM, launchBrowser, openDashboard, seriousA11yViolations, sessionOf, type DashboardPage } from "../helpers/browser";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

const T = 60_000;

describe.skipIf(!HAS_CHROMIUM)("the expected start in the dashboard", () => {
  let t: TestStack;
  let browser: Browser;
  let admin: { key: string; cookie: string };
  let rita: { key: string; id: number };
  let otto: { key: string; id: number };
  let running: any;
  let ritas: any;
  let ottos: any;
  const pages: DashboardPage[] = [];

  const open = async (username: string, hash: string) => {
    const dashboard = await openDashboard(browser, t, { cookie: await sessionOf(t, username, `${username}-password`), hash });
    pages.push(dashboard);
    return dashboard;
  };
  const http = async (method: string, path: string, who: { key: string }, json?: unknown) => {
    const reply = await t.call(method, path, { auth: { key: who.key }, ...(json === undefined ? {} : { json }) });
    if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${reply.text}`);
    return reply.body;
  };

  beforeAll(async () => {
    t = await startTestStack();
    admin = await setUpAdmin(t);
    rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
    otto = await createUserWithKey(t, { key: admin.key }, "researcher", "otto");
    await createUserWithKey(t, { key: admin.key }, "viewer", "vic");
    for (const [name, minutes] of [
      ["hour", 60],
      ["half", 30],
    ] as const) {
      await http("POST", "/api/configs/environments", rita, { name, model_family: "flux", model_type: "lora" });
      await http("PUT", `/api/configs/${name}`, rita, {
        config: { "--model_family": "flux", "--num_processes": 1, "--max_runtime_minutes": minutes },
      });
    }
    await registerBox(t, admin.key, "box", "local", gpuInventory(1, "NVIDIA A100-SXM4-80GB"));
    await http("POST", "/api/queue/concurrency", admin, { worker_heartbeat_timeout_seconds: 86_400 });
    const started = await http("POST", "/api/queue/submit", rita, { config_name: "hour" });
    expect(started.status).toBe("running");
    const first = await http("POST", "/api/queue/submit", rita, { config_name: "half" });
    const second = await http("POST", "/api/queue/submit", otto, { config_name: "half" });
    await http("POST", "/api/queue/process", admin);
    [running, ritas, ottos] = await Promise.all([started, first, second].map((s) => http("GET", `/api/queue/jobs/${s.job_id}`, admin)));
    expect(ritas.expected_start_basis).toBe(`after ${running.job_id} ends (expected ${running.expected_end_at.slice(0, 16)}Z)`);
    browser = await launchBrowser();
  }, T);

  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it(
    "shows the owner when each waiting job is expected to start and how that was estimated",
    async () => {
      const { page } = await open("rita", "#/queue");
      const row = page.getByRole("row").filter({ hasText: ritas.job_id });
      await row.waitFor();
      const cell = row.locator("td").nth(6);
      expect(await cell.locator("time").getAttribute("datetime")).toBe(ritas.expected_start_at);
      expect(await cell.locator("time").innerText()).toMatch(/^in (59|60) min$/);
      expect(await cell.locator(".queue-basis").innerText()).toBe(ritas.expected_start_basis);
      expect(await cell.locator("span[title]").getAttribute("title")).toBe(ritas.expected_start_basis);
      // Otto's job, as Rita (a researcher) sees it: its time, not how it was estimated.
      const other = page.getByRole("row").filter({ hasText: ottos.job_id }).locator("td").nth(6);
      expect(await other.locator("time").getAttribute("datetime")).toBe(ottos.expected_start_at);
      expect(await other.locator(".queue-basis").count()).toBe(0);
      expect(await page.getByRole("columnheader", { name: "Expected start" }).count()).toBe(1);
      expect(await seriousA11yViolations(page)).toEqual([]);
    },
    T,
  );

  it(
    "shows the expected start and run time on the job's page",
    async () => {
      const { page } = await open("rita", `#/jobs/${ritas.job_id}`);
      await page.getByText(ritas.expected_start_basis).waitFor();
      await page.getByText(`(${ritas.expected_run_basis})`).waitFor();
      expect(ritas.expected_run_basis).toBe("its --max_runtime_minutes (30)");
      expect(await seriousA11yViolations(page)).toEqual([]);
    },
    T,
  );

  it(
    "shows a viewer another user's start time only",
    async () => {
      const { page } = await open("vic", `#/jobs/${ottos.job_id}`);
      await page.getByText("Expected start").waitFor();
      expect(await page.getByText(ottos.expected_start_basis).count()).toBe(0);
      const queue = await open("vic", "#/queue");
      const row = queue.page.getByRole("row").filter({ hasText: ottos.job_id });
      await row.waitFor();
      expect(await row.locator(".queue-basis").count()).toBe(0);
      expect(await row.locator("time").getAttribute("datetime")).toBe(ottos.expected_start_at);
    },
    T,
  );

  it("saw no script error and no CSP violation on any page", () => {
    expect(pages.flatMap((p) => p.problems)).toEqual([]);
  });
});
