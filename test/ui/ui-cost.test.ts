// The dashboard's Cost view (#/cost) in a real browser against the real stack: jobs of known
// GPU-seconds on a priced box, the table by user and by team, the period and grouping kept in the
// address, the CSV download equal to the API's CSV, a researcher's own rows only, a hostile address
// ignored, and no serious or critical axe violation.
import { readFileSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAS_CHROMIUM, launchBrowser, openDashboard, screenshot, seriousA11yViolations, type DashboardPage } from "../helpers/browser";
import { finishJob, gpuInventory, registerBox, setStoredDuration } from "../helpers/spend";
import { sessionCookie, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let browser: Browser;
let admin: { key: string; cookie: string };
const sessions: Record<string, string> = {};

async function user(username: string, level: string, team: string) {
  const password = `${username}-password`;
  const created = await t.call("POST", "/api/users", {
    json: { email: `${username}@example.com`, username, password, level_names: [level], team_id: team },
    auth: { key: admin.key },
  });
  expect(created.status, created.text).toBe(201);
  const cookie = sessionCookie(await t.call("POST", "/api/cloud/auth/login", { json: { username, password } }));
  sessions[username] = cookie;
  return cookie;
}

async function open(cookie: string, hash: string): Promise<DashboardPage> {
  const dashboard = await openDashboard(browser, t, { cookie, hash });
  dashboard.page.on("dialog", (dialog) => {
    dashboard.problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return dashboard;
}

/** The table's rows as text cells, header row included. */
async function tableText(page: Page): Promise<string[][]> {
  return page
    .locator("table tr")
    .evaluateAll((rows) => rows.map((row) => Array.from(row.querySelectorAll("th, td"), (cell) => (cell.textContent ?? "").trim())));
}

describe.skipIf(!HAS_CHROMIUM)("the Cost view", () => {
  beforeAll(async () => {
    t = await startTestStack();
    admin = await setUpAdmin(t);
    const ada = await user("ada", "researcher", "vision");
    const bob = await user("bob", "researcher", "nlp");
    await t.call("POST", "/api/configs/environments", { json: { name: "train" }, auth: { key: admin.key } });
    await t.call("PUT", "/api/configs/train", { json: { config: { "--num_processes": 2 } }, auth: { key: admin.key } });
    const box = await registerBox(t, admin.key, "box", "local", gpuInventory(4, "NVIDIA H100 80GB HBM3"));
    await t.call("PUT", "/api/admin/gpu-prices", { json: { gpu_models: { "NVIDIA H100 80GB HBM3": 2.5 } }, auth: { key: admin.key } });
    // ada: 2 GPUs for 1 h ($5); bob: 2 GPUs for 3 h ($15).
    for (const [cookie, seconds] of [
      [ada, 3600],
      [bob, 10_800],
    ] as const) {
      const job = await t.call("POST", "/api/queue/submit", {
        json: { config_name: "train", target: "local" },
        auth: { cookie },
        headers: { origin: t.base },
      });
      expect(job.body.status, job.text).toBe("running");
      await finishJob(t, job.body.job_id, box);
      await setStoredDuration(t, job.body.job_id, seconds);
    }
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it("shows everyone's cost to an admin by user and by team, and downloads the same as CSV", async () => {
    const { page, problems, close } = await open(admin.cookie, "#/cost");
    try {
      await page.getByRole("heading", { name: "Cost by user" }).waitFor();
      expect([await page.getByLabel(/^Group by/).inputValue(), await page.getByLabel(/^Period/).inputValue()]).toEqual(["user", "30d"]);
      await page.getByRole("rowheader", { name: "bob", exact: true }).waitFor();
      expect(await tableText(page)).toEqual([
        ["User", "GPU-hours", "Cost (USD)", "Jobs"],
        ["bob", "6.00", "$15.00", "1"],
        ["ada", "2.00", "$5.00", "1"],
        ["Total", "8.00", "$20.00", "2"],
      ]);
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, "cost-by-user");

      await page.getByLabel(/^Group by/).selectOption("team");
      await page.getByLabel(/^Period/).selectOption("7d");
      await page.getByRole("button", { name: "Show" }).click();
      await page.getByRole("heading", { name: "Cost by team" }).waitFor();
      await page.getByRole("rowheader", { name: "nlp", exact: true }).waitFor();
      expect(page.url()).toMatch(/#\/cost\?(by=team&since=7d|since=7d&by=team)$/);
      expect((await tableText(page)).slice(1)).toEqual([
        ["nlp", "6.00", "$15.00", "1"],
        ["vision", "2.00", "$5.00", "1"],
        ["Total", "8.00", "$20.00", "2"],
      ]);
      await page.reload();
      await page.getByRole("rowheader", { name: "nlp", exact: true }).waitFor();
      expect([await page.getByLabel(/^Group by/).inputValue(), await page.getByLabel(/^Period/).inputValue()]).toEqual(["team", "7d"]);

      const [download] = await Promise.all([
        page.waitForEvent("download"),
        page.getByRole("link", { name: "Export CSV (download)" }).click(),
      ]);
      expect(download.suggestedFilename()).toBe("cost-by-team.csv");
      const csv = readFileSync((await download.path())!, "utf8");
      expect(csv).toBe("team,gpu_hours,cost,currency,jobs\r\nnlp,6,15,USD,1\r\nvision,2,5,USD,1\r\ntotal,8,20,USD,2\r\n");
      expect(csv).toBe((await t.call("GET", "/api/cost?by=team&since=7d&format=csv", { auth: { key: admin.key } })).text);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it("lets an admin set prices and budgets through the forms, checked by the API, a bad value changing nothing", async () => {
    const { page, problems, close } = await open(admin.cookie, "#/cost");
    try {
      const prices = page.getByRole("form", { name: "GPU-hour prices" });
      await prices.getByLabel("By GPU model").waitFor();
      expect(await prices.getByLabel("By GPU model").inputValue()).toBe("NVIDIA H100 80GB HBM3 = 2.5");
      await prices.getByLabel("By box").fill("box = -1");
      await prices.getByRole("button", { name: "Save prices" }).click();
      await prices
        .getByRole("alert")
        .getByText(/workers\.box/)
        .first()
        .waitFor();
      const api = async () => (await t.call("GET", "/api/admin/gpu-prices", { auth: { key: admin.key } })).body;
      expect(await api()).toEqual({
        currency: "USD",
        default_usd_per_gpu_hour: 0,
        workers: {},
        gpu_models: { "NVIDIA H100 80GB HBM3": 2.5 },
      });

      // The box's own price wins over its model's: every figure doubles.
      await prices.getByLabel("By box").fill("box = 5");
      await prices.getByLabel("By GPU model").fill("");
      await prices.getByRole("button", { name: "Save prices" }).click();
      await page.getByRole("status").getByText("Prices saved.").waitFor();
      expect(await api()).toEqual({ currency: "USD", default_usd_per_gpu_hour: 0, workers: { box: 5 }, gpu_models: {} });
      await page.getByRole("cell", { name: "$30.00" }).waitFor();
      expect((await tableText(page)).at(-1)).toEqual(["Total", "8.00", "$40.00", "2"]);

      const budgets = page.getByRole("form", { name: "Budgets" });
      await budgets.getByLabel("By team").fill("nlp = 100");
      await budgets.getByLabel("When a budget is used up").selectOption("require_approval");
      await budgets.getByRole("button", { name: "Save budgets" }).click();
      await page.getByRole("status").getByText("Budgets saved.").waitFor();
      const stored = (await t.call("GET", "/api/admin/budgets", { auth: { key: admin.key } })).body;
      expect(stored).toMatchObject({ on_exceeded: "require_approval", teams: { nlp: 100 }, users: {} });
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, "cost-admin");
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it("shows a researcher only their own cost, and ignores a hostile address", async () => {
    const { page, problems, close } = await open(sessions.ada!, "#/cost?by=%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E&since=%3Cb%3E");
    try {
      await page.getByRole("rowheader", { name: "ada", exact: true }).waitFor();
      // At the box's price the previous test set.
      expect(await tableText(page)).toEqual([
        ["User", "GPU-hours", "Cost (USD)", "Jobs"],
        ["ada", "2.00", "$10.00", "1"],
        ["Total", "2.00", "$10.00", "1"],
      ]);
      await page.getByText("Your own jobs only.").waitFor();
      expect(await page.getByRole("rowheader", { name: "bob" }).count()).toBe(0);
      expect(await page.locator("img, b").count()).toBe(0);
      expect(await page.getByText("Prices and budgets (admin)").count()).toBe(0);
      expect(await page.getByLabel(/^Group by/).inputValue()).toBe("user");
      expect(await page.getByLabel(/^Period/).inputValue()).toBe("30d");
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });
});
