// The dashboard's Notifications view (#/notifications) in a real browser against the real stack
// with its local runner, an SMTP sink and a webhook sink started here: a private address and a
// bad e-mail refused beside their fields with nothing saved; preferences saved in the view, a job
// completed and its message received by the sinks and listed as delivered; the admin's SMTP form
// with a test message received by the SMTP sink (a refusing server's answer and a bad address shown), its
// password never in the page or an answer.
// Attackers: a viewer sees no SMTP form and its forced PUT is refused, changing nothing; HTML in
// a job's name and a target shown as text. axe: no serious or critical violation.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Locator } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAS_CHROMIUM, launchBrowser, openDashboard, screenshot, seriousA11yViolations, type DashboardPage } from "../helpers/browser";
import { mailParts, startHttpSink, startSmtpSink, type HttpSink, type SmtpSink } from "../helpers/sinks";
import { createUserWithKey, setUpAdmin, startStackWithLocalRunner, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let browser: Browser;
let admin: { key: string; cookie: string };
let smtp: SmtpSink;
let hook: HttpSink;
const users: Record<string, { cookie: string; key: string }> = {};
const SMTP_PASSWORD = "sm7p-Pa55word-never-shown";
const HTML_NAME = `<img src=x onerror="document.title='pwned'"> & <b>bold</b>`;

const as = (name: string) => ({ auth: { key: users[name]?.key ?? admin.key } });
const prefsOf = async (name: string) => (await t.call("GET", "/api/users/me/notifications", as(name))).body;
const smtpSettings = async () => (await t.call("GET", "/api/admin/notifications/smtp", { auth: { key: admin.key } })).body;

async function open(cookie: string): Promise<DashboardPage> {
  const dashboard = await openDashboard(browser, t, { cookie, hash: "#/notifications" });
  dashboard.page.on("dialog", (dialog) => {
    dashboard.problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  await dashboard.page.getByRole("heading", { name: "Notifications", level: 1 }).waitFor();
  return dashboard;
}

/** The text of the refusal shown beside a control (its aria-describedby's error element). */
async function errorBeside(control: Locator): Promise<string> {
  await expect.poll(() => control.getAttribute("aria-invalid")).toBe("true");
  const id = await control.getAttribute("id");
  return (await control.page().locator(`#${id}-error`).textContent()) ?? "";
}

describe.skipIf(!HAS_CHROMIUM)("the Notifications view", () => {
  beforeAll(async () => {
    t = await startStackWithLocalRunner(mkdtempSync(join(tmpdir(), "ui-notify-runner-")));
    admin = await setUpAdmin(t);
    users.rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
    users.vera = await createUserWithKey(t, { key: admin.key }, "viewer", "vera");
    smtp = await startSmtpSink();
    hook = await startHttpSink();
    expect(
      (await t.call("POST", "/api/configs/environments", { json: { name: "quick", from_example: "demo" }, ...as("admin") })).status,
    ).toBe(201);
    const { config } = (await t.call("GET", "/api/configs/quick", as("admin"))).body;
    const quick = { ...config, "--max_train_steps": 4, "--demo_step_ms": 10, "--validation_steps": 0, "--checkpointing_steps": 0 };
    expect((await t.call("PUT", "/api/configs/quick", { json: { config: quick }, ...as("admin") })).status).toBe(200);
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await hook?.close();
    await smtp?.close();
    await t?.stop();
  });

  it("refuses a private webhook address and a bad e-mail beside their fields, saving nothing", async () => {
    const before = await prefsOf("rita");
    expect(before).toMatchObject({ updated_at: null, webhook_secret: "" });
    const { page, problems, close } = await open(users.rita!.cookie);
    try {
      const form = page.getByRole("form", { name: "Notification preferences" });
      const webhook = form.getByLabel("Webhook URL", { exact: true });
      await webhook.fill("http://127.0.0.1:9/hook");
      await form.getByRole("button", { name: "Save preferences" }).click();
      expect(await errorBeside(webhook)).toMatch(/private|loopback|local/i);
      expect(await prefsOf("rita")).toEqual(before);

      await webhook.fill("");
      const email = form.getByLabel("E-mail address", { exact: true });
      await email.fill("not-an-address");
      await form.getByRole("button", { name: "Save preferences" }).click();
      expect(await errorBeside(email)).toMatch(/e-?mail/i);
      expect(await webhook.getAttribute("aria-invalid")).toBeNull();
      expect(await prefsOf("rita")).toEqual(before);
      await page.getByText("Never saved: nothing is sent to you yet.").waitFor();
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it("lets an admin set the SMTP server and send a test message the sink receives, the password never shown back", async () => {
    // What the test stacks do for their local sinks: allow private targets.
    expect((await t.call("PUT", "/api/admin/webhooks", { json: { allow_private_targets: true }, ...as("admin") })).status).toBe(200);
    const { page, problems, close } = await open(admin.cookie);
    const answers: string[] = [];
    page.on("response", (response) => {
      if (response.url().includes("/api/"))
        void response.text().then(
          (text) => answers.push(text),
          () => undefined,
        );
    });
    try {
      const form = page.getByRole("form", { name: "SMTP settings" });
      await form.getByLabel("Host", { exact: true }).fill("127.0.0.1");
      await form.getByLabel("Port", { exact: true }).fill("not a port");
      await form.getByLabel("Security", { exact: true }).selectOption("none");
      await form.getByLabel("User", { exact: true }).fill("mailer");
      await form.getByLabel("Password", { exact: true }).fill(SMTP_PASSWORD);
      await form.getByLabel("From address", { exact: true }).fill("jobs@example.com");
      await form.getByRole("button", { name: "Save SMTP settings" }).click();
      expect(await errorBeside(form.getByLabel("Port", { exact: true }))).toMatch(/number/i);
      expect(await smtpSettings()).toMatchObject({ host: "", password: "" });

      await form.getByLabel("Port", { exact: true }).fill(String(smtp.port));
      await form.getByRole("button", { name: "Save SMTP settings" }).click();
      await form.getByRole("status").getByText("SMTP settings saved.").waitFor();
      expect(await smtpSettings()).toEqual({
        host: "127.0.0.1",
        port: smtp.port,
        tls: "none",
        username: "mailer",
        password: "********",
        from: "jobs@example.com",
      });
      expect(await form.getByLabel("Password", { exact: true }).inputValue()).toBe("");
      await form.getByText("A password is stored; never shown.").waitFor();

      const test = page.getByRole("form", { name: "Test message" });
      await test.getByLabel("Send a test message to").fill("ops at example");
      await test.getByRole("button", { name: "Send test message" }).click();
      expect(await errorBeside(test.getByLabel("Send a test message to"))).toMatch(/e-?mail/i);
      expect(smtp.mails).toEqual([]);
      await test.getByLabel("Send a test message to").fill("ops@example.com");
      await test.getByRole("button", { name: "Send test message" }).click();
      await test.getByRole("status").getByText("Sent to ops@example.com: the server took it.").waitFor();
      const mail = smtp.mails.find((m) => m.to.includes("ops@example.com"))!;
      expect(mail).toMatchObject({ from: "jobs@example.com", user: "mailer" });
      expect(mailParts(mail.data).subject).toBe("[training] SMTP test");

      // A server that refuses the recipient: the outcome says why (the form below puts the good sink back).
      const refusing = await startSmtpSink({ rejectRcpt: true });
      try {
        const moved = await t.call("PUT", "/api/admin/notifications/smtp", {
          json: { host: "127.0.0.1", port: refusing.port, tls: "none", username: "mailer", from: "jobs@example.com" },
          ...as("admin"),
        });
        expect(moved.status, moved.text).toBe(200);
        await test.getByRole("button", { name: "Send test message" }).click();
        await test
          .getByRole("status")
          .getByText(/^Not sent: .*550/)
          .waitFor();
      } finally {
        await refusing.close();
      }

      // Saving again without typing a password keeps the stored one (the test still authenticates).
      await form.getByLabel("User", { exact: true }).fill("mailer2");
      await form.getByRole("button", { name: "Save SMTP settings" }).click();
      await expect.poll(async () => (await smtpSettings()).username).toBe("mailer2");
      expect(await smtpSettings()).toMatchObject({ port: smtp.port, password: "********" });
      await test.getByRole("button", { name: "Send test message" }).click();
      await test.getByRole("status").getByText("Sent to ops@example.com: the server took it.").waitFor();
      expect(smtp.mails.filter((m) => m.to.includes("ops@example.com")).map((m) => m.user)).toEqual(["mailer", "mailer2"]);

      // Removing the stored password is a choice of its own, never an empty field.
      await form.getByLabel("Remove the stored password").check();
      await form.getByRole("button", { name: "Save SMTP settings" }).click();
      await form.getByText("None stored.").waitFor();
      expect(await smtpSettings()).toMatchObject({ username: "mailer2", password: "" });

      // The admin's own preferences offer the admins' kinds.
      await page.getByRole("checkbox", { name: /approval\.needed/ }).waitFor();
      await page.getByRole("checkbox", { name: /gpu\.quarantined/ }).waitFor();
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, "notifications-admin");
      await page.reload();
      await page.getByRole("form", { name: "SMTP settings" }).getByLabel("Host", { exact: true }).waitFor();
      expect(await page.content()).not.toContain(SMTP_PASSWORD);
      expect(answers.length).toBeGreaterThan(0);
      expect(answers.filter((text) => text.includes(SMTP_PASSWORD))).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it("saves a user's preferences, and a completed job's message reaches the sinks and is listed as delivered, HTML as text", async () => {
    const { page, problems, close } = await open(users.rita!.cookie);
    try {
      const form = page.getByRole("form", { name: "Notification preferences" });
      // A researcher is not offered the kinds only admins are sent.
      await form.getByRole("checkbox", { name: /job\.completed/ }).waitFor();
      expect(await form.getByRole("checkbox", { name: /approval\.needed|gpu\.quarantined/ }).count()).toBe(0);
      for (const box of await form.getByRole("checkbox").all()) await box.uncheck();
      await form.getByRole("checkbox", { name: /job\.completed/ }).check();
      const target = `${hook.url}/rita?tag=<b>x</b>`;
      await form.getByLabel("Webhook URL", { exact: true }).fill(target);
      await form.getByLabel("E-mail address", { exact: true }).fill("rita@example.com");
      await form.getByRole("button", { name: "Save preferences" }).click();
      await form.getByRole("status").getByText("Preferences saved.").waitFor();
      const saved = await prefsOf("rita");
      // Unchecked in the view: every kind the view offers but job.completed; the admins' kinds kept as stored (all, never saved before).
      expect(saved).toMatchObject({
        kinds: ["job.completed", "approval.needed", "gpu.quarantined"],
        channels: { webhook: { url: target }, slack: null, email: { address: "rita@example.com" } },
      });
      expect(saved.webhook_secret).toMatch(/^whsec_/);
      expect(await page.locator("#notify-webhook-secret").textContent()).toBe(saved.webhook_secret);
      expect(await form.getByLabel("Webhook URL", { exact: true }).inputValue()).toBe(target);

      const submitted = await t.call("POST", "/api/queue/submit", {
        json: { config_name: "quick", metadata: { name: HTML_NAME } },
        ...as("rita"),
      });
      expect(submitted.status, submitted.text).toBeLessThan(300);
      const jobId = submitted.body.job_id as string;
      await until(
        "the job to complete",
        async () => (await t.call("GET", `/api/queue/jobs/${jobId}`, as("admin"))).body.status === "completed",
        { timeoutMs: 60_000 },
      );
      const request = await until("the webhook", () => hook.requests.find((r) => r.body.includes(jobId)));
      expect(request.path).toBe("/rita?tag=%3Cb%3Ex%3C/b%3E");
      expect(JSON.parse(request.body)).toMatchObject({ type: "job.completed", data: { job_id: jobId, job_name: HTML_NAME } });
      const mail = await until("the e-mail", () => smtp.mails.find((m) => m.to.includes("rita@example.com")));
      expect(mailParts(mail.data).subject).toBe(`[training] ${HTML_NAME}: completed`);

      const table = page.getByRole("table", { name: /Each message on each channel/ });
      await expect
        .poll(
          async () => {
            await page.getByRole("button", { name: "Refresh" }).click();
            return table
              .locator("tbody tr")
              .evaluateAll((rows) =>
                rows.map((row) => Array.from(row.querySelectorAll("td"), (c) => (c.textContent ?? "").trim()).slice(1)),
              );
          },
          { timeout: 20_000 },
        )
        .toEqual(
          expect.arrayContaining([
            ["job.completed", `[training] ${HTML_NAME}: completed`, "webhook", target, "delivered", "1", "-"],
            ["job.completed", `[training] ${HTML_NAME}: completed`, "email", "rita@example.com", "delivered", "1", "-"],
          ]),
        );
      expect(await page.locator("main img, main b").count()).toBe(0);
      expect(await page.title()).not.toBe("pwned");
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, "notifications-user");
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  }, 120_000);

  it("shows a viewer no SMTP form; its forced PUT and test-send are refused and change nothing", async () => {
    const before = await smtpSettings();
    const mailsBefore = smtp.mails.length;
    const { page, problems, close } = await open(users.vera!.cookie);
    try {
      await page.getByRole("form", { name: "Notification preferences" }).waitFor();
      await page.getByRole("heading", { name: "Recent deliveries" }).waitFor();
      // Reached from the menu, as every signed-in user's view.
      const link = page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Notifications" });
      expect(await link.getAttribute("href")).toBe("#/notifications");
      expect(await link.getAttribute("aria-current")).toBe("page");
      expect(await page.getByRole("form", { name: "SMTP settings" }).count()).toBe(0);
      expect(await page.getByText("E-mail server (SMTP, admin)").count()).toBe(0);
      const forced = await page.evaluate(async () => {
        const put = await fetch("/api/admin/notifications/smtp", {
          method: "PUT",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ host: "evil.example", port: 25, tls: "none", username: "x", password: "y", from: "x@evil.example" }),
        });
        const send = await fetch("/api/admin/notifications/smtp/test", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ to: "victim@example.com" }),
        });
        const read = await fetch("/api/admin/notifications/smtp");
        return [put.status, send.status, read.status];
      });
      expect(forced).toEqual([403, 403, 403]);
      expect(await smtpSettings()).toEqual(before);
      expect(smtp.mails.length).toBe(mailsBefore);
      // Rita's preferences are hers alone: the viewer's page shows the viewer's (never saved).
      expect(await page.locator("#notify-webhook-secret").count()).toBe(0);
      expect(await page.getByLabel("E-mail address", { exact: true }).inputValue()).toBe("");
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });
});
