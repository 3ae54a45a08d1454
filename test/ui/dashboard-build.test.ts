// The dashboard's script as the Worker serves it (edge/local/ui-build.ts): at most 250 KB minified,
// with no zod and no schema in it (its endpoint table is method, path and answer kind only), a
// build that stops, naming the file, when a module of the dashboard imports zod or shared/schemas
// at run time; and, in chromium, the dashboard built that way still logs in and shows the queue.
import { fileURLToPath } from "node:url";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildDashboard, bundleDashboard, DASHBOARD_SCRIPT_BUDGET, wireEndpoints } from "../../edge/local/ui-build";
import { endpoints } from "../../shared/client/endpoints";
import { HAS_CHROMIUM, launchBrowser, openDashboard, seriousA11yViolations } from "../helpers/browser";
import { ADMIN, createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

const UI_DIR = fileURLToPath(new URL("../../edge/ui/", import.meta.url));
const XSS = `<img src=x onerror=alert(1)>`;
const T = 60_000;

/** Builds `contents` as if it were the dashboard's entry (imports resolve from edge/ui/). */
const buildAsDashboard = (contents: string) => buildDashboard({ contents, resolveDir: UI_DIR });

describe("the dashboard's script", () => {
  it("is at most 250 KB minified and carries no zod, no schema and none of zod's messages", async () => {
    const { build, scriptBytesByOrigin } = await bundleDashboard();
    expect(DASHBOARD_SCRIPT_BUDGET).toBe(250_000);
    expect(build.js.length).toBeLessThanOrEqual(DASHBOARD_SCRIPT_BUDGET);
    // What it is made of: the views, the shared helpers and the UI packages; zod is none of them.
    expect(scriptBytesByOrigin["edge/ui"]).toBeGreaterThan(0);
    expect(scriptBytesByOrigin["preact"]).toBeGreaterThan(0);
    expect(Object.keys(scriptBytesByOrigin).filter((origin) => /zod|schemas/.test(origin))).toEqual([]);
    for (const zodText of ["$ZodType", "ZodError", "Invalid input", "Ungültige Eingabe"]) expect(build.js).not.toContain(zodText);
  });

  it("calls every endpoint by its method and path, marking raw answers, and nothing else of it", async () => {
    const { js } = await buildDashboard();
    const table = wireEndpoints();
    expect(Object.keys(table)).toEqual(Object.keys(endpoints));
    for (const [name, e] of Object.entries(endpoints)) {
      expect(table[name]).toEqual({ method: e.method, path: e.path, response: e.response === "raw" ? "raw" : "json" });
      expect(js).toContain(JSON.stringify(e.path));
    }
    expect(table.queueChanges!.response).toBe("raw");
    expect(table.queueList!.response).toBe("json");
  });

  it("stops the build, naming the importing file, when the dashboard imports zod or shared/schemas at run time", async () => {
    await expect(buildAsDashboard(`import { z } from "zod"; console.log(z.string().parse("x"));`)).rejects.toThrow(
      /the dashboard imports zod at run time \(edge\/ui\/entry\.tsx imports "zod"\)/,
    );
    await expect(buildAsDashboard(`import { z } from "@hono/zod-openapi"; console.log(z.number());`)).rejects.toThrow(
      /the dashboard imports @hono\/zod-openapi at run time/,
    );
    await expect(buildAsDashboard(`import { QueueList } from "../../shared/schemas/queue"; console.log(QueueList);`)).rejects.toThrow(
      /the dashboard imports shared\/schemas at run time \(edge\/ui\/entry\.tsx imports "\.\.\/\.\.\/shared\/schemas\/queue"\)/,
    );
    // An endpoint table other than endpoints.ts carries its schemas: refused the same way, naming its file.
    await expect(
      buildAsDashboard(`import { datasetEndpoints } from "../../shared/client/endpoints-datasets"; console.log(datasetEndpoints);`),
    ).rejects.toThrow(/shared\/client\/endpoints-datasets\.ts imports "\.\.\/schemas\/datasets"/);
  });

  it("still builds a module that takes only types from shared/schemas, and the endpoints through edge/ui/api.ts", async () => {
    const { js } = await buildAsDashboard(
      `import type { QueueList } from "../../shared/schemas/queue";
       import { endpoints } from "./api";
       const empty: QueueList["jobs"] = [];
       console.log(empty, endpoints.queueList.path);`,
    );
    expect(js).toContain(`"/api/queue"`);
    expect(js.length).toBeLessThan(50_000);
  });
});

describe.skipIf(!HAS_CHROMIUM)("the lighter dashboard in chromium", () => {
  let t: TestStack;
  let browser: Browser;
  let otto: { key: string; id: number };
  const submit = async (key: string, body: Record<string, unknown>): Promise<string> => {
    const reply = await t.call("POST", "/api/queue/submit", { json: { config_name: "demo", ...body }, auth: { key } });
    expect(reply.status, reply.text).toBe(200);
    return reply.body.job_id;
  };

  beforeAll(async () => {
    t = await startTestStack();
    const admin = await setUpAdmin(t);
    otto = await createUserWithKey(t, { key: admin.key }, "researcher", "otto");
    const created = await t.call("POST", "/api/configs/environments", {
      json: { name: "demo", from_example: "demo" },
      auth: { key: admin.key },
    });
    expect(created.status, created.text).toBe(201);
    browser = await launchBrowser();
  }, T);
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it("serves the script that build makes, within the budget", async () => {
    const served = await t.call("GET", "/ui/app.js");
    expect(served.status).toBe(200);
    expect(served.text).toBe((await buildDashboard()).js);
    expect(served.text.length).toBeLessThanOrEqual(DASHBOARD_SCRIPT_BUDGET);
  });

  it(
    "logs in through its form (a wrong password refused beside it) and shows the queue with the jobs the API lists",
    async () => {
      const jobId = await submit(otto.key, { metadata: { run_name: "first run" } });
      const { page, problems, close } = await openDashboard(browser, t);
      await page.getByLabel("Username").fill(ADMIN.username);
      await page.getByLabel("Password").fill("not-the-password");
      await page.getByRole("button", { name: "Log in" }).click();
      await page.getByRole("alert").getByText("Wrong username or password").waitFor();
      await page.getByLabel("Password").fill(ADMIN.password);
      await page.getByRole("button", { name: "Log in" }).click();
      await page.getByRole("heading", { name: "Queue", level: 1 }).waitFor();
      const row = page.getByRole("row").filter({ hasText: jobId });
      await row.waitFor();
      const cells = await row.locator("td").allInnerTexts();
      expect(cells[1]).toContain("first run");
      expect(cells[2]).toBe("otto");
      expect(cells[3]).toBe("pending");
      // The queue's change stream (a raw endpoint, its URL from the table) is open, and the counts are drawn.
      await page
        .getByRole("status")
        .filter({ hasText: /^Live$/ })
        .waitFor();
      await page.getByRole("term").filter({ hasText: "Pending" }).waitFor();
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(problems).toEqual([]);
      await close();
    },
    T,
  );

  it(
    "shows a researcher's HTML in a run name as text in the admin's queue, answers read unparsed or not; nothing else changes",
    async () => {
      const jobId = await submit(otto.key, { metadata: { run_name: XSS } });
      const job = async () => {
        const { status, metadata, priority, user_id } = (await t.call("GET", `/api/queue/jobs/${jobId}`, { auth: { key: otto.key } })).body;
        return { status, metadata, priority, user_id };
      };
      const before = await job();
      expect(before).toMatchObject({ status: "pending", metadata: { run_name: XSS }, user_id: otto.id });
      const { page, problems, close } = await openDashboard(browser, t);
      const dialogs: string[] = [];
      page.on("dialog", (dialog) => {
        dialogs.push(dialog.message());
        void dialog.dismiss();
      });
      await page.getByLabel("Username").fill(ADMIN.username);
      await page.getByLabel("Password").fill(ADMIN.password);
      await page.getByRole("button", { name: "Log in" }).click();
      const row = page.getByRole("row").filter({ hasText: jobId });
      await row.waitFor();
      expect((await row.locator("td").allInnerTexts())[1]).toContain(XSS);
      expect(await page.locator("img").count()).toBe(0);
      expect(dialogs).toEqual([]);
      expect(problems).toEqual([]);
      expect(await job()).toEqual(before);
      await close();
    },
    T,
  );
});
