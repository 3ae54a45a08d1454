// The dashboard's GPUs and workers, Workers, Users and API keys views in a real browser against
// the real stack: a local box with four GPUs and a remote worker registered through the API, a
// job holding one GPU; every admin action done through the forms and checked through the API.
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAS_CHROMIUM, launchBrowser, openDashboard, screenshot, seriousA11yViolations, type DashboardPage } from "../helpers/browser";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

const ATTACK = "<img src=x onerror=alert(1)>";
const gpus = (n: number, name: string) => Array.from({ length: n }, (_, index) => ({ index, name, memory_mb: 24576 }));

let t: TestStack;
let browser: Browser;
let admin: { key: string; cookie: string };
let researcher: { key: string; cookie: string };
let heldBy: string;

async function newWorker(name: string, register: Record<string, unknown>): Promise<string> {
  const created = await t.call("POST", "/api/admin/workers", { json: { name }, auth: { key: admin.key } });
  const registered = await t.call("POST", "/api/workers/register", { json: register, auth: { bearer: created.body.token } });
  if (registered.status !== 200) throw new Error(`register ${name}: ${registered.status} ${registered.text}`);
  return created.body.token as string;
}

/** Opens a view and fails the test on any dialog (an injected alert would be one). */
async function open(cookie: string, hash: string, viewport?: { width: number; height: number }): Promise<DashboardPage> {
  const dashboard = await openDashboard(browser, t, { cookie, hash, ...(viewport ? { viewport } : {}) });
  dashboard.page.on("dialog", (dialog) => {
    dashboard.problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return dashboard;
}

/** The table row whose header cell is exactly `name`. */
const rowOf = (page: Page, name: string) => page.locator("tr", { has: page.getByRole("rowheader", { name, exact: true }) });

async function checkView(page: Page, name: string) {
  expect(await seriousA11yViolations(page)).toEqual([]);
  await screenshot(page, name);
  expect(await page.locator("img").count()).toBe(0);
}

describe.skipIf(!HAS_CHROMIUM)("the GPUs, workers, users and API keys views", () => {
  beforeAll(async () => {
    t = await startTestStack();
    admin = await setUpAdmin(t);
    researcher = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "rita");
    await t.call("POST", "/api/queue/concurrency", { json: { worker_heartbeat_timeout_seconds: 86_400 }, auth: { key: admin.key } });
    await newWorker("box-1", {
      role: "local",
      gpus: gpus(4, "NVIDIA RTX 4090"),
      hostname: "box-1",
      trainers: [
        { name: "simpletuner", available: true, version: "4.8.0" },
        { name: "demo", available: true },
      ],
    });
    await newWorker("lab-a", {
      role: "remote",
      labels: { gpu: "a100", note: ATTACK },
      gpus: gpus(2, "NVIDIA A100"),
      trainers: [
        { name: "simpletuner", available: false, detail: `could not import simpletuner.train: ${ATTACK}` },
        { name: "demo", available: true },
      ],
    });
    await t.call("POST", "/api/configs/environments", { json: { name: "one-gpu" }, auth: { key: researcher.key } });
    await t.call("PUT", "/api/configs/one-gpu", { json: { config: { "--num_processes": 1 } }, auth: { key: researcher.key } });
    const job = await t.call("POST", "/api/queue/submit", {
      json: { config_name: "one-gpu", target: "local" },
      auth: { key: researcher.key },
    });
    expect(job.body).toMatchObject({ status: "running", allocated_gpus: [0] });
    heldBy = job.body.job_id;
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it("shows each GPU of each box with the job that holds it, and the workers with labels and status", { timeout: 60_000 }, async () => {
    const { page, problems, close } = await open(researcher.cookie, "#/system");
    await page.getByRole("heading", { name: "Local box: box-1" }).waitFor();
    const local = page.getByRole("list", { name: "GPUs of box-1" }).getByRole("listitem");
    await expect.poll(() => local.count()).toBe(4);
    expect(await local.nth(0).innerText()).toContain(`held by ${heldBy}`);
    expect(await local.nth(0).getByRole("link", { name: heldBy }).getAttribute("href")).toBe(`#/jobs/${heldBy}`);
    for (const i of [1, 2, 3]) expect(await local.nth(i).innerText()).toMatch(/GPU \d\s+NVIDIA RTX 4090\s+24 GiB\s+free/);
    await page.getByRole("region", { name: "Local box: box-1" }).getByText("1 of 4 GPUs in use.").waitFor();

    const remote = page.getByRole("region", { name: "Worker: lab-a" });
    await remote.waitFor();
    expect(await remote.getByText("online, idle").count()).toBe(1);
    // The label is text: the markup shows as written and no image was made of it.
    expect(await remote.getByRole("list", { name: "Labels" }).innerText()).toContain(`note=${ATTACK}`);
    await expect.poll(() => remote.getByRole("list", { name: "GPUs of lab-a" }).getByRole("listitem").count()).toBe(2);
    // Whether each box runs SimpleTuner, and why not, as its runner said: text too.
    const trainers = await remote.getByRole("list", { name: "Trainers" }).innerText();
    expect(trainers).toContain(`simpletuner: not available could not import simpletuner.train: ${ATTACK}`);
    expect(trainers).toContain("demo");
    expect(await page.getByRole("region", { name: "Local box: box-1" }).getByRole("list", { name: "Trainers" }).innerText()).toContain(
      "simpletuner 4.8.0",
    );
    await checkView(page, "system");

    await page.setViewportSize({ width: 390, height: 800 });
    await page.getByRole("heading", { name: "Local box: box-1" }).waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await screenshot(page, "system-phone");
    expect(problems).toEqual([]);
    await close();
  });

  it("offers a researcher no Users or Workers, and #/users says it needs admin", { timeout: 60_000 }, async () => {
    const { page, problems, close } = await open(researcher.cookie, "#/system");
    const nav = page.getByRole("navigation", { name: "Main" });
    await nav.getByRole("link", { name: "GPUs and workers" }).waitFor();
    expect(await nav.getByRole("link", { name: "API keys" }).count()).toBe(1);
    expect(await nav.getByRole("link", { name: "Users", exact: true }).count()).toBe(0);
    expect(await nav.getByRole("link", { name: "Workers", exact: true }).count()).toBe(0);
    await page.goto(`${t.base}/#/users`);
    await page.getByText("This view needs the admin level").waitFor();
    expect(await page.getByRole("button", { name: "Create user" }).count()).toBe(0);
    expect(problems).toEqual([]);
    await close();
  });

  it("lets an admin create a user through the form, shows a 422 beside it, and flips registration", { timeout: 60_000 }, async () => {
    const users = async () =>
      (await t.call("GET", "/api/users", { auth: { key: admin.key } })).body.users as { username: string; team_id: string | null }[];
    const before = await users();
    const { page, problems, close } = await open(admin.cookie, "#/users");
    await page.getByRole("rowheader", { name: "rita", exact: true }).waitFor();
    const form = page.getByRole("region", { name: "Add a user" });
    await form.getByLabel("Email").fill("bea@example.com");
    await form.getByLabel("Username").fill("bea");
    await form.getByLabel("Password").fill("short");
    await form.getByLabel("Level").selectOption("lead");
    await form.getByLabel("Team").fill("vision");
    await form.getByRole("button", { name: "Create user" }).click();
    const alert = form.getByRole("alert");
    await alert.waitFor();
    expect(await alert.innerText()).toContain("body.password: at least 8 characters");
    expect(await users()).toEqual(before);

    await form.getByLabel("Password").fill("a long enough one");
    await form.getByRole("button", { name: "Create user" }).click();
    await form.getByText("Created bea.").waitFor();
    expect(await form.getByLabel("Username").inputValue()).toBe("");
    expect(await form.getByLabel("Level").inputValue()).toBe("researcher");
    expect(await form.getByRole("alert").count()).toBe(0);
    await page.getByRole("rowheader", { name: "bea", exact: true }).waitFor();
    expect((await users()).find((u) => u.username === "bea")).toMatchObject({ username: "bea", team_id: "vision", level: "lead" });
    expect((await t.call("POST", "/api/cloud/auth/login", { json: { username: "bea", password: "a long enough one" } })).status).toBe(200);

    const registration = async () => (await t.call("GET", "/api/cloud/auth/setup/status")).body.registration_enabled;
    expect(await registration()).toBe(false);
    await page.getByRole("button", { name: "Open registration" }).click();
    await page.getByRole("button", { name: "Close registration" }).waitFor();
    expect(await registration()).toBe(true);
    await checkView(page, "users");
    await page.getByRole("button", { name: "Close registration" }).click();
    await page.getByRole("button", { name: "Open registration" }).waitFor();
    expect(await registration()).toBe(false);
    expect(problems).toEqual([]);
    await close();
  });

  it("creates an API key shown once, and revokes it", { timeout: 60_000 }, async () => {
    const keys = async () => (await t.call("GET", "/api/cloud/auth/api-keys", { auth: { cookie: researcher.cookie } })).body.keys as any[];
    const { page, problems, close } = await open(researcher.cookie, "#/keys");
    await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
    await page.getByLabel("Name").fill(ATTACK);
    await page.getByLabel("Expires in days").fill("30");
    await page.getByRole("button", { name: "Create key" }).click();
    const secret = page.getByLabel(`Your new key ${ATTACK}.`);
    await secret.waitFor();
    const key = (await secret.innerText()).trim();
    expect(key).toMatch(/^st_[A-Za-z0-9_-]{43}$/);
    expect((await t.call("GET", "/api/users/me", { auth: { key } })).body.username).toBe("rita");
    const row = rowOf(page, ATTACK);
    await row.waitFor();
    expect(await row.innerText()).toContain(`${key.slice(0, 11)}…`);
    await checkView(page, "keys");

    // Shown once: a reload of the view lists the key without it.
    await page.reload();
    await rowOf(page, ATTACK).waitFor();
    expect(await page.content()).not.toContain(key);

    await rowOf(page, ATTACK)
      .getByRole("button", { name: `Revoke ${ATTACK}` })
      .click();
    await rowOf(page, ATTACK).getByRole("button", { name: "Yes, revoke" }).click();
    await rowOf(page, ATTACK)
      .getByText(/^revoked /)
      .waitFor();
    const listed = (await keys()).find((k) => k.name === ATTACK);
    expect(listed.revoked_at).not.toBeNull();
    expect((await t.call("GET", "/api/users/me", { auth: { key } })).status).toBe(401);
    expect(problems).toEqual([]);
    await close();
  });

  it(
    "creates a worker and shows its token once, replaces the token, and removes the worker after a confirm step",
    { timeout: 60_000 },
    async () => {
      const workers = async () => (await t.call("GET", "/api/admin/workers", { auth: { key: admin.key } })).body.workers as any[];
      const { page, problems, close } = await open(admin.cookie, "#/workers");
      await rowOf(page, "lab-a").waitFor();
      expect(await rowOf(page, "lab-a").innerText()).toContain(`note=${ATTACK}`);
      expect(await rowOf(page, "box-1").innerText()).toContain(heldBy);

      await page.getByLabel("Name").fill("new-box");
      await page.getByRole("button", { name: "Create worker" }).click();
      const first = page.getByLabel("The token of the new worker new-box.");
      await first.waitFor();
      const token = (await first.innerText()).trim();
      expect(token).toMatch(/^stw_/);
      await rowOf(page, "new-box").waitFor();
      expect((await t.call("POST", "/api/workers/register", { json: { gpus: gpus(1, "L4") }, auth: { bearer: token } })).status).toBe(200);
      await checkView(page, "workers");

      await rowOf(page, "new-box").getByRole("button", { name: "Replace token of new-box" }).click();
      const second = page.getByLabel("The new token of new-box.");
      await second.waitFor();
      const replaced = (await second.innerText()).trim();
      expect(replaced).toMatch(/^stw_/);
      expect(replaced).not.toBe(token);
      expect((await t.call("POST", "/api/workers/heartbeat", { json: {}, auth: { bearer: token } })).status).toBe(401);
      expect((await t.call("POST", "/api/workers/heartbeat", { json: {}, auth: { bearer: replaced } })).status).toBe(200);

      await rowOf(page, "new-box").getByRole("button", { name: "Remove new-box" }).click();
      // The first press only asks; nothing is gone yet.
      expect((await workers()).some((w) => w.name === "new-box")).toBe(true);
      await rowOf(page, "new-box").getByRole("button", { name: "Yes, remove" }).click();
      await page.getByText("Removed new-box.").waitFor();
      await rowOf(page, "new-box").waitFor({ state: "detached" });
      await until("the worker to be gone", async () => !(await workers()).some((w) => w.name === "new-box"));
      expect(await page.content()).not.toContain(replaced);
      expect(problems).toEqual([]);
      await close();
    },
  );
});
