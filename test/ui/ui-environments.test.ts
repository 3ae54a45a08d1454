// The environments view (#/environments, #/environments/<name>) in a real browser against the real
// stack: a new researcher sets one up from scratch; another researcher can only read it.
import { readFileSync } from "node:fs";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAS_CHROMIUM, launchBrowser, openDashboard, screenshot, seriousA11yViolations, type DashboardPage } from "../helpers/browser";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

/** Markup in a value: it must show as text and never run. */
const HOSTILE = `<img src=x id=pwned onerror="document.body.dataset.pwned='yes'">`;

describe.skipIf(!HAS_CHROMIUM)("the environments view in a browser", () => {
  let t: TestStack;
  let browser: Browser;
  let ada: { cookie: string; key: string };
  let mallory: { cookie: string; key: string };
  let dash: DashboardPage;
  const read = async (name: string, who = ada) => {
    const reply = await t.call("GET", `/api/configs/${name}`, { auth: { key: who.key } });
    expect(reply.status, reply.text).toBe(200);
    return reply.body;
  };
  const option = (name: string) => dash.page.getByLabel(name, { exact: true });
  const errorOf = (id: string) => dash.page.locator(`[id="${id}-error"]`);

  beforeAll(async () => {
    t = await startTestStack();
    const admin = await setUpAdmin(t);
    ada = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "ada");
    mallory = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "mallory");
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await dash?.close();
    await browser?.close();
    await t?.stop();
  });

  it(
    "lets a new researcher create an environment from scratch, set options, see a refused value beside its field with nothing saved, and edit the dataloader",
    { timeout: 90_000 },
    async () => {
      dash = await openDashboard(browser, t, { cookie: ada.cookie, hash: "#/environments" });
      const { page } = dash;
      await page.getByRole("heading", { level: 1, name: "Environments" }).waitFor();
      await page.getByText("0 environment(s)").waitFor();
      expect(await seriousA11yViolations(page)).toEqual([]);

      const create = page.getByRole("region", { name: "Create an environment" });
      await create.getByLabel("Name").fill("portraits");
      await create.getByRole("button", { name: "Create" }).click();
      await page.getByRole("heading", { level: 1, name: "Environment portraits" }).waitFor();
      expect(page.url()).toContain("#/environments/portraits");
      expect((await read("portraits")).owner).toBe("ada");

      const details = page.getByRole("region", { name: "Details" });
      await details.getByLabel("Description").fill("Portrait LoRA, first try");
      await details.getByLabel("Tags").fill("flux, portraits");
      await details.getByRole("button", { name: "Save details" }).click();
      await details.getByRole("status").getByText("Details saved.").waitFor();
      await expect.poll(async () => (await read("portraits")).tags).toEqual(["flux", "portraits"]);
      expect((await read("portraits")).description).toBe("Portrait LoRA, first try");

      // Options by type: a number typed, a choice from its allowed values, a boolean.
      await expect.poll(() => option("--learning_rate").getAttribute("placeholder")).toBe("0.0001");
      await option("--learning_rate").fill("0.0002");
      await option("--lr_scheduler").selectOption("cosine");
      await option("--validation_preview").selectOption("true");
      await page.getByRole("button", { name: "Save options" }).click();
      await page.getByRole("status").getByText("Options saved.").waitFor();
      await expect
        .poll(async () => (await read("portraits")).config)
        .toEqual({
          "--learning_rate": 0.0002,
          "--lr_scheduler": "cosine",
          "--validation_preview": true,
        });

      // The whole map checked as a training run would take it: what is missing, beside its field; nothing saved.
      await page.getByRole("button", { name: "Check as a training run" }).click();
      await page
        .getByRole("status")
        .getByText(/option\(s\) need attention/)
        .waitFor();
      await errorOf("opt---output_dir")
        .getByText(/^required/)
        .waitFor();
      await errorOf("opt---max_train_steps").getByText("set --max_train_steps or --num_train_epochs (a positive number)").waitFor();
      expect((await read("portraits")).config).toEqual({
        "--learning_rate": 0.0002,
        "--lr_scheduler": "cosine",
        "--validation_preview": true,
      });

      // Checked as typed (the type), then refused by the API's rules on save: each beside its field.
      await option("--train_batch_size").fill("two");
      await errorOf("opt---train_batch_size").getByText('must be a whole number, not "two"').waitFor();
      await option("--learning_rate").fill("2");
      await page.getByRole("button", { name: "Save options" }).click();
      await errorOf("opt---learning_rate").getByText("must be between 0 and 1 (for example 0.0001)").waitFor();
      expect(await option("--learning_rate").getAttribute("aria-invalid")).toBe("true");
      await page.getByRole("alert").filter({ hasText: "body.config.--learning_rate" }).waitFor();
      expect((await read("portraits")).config).toEqual({
        "--learning_rate": 0.0002,
        "--lr_scheduler": "cosine",
        "--validation_preview": true,
      });

      // Put them right, add an option the catalogue does not know, save.
      await option("--learning_rate").fill("0.0003");
      await option("--train_batch_size").fill("2");
      await page.getByLabel("Option name").fill("--flow_schedule_shift");
      await page.getByLabel("Option value").fill("3.5");
      await page.getByRole("button", { name: "Add option" }).click();
      await page.getByText("not in the catalogue").waitFor();
      await page.getByRole("button", { name: "Save options" }).click();
      await page.getByRole("status").getByText("Options saved.").waitFor();
      await expect
        .poll(async () => (await read("portraits")).config)
        .toEqual({
          "--learning_rate": 0.0003,
          "--lr_scheduler": "cosine",
          "--validation_preview": true,
          "--train_batch_size": 2,
          "--flow_schedule_shift": 3.5,
        });

      // The dataloader: a conditioning id that names nothing is refused beside its field; then a real edit.
      const conditioning = page.getByLabel("conditioning_data").first();
      await conditioning.fill("no-such-dataset");
      await conditioning.press("Tab");
      await page.getByRole("button", { name: "Save dataloader" }).click();
      await errorOf("ds0-conditioning_data").getByText('no dataset has the id "no-such-dataset"').waitFor();
      expect((await read("portraits")).dataloader[0].conditioning_data).toBeUndefined();
      await conditioning.fill("");
      await conditioning.press("Tab");
      const resolution = page.getByLabel("resolution", { exact: true }).first();
      await resolution.fill("512");
      await resolution.press("Tab");
      await page.getByLabel("crop_style").first().selectOption("center");
      await page.getByRole("button", { name: "Save dataloader" }).click();
      await page.getByRole("status").getByText("Dataloader saved.").waitFor();
      await expect.poll(async () => (await read("portraits")).dataloader[0]).toMatchObject({ resolution: 512, crop_style: "center" });
      expect((await read("portraits")).dataloader[0].conditioning_data).toBeUndefined();

      await page.getByRole("heading", { level: 2, name: "Dataloader" }).waitFor();
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, "environment");
      expect(dash.problems).toEqual([]);
    },
  );

  it("creates an environment from a shipped example, its options in the form", { timeout: 60_000 }, async () => {
    const { page } = dash;
    await page.goto(`${t.base}/#/environments`);
    const create = page.getByRole("region", { name: "Create an environment" });
    await create.getByLabel("Name").fill("demo-copy");
    await create.getByLabel("Start from").selectOption("demo");
    await create.getByRole("button", { name: "Create" }).click();
    await page.getByRole("heading", { level: 1, name: "Environment demo-copy" }).waitFor();
    await expect.poll(() => option("--trainer").inputValue()).toBe("demo");
    expect(await option("--max_train_steps").inputValue()).toBe("50");
    const stored = await read("demo-copy");
    expect(stored.config["--trainer"]).toBe("demo");
    await page.goto(`${t.base}/#/environments/portraits`);
    await page.getByRole("heading", { level: 1, name: "Environment portraits" }).waitFor();
  });

  it("exports the environment as a file and imports it under another name", { timeout: 60_000 }, async () => {
    const { page } = dash;
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export (download)" }).click()]);
    expect(download.suggestedFilename()).toBe("portraits.json");
    const file = readFileSync((await download.path())!, "utf8");
    const exported = JSON.parse(file);
    expect(exported).toMatchObject({ name: "portraits", config: (await read("portraits")).config });

    await page.goto(`${t.base}/#/environments`);
    const form = page.getByRole("region", { name: "Import an environment" });
    await form
      .getByLabel("Exported file")
      .setInputFiles({ name: "portraits.json", mimeType: "application/json", buffer: Buffer.from(file) });
    await form.getByLabel("Import as").fill("portraits-copy");
    await form.getByRole("button", { name: "Import" }).click();
    await page.getByRole("heading", { level: 1, name: "Environment portraits-copy" }).waitFor();
    const copy = await read("portraits-copy");
    const original = await read("portraits");
    expect(copy).toMatchObject({ owner: "ada", config: original.config, dataloader: original.dataloader, tags: original.tags });
  });

  it(
    "matches an edit dataset's file names with its reference dataset's, naming the ones without a namesake as text",
    { timeout: 60_000 },
    async () => {
      const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);
      // No quotes or slashes: a multipart file name carries quotes percent-encoded, and a slash is a folder.
      const hostileName = "<img src=x id=pwned onerror=document.body.dataset.pwned=1>.png";
      const upload = async (target: string, names: string[]) => {
        const form = new FormData();
        form.set("target_path", target);
        for (const name of names) form.append("files[]", new Blob([png]), name);
        const reply = await fetch(`${t.base}/api/datasets/upload`, { method: "POST", headers: { "x-api-key": ada.key }, body: form });
        expect(reply.status, await reply.clone().text()).toBe(201);
      };
      await upload("edits", ["001.png", "002.png", hostileName]);
      await upload("refs", ["001.png", "003.png"]);
      const dataloader = [
        { id: "edits", type: "local", dataset_type: "image", instance_data_dir: "datasets/edits", conditioning_data: ["refs"] },
        {
          id: "refs",
          type: "local",
          dataset_type: "conditioning",
          instance_data_dir: "datasets/refs",
          conditioning_type: "reference_strict",
        },
      ];
      const saved = await t.call("PUT", "/api/configs/portraits-copy", { json: { dataloader }, auth: { key: ada.key } });
      expect(saved.status, saved.text).toBe(200);

      const { page } = dash;
      // Already open there after the import: load the page again to read the dataloader saved above.
      await page.goto(`${t.base}/#/environments/portraits-copy`);
      await page.reload();
      await page.getByRole("heading", { level: 1, name: "Environment portraits-copy" }).waitFor();
      await page.getByRole("button", { name: "Match edit and reference file names" }).click();
      const line = page.getByText(/^edits and refs:/);
      await line.waitFor();
      expect(await line.textContent()).toBe(
        `edits and refs: 2 file(s) of edits without a match in refs (002.png, ${hostileName}); 1 of refs without one in edits (003.png)`,
      );
      expect(await page.locator("#pwned").count()).toBe(0);
      expect(await page.evaluate(() => document.body.dataset.pwned)).toBeUndefined();
    },
  );

  it(
    "shows another researcher's environment read-only and refuses their forced save, the environment unchanged",
    { timeout: 60_000 },
    async () => {
      const before = await read("portraits");
      const view = await openDashboard(browser, t, { cookie: mallory.cookie, hash: "#/environments/portraits" });
      try {
        const { page } = view;
        await page.getByText("Read-only: this environment belongs to ada").waitFor();
        expect(await page.getByLabel("--learning_rate", { exact: true }).inputValue()).toBe("0.0003");
        expect(await page.getByLabel("--learning_rate", { exact: true }).isDisabled()).toBe(true);
        expect(await page.getByLabel("resolution", { exact: true }).first().isDisabled()).toBe(true);
        expect(await page.getByRole("button", { name: "Save options" }).count()).toBe(0);
        expect(await page.getByRole("button", { name: /^Delete/ }).count()).toBe(0);

        // Forced from the page with mallory's session: the API refuses it.
        const forced = await page.evaluate(async () => {
          const reply = await fetch("/api/configs/portraits", {
            method: "PUT",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify({ description: "taken", config: { "--learning_rate": 0.9 }, dataloader: [] }),
          });
          return { status: reply.status, body: await reply.json() };
        });
        expect(forced.status).toBe(403);
        expect(forced.body.code).toBe("not_owner");
        const deleted = await page.evaluate(async () => (await fetch("/api/configs/portraits", { method: "DELETE" })).status);
        expect(deleted).toBe(403);
        expect(await read("portraits")).toEqual(before);
        expect(await seriousA11yViolations(page)).toEqual([]);
      } finally {
        await view.close();
      }
    },
  );

  it("shows markup in option values, descriptions and tags as text", { timeout: 60_000 }, async () => {
    const saved = await t.call("PUT", "/api/configs/portraits-copy", {
      json: { description: HOSTILE, tags: [HOSTILE], config: { ...(await read("portraits-copy")).config, "--my_note": HOSTILE } },
      auth: { key: ada.key },
    });
    expect(saved.status, saved.text).toBe(200);
    const view = await openDashboard(browser, t, { cookie: mallory.cookie, hash: "#/environments" });
    try {
      const { page } = view;
      await page.getByRole("link", { name: "portraits-copy" }).waitFor();
      expect(await page.getByText(HOSTILE).count()).toBe(2);
      await page.getByRole("link", { name: "portraits-copy" }).click();
      await page.getByRole("heading", { level: 1, name: "Environment portraits-copy" }).waitFor();
      expect(await page.getByLabel("--my_note", { exact: true }).inputValue()).toBe(HOSTILE);
      expect(await page.getByLabel("Description").inputValue()).toBe(HOSTILE);
      expect(await page.locator("#pwned").count()).toBe(0);
      expect(await page.evaluate(() => document.body.dataset.pwned)).toBeUndefined();
      expect(view.problems).toEqual([]);
    } finally {
      await view.close();
    }
  });
});
