// The dashboard's queue and submit views in headless chromium against the real stack (no local
// box, so every job waits): a researcher submits with the dry run first; the queue shows
// positions, owners, priorities and why jobs wait, filters by status and owner in the URL, and
// pages with each job once; cancel, approve, reject and priority by level; a viewer is offered
// none of it; job-provided text stays text.
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  HAS_CHROMIUM,
  launchBrowser,
  openDashboard,
  screenshot,
  seriousA11yViolations,
  sessionOf,
  type DashboardPage,
} from "../helpers/browser";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

const XSS = `<img src=x onerror=alert(1)>`;
const T = 60_000;

describe.skipIf(!HAS_CHROMIUM)("the queue and submit views", () => {
  let t: TestStack;
  let browser: Browser;
  let admin: { key: string; cookie: string };
  let rita: { key: string; id: number };
  let otto: { key: string; id: number };
  const pages: DashboardPage[] = [];
  const dialogs: string[] = [];

  const open = async (username: string, hash: string, viewport?: { width: number; height: number }) => {
    const cookie = await sessionOf(t, username, username === "admin" ? "admin-password-1" : `${username}-password`);
    const dashboard = await openDashboard(browser, t, { cookie, hash, ...(viewport ? { viewport } : {}) });
    dashboard.page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    pages.push(dashboard);
    return dashboard;
  };
  const submit = async (key: string, body: Record<string, unknown>): Promise<string> => {
    const reply = await t.call("POST", "/api/queue/submit", { json: { config_name: "demo", ...body }, auth: { key } });
    expect(reply.status, reply.text).toBe(200);
    return reply.body.job_id;
  };
  const entry = async (jobId: string) => (await t.call("GET", `/api/queue/jobs/${jobId}`, { auth: { key: admin.key } })).body;
  const environment = async (name: string, changes: Record<string, unknown>) => {
    expect(
      (await t.call("POST", "/api/configs/environments", { json: { name, from_example: "demo" }, auth: { key: admin.key } })).status,
    ).toBe(201);
    const { config } = (await t.call("GET", `/api/configs/${name}`, { auth: { key: admin.key } })).body;
    const put = await t.call("PUT", `/api/configs/${name}`, { json: { config: { ...config, ...changes } }, auth: { key: admin.key } });
    expect(put.status, put.text).toBe(200);
  };
  /** The job ids in the first column of the visible jobs table. */
  const listedIds = async (page: DashboardPage["page"]) => page.locator(".queue-table tbody tr td:first-child").allInnerTexts();

  beforeAll(async () => {
    t = await startTestStack();
    admin = await setUpAdmin(t);
    rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
    otto = await createUserWithKey(t, { key: admin.key }, "researcher", "otto");
    await createUserWithKey(t, { key: admin.key }, "lead", "lena");
    await createUserWithKey(t, { key: admin.key }, "viewer", "vic");
    await environment("demo", {});
    await environment("big", { "--num_processes": 2 });
    browser = await launchBrowser();
  });

  afterAll(async () => {
    // Closing the browser closes every page's context.
    await browser?.close();
    await t?.stop();
  });

  it(
    "lets a researcher submit the demo environment: the dry run's answer first, then the job page",
    async () => {
      const { page } = await open("rita", "#/submit");
      const submitButton = page.getByRole("button", { name: "Submit", exact: true });
      await page.getByRole("combobox", { name: /^Environment/ }).selectOption("demo");
      await page.getByRole("textbox", { name: /^Name/ }).fill("first run");
      expect(await submitButton.isDisabled()).toBe(true);
      await page.getByRole("button", { name: "Check" }).click();
      await page
        .getByRole("status")
        .filter({ hasText: /^would / })
        .waitFor();
      await page.getByRole("heading", { name: "If you submit now" }).waitFor();
      expect(await submitButton.isDisabled()).toBe(false);
      expect((await t.call("GET", "/api/queue?user=rita", { auth: { key: rita.key } })).body.total).toBe(0);
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, "submit");

      await submitButton.click();
      await page.waitForURL(/#\/jobs\/[^/?]+$/);
      const jobId = decodeURIComponent(new URL(page.url()).hash.replace("#/jobs/", ""));
      const listed = (await t.call("GET", "/api/queue?user=rita", { auth: { key: rita.key } })).body.jobs;
      expect(listed.map((j: any) => j.job_id)).toEqual([jobId]);
      expect(listed[0].metadata).toEqual({ run_name: "first run" });
    },
    T,
  );

  it(
    "shows a submission's 422 next to the form, and Submit stays off",
    async () => {
      const { page } = await open("rita", "#/submit");
      await page.getByRole("combobox", { name: /^Environment/ }).selectOption("demo");
      await page.getByRole("textbox", { name: /^Worker labels/ }).fill("gpu");
      await page.getByRole("button", { name: "Check" }).click();
      await page.getByRole("alert").filter({ hasText: "key=value" }).waitFor();
      expect(await page.getByRole("button", { name: "Submit", exact: true }).isDisabled()).toBe(true);
    },
    T,
  );

  it(
    "creates an environment from the demo example, chosen at once for the submission; a name taken is refused beside it",
    async () => {
      const { page } = await open("otto", "#/submit");
      const panel = page.locator("#from-example");
      await panel.getByRole("combobox", { name: "Example" }).selectOption("demo");
      await panel.getByRole("textbox", { name: /^New environment's name/ }).fill("otto-demo");
      await panel.getByRole("button", { name: "Create from example" }).click();
      await until(
        "the new environment chosen",
        async () => (await page.getByRole("combobox", { name: /^Environment/ }).inputValue()) === "otto-demo",
      );
      const created = await t.call("GET", "/api/configs/otto-demo", { auth: { key: otto.key } });
      expect([created.status, created.body.owner, created.body.config["--model_family"]]).toEqual([200, "otto", "demo"]);
      await panel.getByRole("button", { name: "Create from example" }).click();
      await panel.getByRole("alert").waitFor();
      expect(
        (await t.call("GET", "/api/configs", { auth: { key: otto.key } })).body.environments.filter((e: any) => e.name === "otto-demo"),
      ).toHaveLength(1);
    },
    T,
  );

  it(
    "lists the jobs with position, owner, priority and why they wait, and job-provided text as text",
    async () => {
      const second = await submit(rita.key, { metadata: { run_name: XSS } });
      const { page } = await open("rita", "#/queue");
      const row = page.getByRole("row").filter({ hasText: second });
      await row.waitFor();
      const cells = await row.locator("td").allInnerTexts();
      expect(cells[1]).toContain(XSS);
      expect(cells[1]).toContain("demo");
      expect(cells[2]).toBe("rita");
      expect(cells[3]).toBe("pending");
      expect(cells[4]).toBe("10");
      expect(cells[5]).toBe(`#${(await entry(second)).position}: no local GPU box is registered and online`);
      expect(await page.locator("img").count()).toBe(0);
      expect(dialogs).toEqual([]);
      await page.getByText("Waiting jobs and mean wait, last 24 h").waitFor();
      await page.getByRole("term").filter({ hasText: "Pending" }).waitFor();
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, "queue");
    },
    T,
  );

  it(
    "narrows the list by status and owner, kept in the URL",
    async () => {
      await submit(otto.key, {});
      const { page } = await open("rita", "#/queue");
      await page.getByRole("row").filter({ hasText: "otto" }).first().waitFor();
      await page.getByRole("textbox", { name: /^Owner/ }).fill("otto");
      await page.getByRole("button", { name: "Apply owner" }).click();
      await until("only otto's jobs", async () => {
        const owners = await page.locator(".queue-table tbody tr td:nth-child(3)").allInnerTexts();
        return owners.length === 1 && owners.every((o) => o === "otto");
      });
      expect(page.url()).toContain("#/queue?user=otto");
      await page.getByRole("combobox", { name: /^Status/ }).selectOption("blocked");
      await page.getByText("No jobs match.").waitFor();
      expect(page.url()).toContain("status=blocked");
      expect(page.url()).toContain("user=otto");

      // The bookmarked address opens the same filtered view.
      const again = await open("rita", "#/queue?user=rita&status=pending");
      await until("only rita's pending jobs", async () => {
        const owners = await again.page.locator(".queue-table tbody tr td:nth-child(3)").allInnerTexts();
        return owners.length === 2 && owners.every((o) => o === "rita");
      });
      expect(await again.page.getByRole("textbox", { name: /^Owner/ }).inputValue()).toBe("rita");
    },
    T,
  );

  it(
    "pages through more than one page with Next and Previous, each job once",
    async () => {
      for (let i = 0; i < 29; i++) await submit(otto.key, {}); // 30 of otto's jobs with the one above
      const { page } = await open("otto", "#/queue?user=otto&limit=10");
      const seen: string[] = [];
      const firstPage = await until("the first page", async () => ((await listedIds(page)).length === 10 ? listedIds(page) : false));
      seen.push(...firstPage);
      await page.getByText("Jobs 1 to 10 of 30.").waitFor();
      for (const range of ["11 to 20", "21 to 30"]) {
        await page.getByRole("button", { name: "Next" }).click();
        await page.getByText(`Jobs ${range} of 30.`).waitFor();
        seen.push(...(await listedIds(page)));
      }
      expect(await page.getByRole("button", { name: "Next" }).isDisabled()).toBe(true);
      expect(seen).toHaveLength(30);
      expect(new Set(seen).size).toBe(30);
      await page.getByRole("button", { name: "Previous" }).click();
      await page.getByRole("button", { name: "Previous" }).click();
      await page.getByText("Jobs 1 to 10 of 30.").waitFor();
      expect(await listedIds(page)).toEqual(firstPage);
      expect(await page.getByRole("button", { name: "Previous" }).isDisabled()).toBe(true);
    },
    T,
  );

  it(
    "cancels a researcher's second job from the queue, and shows a refused cancel next to its row",
    async () => {
      const second = await submit(rita.key, { metadata: { run_name: "to cancel" } });
      const gone = await submit(rita.key, { metadata: { run_name: "cancelled elsewhere" } });
      const { page } = await open("rita", "#/queue?user=rita");
      await page.getByRole("button", { name: `Cancel ${second}` }).click();
      await until("the job cancelled", async () => (await entry(second)).status === "cancelled");
      await page.getByRole("row").filter({ hasText: second }).waitFor({ state: "detached" });
      // No Cancel on other users' jobs for a researcher.
      await page.getByRole("textbox", { name: /^Owner/ }).fill("otto");
      await page.getByRole("button", { name: "Apply owner" }).click();
      await page.getByText("of 30.").waitFor();
      expect(await page.getByRole("button", { name: /^Cancel / }).count()).toBe(0);

      // With the change stream down (a lost connection), a job cancelled elsewhere keeps its row
      // until a reload (with the stream up it leaves by itself: test/ui/ui-live.test.ts), and a cancel
      // there is refused beside it.
      await page.route("**/api/queue/changes", (route) => route.abort());
      await page.reload();
      await page.getByRole("button", { name: "My jobs" }).click();
      await page.getByRole("button", { name: `Cancel ${gone}` }).waitFor();
      expect((await t.call("POST", `/api/queue/${gone}/cancel`, { auth: { key: rita.key } })).status).toBe(200);
      await page.getByRole("button", { name: `Cancel ${gone}` }).click();
      await page.getByRole("row").filter({ hasText: gone }).getByRole("alert").waitFor();
    },
    T,
  );

  it(
    "lets an admin approve one blocked job and reject another",
    async () => {
      expect(
        (await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 1 }, auth: { key: admin.key } })).status,
      ).toBe(200);
      const approved = await submit(otto.key, { config_name: "big", target: "local" });
      const rejected = await submit(otto.key, { config_name: "big", target: "local" });
      expect([(await entry(approved)).status, (await entry(rejected)).status]).toEqual(["blocked", "blocked"]);

      const { page } = await open("admin", "#/queue?status=blocked");
      await page.getByRole("button", { name: `Approve ${approved}` }).click();
      await until("the job approved", async () => (await entry(approved)).status === "pending");
      await page.getByLabel(`Reason to reject ${rejected}`, { exact: true }).fill("too big for now");
      await page.getByRole("button", { name: `Reject ${rejected}` }).click();
      await until("the job rejected", async () => (await entry(rejected)).status === "cancelled");
      expect((await entry(rejected)).error_message).toBe("Rejected: too big for now");
      await page.getByText("No jobs match.").waitFor();
      expect(await seriousA11yViolations(page)).toEqual([]);
    },
    T,
  );

  it(
    "lets a lead change a waiting job's priority",
    async () => {
      const job = await submit(otto.key, { metadata: { run_name: "urgent" } });
      const { page } = await open("lena", "#/queue?status=pending&user=otto&limit=100");
      await page.getByLabel(`Priority of ${job}`, { exact: true }).fill("42");
      await page.getByRole("button", { name: `Set the priority of ${job}` }).click();
      await until("the new priority", async () => (await entry(job)).priority_override === 42);
      const row = page.getByRole("row").filter({ hasText: job });
      await until("the row to show it", async () => (await row.locator("td").nth(4).innerText()).startsWith("42"));
    },
    T,
  );

  it(
    "offers a viewer no Submit link, no submit form and no job actions",
    async () => {
      const { page } = await open("vic", "#/queue");
      await page.getByRole("row").filter({ hasText: "otto" }).first().waitFor();
      expect(await page.getByRole("link", { name: /Submit/ }).count()).toBe(0);
      expect(await page.getByRole("button", { name: /^(Cancel|Approve|Reject|Set) / }).count()).toBe(0);
      expect(await page.locator(".queue-actions input").count()).toBe(0);
      await page.goto(`${t.base}/#/submit`);
      await page.getByText("This view needs the").waitFor();
      expect(await page.getByText("researcher", { exact: true }).count()).toBe(1);
      expect(await page.getByRole("combobox", { name: /^Environment/ }).count()).toBe(0);
    },
    T,
  );

  it(
    "is readable at phone width",
    async () => {
      const { page } = await open("rita", "#/queue", { width: 390, height: 844 });
      await page.getByText("Waiting jobs and mean wait, last 24 h").waitFor();
      await page.getByRole("row").nth(1).waitFor();
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, "queue-phone");
    },
    T,
  );

  it("saw no script error, no CSP violation and no dialog on any page", () => {
    expect(pages.flatMap((p) => p.problems)).toEqual([]);
    expect(dialogs).toEqual([]);
  });
});
