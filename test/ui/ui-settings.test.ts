import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAS_CHROMIUM, launchBrowser, openDashboard, screenshot, seriousA11yViolations, type DashboardPage } from "../helpers/browser";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

/** Markup an admin (or a provider's answer) might put into a setting: it must show as text. */
const HOSTILE = `<img src=x id=pwned onerror="document.body.dataset.pwned='yes'">`;
/** Markup that is still a valid allowed_scripts entry (an absolute path: no spaces, no . or .. segments). */
const HOSTILE_SCRIPT = `/opt/<img/src=x/onerror=document.body.dataset.pwned='yes'>`;

describe.skipIf(!HAS_CHROMIUM)("the settings views (limits, cloud, metrics, audit) in a browser", () => {
  let t: TestStack;
  let browser: Browser;
  let admin: { cookie: string; key: string };
  let dash: DashboardPage;
  const get = async (path: string) => {
    const reply = await t.call("GET", path, { auth: { key: admin.key } });
    expect(reply.status, reply.text).toBe(200);
    return reply.body;
  };
  const open = async (link: string) => {
    await dash.page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: link }).click();
    await dash.page.getByRole("heading", { level: 1, name: link }).waitFor();
  };

  beforeAll(async () => {
    t = await startTestStack();
    admin = await setUpAdmin(t);
    browser = await launchBrowser();
    dash = await openDashboard(browser, t, { cookie: admin.cookie, hash: "#/limits" });
  }, 120_000);

  afterAll(async () => {
    await dash?.close();
    await browser?.close();
    await t?.stop();
  });

  it(
    "changes the global concurrency limit; a bad value shows the 422 beside the form and changes nothing",
    { timeout: 60_000 },
    async () => {
      const { page } = dash;
      const form = page.getByRole("form", { name: "Concurrency limits" });
      const global = form.getByLabel("Running cloud jobs, in all");
      // The form fills in once the limits arrive: wait for them rather than read at once.
      await expect.poll(() => global.inputValue()).toBe("5");
      await global.fill("7");
      await form.getByRole("button", { name: "Save limits" }).click();
      await form.getByText("Limits saved").waitFor();
      expect((await get("/api/queue/concurrency")).max_concurrent).toBe(7);

      await global.fill("-1");
      await form.getByRole("button", { name: "Save limits" }).click();
      const alert = form.getByRole("alert");
      await alert.waitFor();
      expect(await alert.textContent()).toContain("body.max_concurrent");
      expect(await get("/api/queue/concurrency")).toMatchObject({ max_concurrent: 7, user_max_concurrent: 2 });
    },
  );

  it("sets the approval rules", { timeout: 60_000 }, async () => {
    const { page } = dash;
    const form = page.getByRole("form", { name: "Approval rules" });
    expect(await form.getByLabel("Cloud cost threshold").inputValue()).toBe("50");
    await form.getByLabel("Cloud cost threshold").fill("25");
    await form.getByLabel("Local GPU threshold").fill("2");
    await form.getByRole("button", { name: "Save approval rules" }).click();
    await form.getByText("Approval rules saved").waitFor();
    expect(await get("/api/queue/approval-rules")).toEqual({ cloud_cost_threshold: 25, local_gpu_threshold: 2 });

    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "limits");
  });

  it("sets the consent mode and the spending limit", { timeout: 60_000 }, async () => {
    // A value with markup, set over the API: the form must show it as text.
    const hostile = await t.call("PUT", "/api/cloud/settings", {
      json: { publishing: { s3: { prefix: HOSTILE } }, allowed_scripts: [HOSTILE_SCRIPT] },
      auth: { key: admin.key },
    });
    expect(hostile.status, hostile.text).toBe(200);

    await open("Cloud and providers");
    const { page } = dash;
    const form = page.getByRole("form", { name: "Cloud settings" });
    expect(await form.getByLabel("Always Ask").isChecked()).toBe(true);
    await form.getByLabel("Always Allow").check();
    await form.getByLabel("Spending limit (USD)").fill("150");
    await form.getByRole("button", { name: "Save cloud settings" }).click();
    await form.getByText("Cloud settings saved.").waitFor();
    expect(await get("/api/cloud/settings")).toMatchObject({ consent_mode: "allow", spending_limit_usd: 150, spending_period: "month" });

    await expect.poll(() => form.getByLabel("Allowed scripts").inputValue()).toBe(HOSTILE_SCRIPT);
    expect(await page.locator("#pwned").count()).toBe(0);
    // Hub and S3 publishing do not apply to cloud jobs: the form says so instead of offering them.
    expect(await form.getByLabel("Key prefix").count()).toBe(0);
    expect(await form.getByRole("checkbox", { name: /model hub/ }).count()).toBe(0);
    await form.getByText("do not apply to cloud jobs").waitFor();
  });

  it(
    "sets the programs cloud jobs' scripts may run; a bad entry shows the 422 beside the form and changes nothing",
    { timeout: 60_000 },
    async () => {
      const { page } = dash;
      const form = page.getByRole("form", { name: "Cloud settings" });
      const scripts = form.getByLabel("Allowed scripts");
      await expect.poll(() => scripts.inputValue()).toBe(HOSTILE_SCRIPT);
      // One program per line; blank lines and surrounding spaces are dropped.
      await scripts.fill("/src/hooks/notify.sh\n\n  notify-*  \n");
      await form.getByRole("button", { name: "Save cloud settings" }).click();
      await expect.poll(async () => (await get("/api/cloud/settings")).allowed_scripts).toEqual(["/src/hooks/notify.sh", "notify-*"]);
      await expect.poll(() => scripts.inputValue()).toBe("/src/hooks/notify.sh\nnotify-*");
      await form.getByText("Cloud settings saved.").waitFor();

      await scripts.fill("/src/hooks/notify.sh\n../x");
      await form.getByRole("button", { name: "Save cloud settings" }).click();
      const alert = form.getByRole("alert");
      await alert.waitFor();
      expect(await alert.textContent()).toContain("allowed_scripts");
      expect(await form.getByRole("status").textContent()).toBe("");
      expect(await scripts.inputValue()).toBe("/src/hooks/notify.sh\n../x");
      expect(await get("/api/cloud/settings")).toMatchObject({
        allowed_scripts: ["/src/hooks/notify.sh", "notify-*"],
        consent_mode: "allow",
        spending_limit_usd: 150,
      });
    },
  );

  it(
    "sets a provider's training destination and private-target allowance; a bad destination shows the 422 and changes nothing",
    { timeout: 60_000 },
    async () => {
      const { page } = dash;
      const provider = async () => await get("/api/cloud/providers/replicate");
      const form = page.getByRole("form", { name: "Settings of replicate" });
      const destination = form.getByLabel("Training destination");
      const allowPrivate = form.getByRole("checkbox", { name: /Allow private targets/ });
      const before = await provider();
      await expect.poll(() => destination.inputValue()).toBe(before.training_destination ?? "");
      expect(await allowPrivate.isChecked()).toBe(before.allow_private_targets);

      await destination.fill("alice/my-lora");
      await allowPrivate.setChecked(!before.allow_private_targets);
      await form.getByRole("button", { name: "Save provider settings" }).click();
      await expect
        .poll(async () => {
          const now = await provider();
          return [now.training_destination, now.allow_private_targets];
        })
        .toEqual(["alice/my-lora", !before.allow_private_targets]);
      await form.getByText("Settings of replicate saved").waitFor();

      await destination.fill("the trainer model");
      await form.getByRole("button", { name: "Save provider settings" }).click();
      const alert = form.getByRole("alert");
      await alert.waitFor();
      expect(await alert.textContent()).toContain("training_destination");
      expect(await provider()).toMatchObject({
        training_destination: "alice/my-lora",
        allow_private_targets: !before.allow_private_targets,
      });

      // Put the allowance back for what follows.
      await destination.fill("alice/my-lora");
      await allowPrivate.setChecked(before.allow_private_targets);
      await form.getByRole("button", { name: "Save provider settings" }).click();
      await expect.poll(async () => (await provider()).allow_private_targets).toBe(before.allow_private_targets);
    },
  );

  it("asks before switching ssl_verify off (Cancel keeps it on), and only once per session", { timeout: 60_000 }, async () => {
    const { page } = dash;
    const verify = async () => (await get("/api/cloud/providers/replicate")).ssl_verify;
    const toggle = page.getByRole("checkbox", { name: /Verify certificates/ });
    const dialog = page.getByRole("dialog", { name: "Turn certificate verification off?" });
    expect(await toggle.isChecked()).toBe(true);

    await toggle.click();
    await dialog.waitFor();
    await expect.poll(() => page.evaluate(() => document.activeElement?.closest("dialog") !== null)).toBe(true);
    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "cloud-confirm");
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await dialog.waitFor({ state: "hidden" });
    expect(await toggle.isChecked()).toBe(true);
    expect(await verify()).toBe(true);

    await toggle.click();
    await dialog.getByRole("button", { name: /^Confirm/ }).click();
    await page.getByText("Certificate checks are off; saved.").waitFor();
    expect(await toggle.isChecked()).toBe(false);
    expect(await verify()).toBe(false);

    await toggle.click();
    await page.getByText("Certificates are verified again; saved.").waitFor();
    expect(await verify()).toBe(true);

    // Confirmed once in this session: switching off again saves at once.
    await toggle.click();
    await page.getByText("Certificate checks are off; saved.").waitFor();
    expect(await dialog.isVisible()).toBe(false);
    expect(await verify()).toBe(false);

    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "cloud");
  });

  it("applies a metrics template and previews the scrape", { timeout: 60_000 }, async () => {
    await open("Metrics");
    const { page } = dash;
    expect(await page.getByRole("checkbox", { name: /^rate_limits/ }).isChecked()).toBe(false);
    await page.getByRole("button", { name: "Apply security" }).click();
    await page.getByText("Template applied").waitFor();
    expect(await get("/api/cloud/metrics/config")).toEqual({
      prometheus_enabled: false,
      prometheus_categories: ["jobs", "http", "rate_limits", "approvals", "audit"],
    });
    expect(await page.getByRole("checkbox", { name: /^rate_limits/ }).isChecked()).toBe(true);
    expect(await page.getByRole("checkbox", { name: /^health/ }).isChecked()).toBe(false);
    const preview = page.getByLabel("Metrics preview");
    await until("the preview of the security template", async () =>
      (await preview.textContent())?.includes("service_audit_log_entries_total"),
    );
    expect(await preview.textContent()).toContain("service_jobs_total");

    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "metrics");
  });

  it("lists the entries these changes made, shows their values as text, and verifies the chain", { timeout: 60_000 }, async () => {
    await open("Audit trail");
    const { page } = dash;
    for (const event of [
      "limits_changed",
      "approval_rules_changed",
      "cloud_settings_changed",
      "provider_settings_changed",
      "metrics_config_changed",
    ])
      await page.getByRole("cell", { name: event, exact: true }).first().waitFor();
    await page
      .getByRole("cell", { name: /<img src=x id=pwned/ })
      .first()
      .waitFor();
    expect(await page.locator("#pwned").count()).toBe(0);

    await page.getByLabel("Event type").fill("metrics_config_changed");
    await page.getByRole("button", { name: "Apply", exact: true }).click();
    await until("only metrics entries", async () => {
      const actions = await page.locator("tbody td:nth-child(4)").allTextContents();
      return actions.length === 1 && actions[0] === "metrics_config_changed";
    });

    await page.getByRole("button", { name: "Verify chain" }).click();
    await page.getByText("The chain is intact").waitFor();

    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "audit");
    expect(await page.evaluate(() => document.body.dataset.pwned)).toBeUndefined();
    expect(dash.problems).toEqual([]);
  });

  it("fits a phone's width", { timeout: 60_000 }, async () => {
    const phone = await openDashboard(browser, t, { cookie: admin.cookie, hash: "#/cloud", viewport: { width: 390, height: 844 } });
    try {
      await phone.page.getByRole("form", { name: "Settings of replicate" }).waitFor();
      // Tables scroll inside their .table-wrap; nothing else is wider than the phone.
      expect(await phone.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      await screenshot(phone.page, "cloud-phone");
      expect(phone.problems).toEqual([]);
    } finally {
      await phone.close();
    }
  });

  it("tells a researcher that #/limits needs admin, with no form", { timeout: 60_000 }, async () => {
    const researcher = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
    const view = await openDashboard(browser, t, { cookie: researcher.cookie, hash: "#/limits" });
    try {
      await view.page.getByText("This view needs the").waitFor();
      expect(await view.page.getByRole("main").textContent()).toContain("admin");
      expect(await view.page.getByRole("form").count()).toBe(0);
      expect(await view.page.getByRole("spinbutton").count()).toBe(0);
      expect(await view.page.getByRole("link", { name: "Limits and approvals" }).count()).toBe(0);
      expect(view.problems).toEqual([]);
    } finally {
      await view.close();
    }
  });
});
