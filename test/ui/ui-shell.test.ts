import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAS_CHROMIUM, launchBrowser, openDashboard, screenshot, seriousA11yViolations, sessionOf } from "../helpers/browser";
import { ADMIN, createUserWithKey, startTestStack, type TestStack } from "../helpers/stack";

// The dashboard's page and files over HTTP, and its shell in a real browser: the first admin,
// logging in and out, what each level is offered, the phone layout, and its accessibility.

let t: TestStack;

beforeAll(async () => {
  t = await startTestStack();
});
afterAll(async () => {
  await t?.stop();
});

describe("the dashboard's page and files", () => {
  it("serves / as HTML that loads only this origin's script and stylesheet, under a CSP without inline code", async () => {
    const page = await t.call("GET", "/");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.headers.get("content-security-policy")).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    );
    const scripts = [...page.text.matchAll(/<script([^>]*)>/g)].map((m) => m[1]!);
    expect(scripts).toHaveLength(1);
    expect(scripts[0]).toMatch(/ src="\/ui\/app\.js\?v=[0-9a-f]{16}"/);
    expect(page.text).not.toMatch(/<style|style="/);
    expect(page.text).toMatch(/<link rel="stylesheet" href="\/ui\/app\.css\?v=[0-9a-f]{16}">/);
  });

  it("serves the script and stylesheet with an ETag, 304 when the browser has them, 404 for any other name", async () => {
    const js = await t.call("GET", "/ui/app.js");
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    const etag = js.headers.get("etag")!;
    expect(etag).toMatch(/^"[0-9a-f]{16}"$/);
    expect((await t.call("GET", "/")).text).toContain(`app.js?v=${etag.slice(1, -1)}`);
    expect((await t.call("GET", "/ui/app.js", { headers: { "if-none-match": etag } })).status).toBe(304);
    const css = await t.call("GET", "/ui/app.css");
    expect([css.status, css.headers.get("content-type")]).toEqual([200, "text/css; charset=utf-8"]);
    expect(css.text).toContain(".uplot");
    for (const name of ["other.js", "..%2f..%2fpackage.json", "app.js.map"]) {
      const missing = await t.call("GET", `/ui/${name}`);
      expect([missing.status, missing.body.detail]).toEqual([404, "Dashboard file not found"]);
    }
  });
});

describe.skipIf(!HAS_CHROMIUM)("the dashboard in a browser", { timeout: 60_000 }, () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("creates the first admin on a new service, then logs out and in again; a wrong password is refused beside the form", async () => {
    const { page, problems, close } = await openDashboard(browser, t);
    await page.getByText("No user exists yet. Create the first administrator.").waitFor();
    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "first-admin");
    await page.getByLabel("Email").fill(ADMIN.email);
    await page.getByLabel("Username").fill(ADMIN.username);
    await page.getByLabel("Password").fill("short");
    await page.getByRole("button", { name: "Create administrator" }).click();
    // The browser's own check (minlength) stops it first: nothing is sent, nothing created.
    expect((await t.call("GET", "/api/cloud/auth/setup/status")).body.needs_setup).toBe(true);
    await page.getByLabel("Password").fill(ADMIN.password);
    await page.getByRole("button", { name: "Create administrator" }).click();
    await page.getByRole("heading", { name: "Queue", level: 1 }).waitFor();
    await page.getByText("Administration").waitFor();
    expect((await t.call("GET", "/api/cloud/auth/setup/status")).body.needs_setup).toBe(false);

    await page.getByRole("button", { name: "Log out" }).click();
    await page.getByRole("button", { name: "Log in" }).waitFor();
    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "login");
    await page.getByLabel("Username").fill(ADMIN.username);
    await page.getByLabel("Password").fill("not-the-password");
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("alert").getByText("Wrong username or password").waitFor();
    await page.getByLabel("Password").fill(ADMIN.password);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("heading", { name: "Queue", level: 1 }).waitFor();
    expect(await page.getByRole("navigation", { name: "Main" }).getByRole("link").allTextContents()).toEqual([
      "Queue",
      "Submit a job",
      "Environments",
      "Datasets",
      "Runs",
      "GPUs and workers",
      "Cost",
      "API keys",
      "Notifications",
      "Users",
      "Workers",
      "Limits and approvals",
      "Cloud and providers",
      "Metrics",
      "Audit trail",
    ]);
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await close();
  });

  it("offers a viewer no submission and no administration, and says why when they open such a view", async () => {
    const admin = { cookie: await sessionOf(t, ADMIN.username, ADMIN.password) };
    await createUserWithKey(t, admin, "viewer", "vic");
    const { page, problems, close } = await openDashboard(browser, t, {
      cookie: await sessionOf(t, "vic", "vic-password"),
      hash: "#/queue",
    });
    await page.getByRole("heading", { name: "Queue", level: 1 }).waitFor();
    expect(await page.getByRole("navigation", { name: "Main" }).getByRole("link").allTextContents()).toEqual([
      "Queue",
      "Environments",
      "Datasets",
      "Runs",
      "GPUs and workers",
      "API keys",
      "Notifications",
    ]);
    expect(await page.getByText("Administration").count()).toBe(0);
    await page.goto(`${t.base}/#/submit`);
    await page.getByText("This view needs the researcher level; you are viewer.").waitFor();
    expect(await page.getByRole("form").count()).toBe(0);
    await page.goto(`${t.base}/#/users`);
    await page.getByText("This view needs the admin level; you are viewer.").waitFor();
    await page.goto(`${t.base}/#/cost`);
    await page.getByText("This view needs the researcher level; you are viewer.").waitFor();
    await page.goto(`${t.base}/#/no-such-view`);
    await page.getByRole("heading", { name: "Not found" }).waitFor();
    expect(problems).toEqual([]);
    await close();
  });

  it("shows the login form, saying the session ended, when the session ends under the page", async () => {
    const cookie = await sessionOf(t, ADMIN.username, ADMIN.password);
    const { page, problems, close } = await openDashboard(browser, t, { cookie, hash: "#/queue" });
    await page.getByRole("heading", { name: "Queue", level: 1 }).waitFor();
    expect((await t.call("POST", "/api/cloud/auth/logout", { auth: { cookie }, headers: { origin: t.base } })).status).toBe(200);
    // Open another view (by its address: the queue's own refresh may already have found the
    // session gone and taken the navigation away, which must end the same way).
    await page.evaluate(() => (location.hash = "#/keys"));
    await page.getByText("Your session ended. Log in again to go on.").waitFor();
    await page.getByRole("button", { name: "Log in" }).waitFor();
    expect(problems).toEqual([]);
    await close();
  });

  it("fits a phone: the navigation folds behind a Menu button; dark when the system is dark; the skip link reaches the view", async () => {
    const cookie = await sessionOf(t, ADMIN.username, ADMIN.password);
    const { page, problems, close } = await openDashboard(browser, t, {
      cookie,
      hash: "#/queue",
      viewport: { width: 390, height: 844 },
      colorScheme: "dark",
    });
    await page.getByRole("heading", { name: "Queue", level: 1 }).waitFor();
    const users = page.getByRole("link", { name: "Users" });
    expect(await users.isVisible()).toBe(false);
    const menu = page.getByRole("button", { name: "Menu" });
    expect(await menu.getAttribute("aria-expanded")).toBe("false");
    await menu.click();
    expect(await menu.getAttribute("aria-expanded")).toBe("true");
    await users.waitFor({ state: "visible" });
    await screenshot(page, "phone-menu");
    const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    expect(background).toBe("rgb(15, 17, 21)");
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await users.click();
    await page.getByRole("heading", { name: "Users", level: 1 }).waitFor();
    // The view's heading takes the focus when a view opens (keyboard and screen-reader users land on it).
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("page-title");
    // A fresh page: the first Tab reaches the skip link.
    await page.reload();
    await page.getByRole("heading", { name: "Users", level: 1 }).waitFor();
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Skip to content");
    await page.keyboard.press("Enter");
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("page-title");
    expect(problems).toEqual([]);
    await close();
  });
});
