// The job view (#/jobs/<id>): its event rules as pure functions, then in a real browser against
// the real stack whose local runner runs the demo trainer's CPU jobs.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyEvents, EMPTY_TRAINING, etaSeconds, LOG_LINES, safeImageSrc, type StreamEvent } from "../../edge/ui/views/job-events";
import { HAS_CHROMIUM, launchBrowser, openDashboard, screenshot, seriousA11yViolations, type DashboardPage } from "../helpers/browser";
import { fakeSimpleTuner, removeFakeSimpleTuners } from "../helpers/simpletuner";
import { createUserWithKey, setUpAdmin, startStackWithLocalRunner, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

const PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const at = (second: number) => new Date(Date.UTC(2026, 0, 1, 10, 0, second)).toISOString();
const progress = (index: number, step: number, second = index): StreamEvent => ({
  index,
  timestamp: at(second),
  type: "training.progress",
  data: { step, total_steps: 40, loss: 1 / step, learning_rate: 0.05 },
});

describe("the job view's event rules", () => {
  it("renders only base64 PNG, GIF and JPEG data URIs as images", () => {
    expect(safeImageSrc(PNG)).toBe(PNG);
    expect(safeImageSrc("data:image/gif;base64,R0lGODlhAQABAAAAACw=")).not.toBeNull();
    expect(safeImageSrc("data:image/jpeg;base64,/9j/4AAQ")).not.toBeNull();
    for (const hostile of [
      "javascript:alert(1)",
      "data:text/html,<script>alert(1)</script>",
      "data:text/html;base64,PHNjcmlwdD4=",
      "data:image/svg+xml;base64,PHN2Zz4=",
      "https://attacker.example/x.png",
      "/api/users/me",
      'data:image/png;base64,AAAA" onerror="alert(1)',
      "data:image/png;base64,AAAA\njavascript:alert(1)",
      " data:image/png;base64,AAAA",
      42,
      null,
    ]) {
      expect(safeImageSrc(hostile), String(hostile)).toBeNull();
    }
  });

  it("keeps an event's markup as text in the log and drops an image whose source is not a picture", () => {
    const state = applyEvents(EMPTY_TRAINING, [
      { index: 0, timestamp: at(0), type: "log", message: "<script>alert(1)</script><img src=x onerror=alert(2)>" },
      {
        index: 1,
        timestamp: at(1),
        type: "validation.image",
        data: { step: 1, step_label: "1/20", prompt: "<b>bold</b>" },
        images: [{ src: "javascript:alert(1)" }, { src: "data:text/html,<script>alert(1)</script>" }, { src: PNG }],
      },
    ]);
    expect(state.log[0]).toMatchObject({ type: "log", text: "<script>alert(1)</script><img src=x onerror=alert(2)>" });
    expect(state.previews).toEqual([{ key: "1.2", src: PNG, alt: "validation preview, step 1/20", prompt: "<b>bold</b>" }]);
  });

  it("skips events seen before a reconnect, keeps the newest log lines and lets a retry's steps replace the failed attempt's", () => {
    let state = applyEvents(EMPTY_TRAINING, [progress(0, 1), progress(1, 2), progress(2, 3)]);
    expect(applyEvents(state, [progress(1, 2)])).toBe(state);
    state = applyEvents(state, [progress(3, 2, 10), progress(4, 3, 11)]);
    expect(state.steps).toEqual([1, 2, 3]);
    expect(state.next).toBe(5);
    const lines = Array.from({ length: LOG_LINES + 5 }, (_, i): StreamEvent => ({
      index: 5 + i,
      timestamp: at(0),
      type: "log",
      message: `line ${i}`,
    }));
    state = applyEvents(state, lines);
    expect(state.log).toHaveLength(LOG_LINES);
    expect(state.log.at(-1)?.text).toBe(`line ${LOG_LINES + 4}`);
  });

  it("estimates the time left from the recent step rate", () => {
    // Steps 1..10 one second apart: one step a second, 30 steps left of 40.
    const state = applyEvents(
      EMPTY_TRAINING,
      Array.from({ length: 10 }, (_, i) => progress(i, i + 1)),
    );
    expect(etaSeconds(state)).toBe(30);
    expect(etaSeconds(applyEvents(EMPTY_TRAINING, [progress(0, 1)]))).toBeNull();
  });
});

describe.skipIf(!HAS_CHROMIUM)("the job view in a browser", () => {
  const runnerDir = mkdtempSync(join(tmpdir(), "ui-training-runner-"));
  const HOSTILE_PROMPT = "<script>window.pwned = 1</script><b>bold prompt</b>";
  let t: TestStack;
  let browser: Browser;
  let admin: { cookie: string; key: string };
  let rita: { cookie: string; key: string; id: number };
  let olga: { cookie: string; key: string; id: number };
  let vera: { cookie: string; key: string; id: number };
  let running: string;
  const pages: DashboardPage[] = [];

  const submit = async (config_name: string, key: string): Promise<string> => {
    const reply = await t.call("POST", "/api/queue/submit", { json: { config_name }, auth: { key } });
    expect(reply.status, reply.text).toBeLessThan(300);
    return reply.body.job_id;
  };
  const open = async (cookie: string, jobId: string, options: Parameters<typeof openDashboard>[2] = {}) => {
    const dashboard = await openDashboard(browser, t, { cookie, hash: `#/jobs/${jobId}`, ...options });
    pages.push(dashboard);
    return dashboard;
  };

  beforeAll(async () => {
    // The local runner has SimpleTuner too (its stand-in: test/helpers/simpletuner.ts) for the recorded run.
    t = await startStackWithLocalRunner(runnerDir, { simpletuner: fakeSimpleTuner() });
    admin = await setUpAdmin(t);
    rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
    olga = await createUserWithKey(t, { key: admin.key }, "researcher", "olga");
    vera = await createUserWithKey(t, { key: admin.key }, "viewer", "vera");
    // Rita's demo environment: slow steps that outlast the test (she stops it at the end), no
    // scheduled validation or checkpoint, so every one the page shows is one it asked for.
    const created = await t.call("POST", "/api/configs/environments", {
      json: { name: "live", from_example: "demo" },
      auth: { key: rita.key },
    });
    expect(created.status, created.text).toBe(201);
    const { config } = (await t.call("GET", "/api/configs/live", { auth: { key: rita.key } })).body;
    const changes = {
      "--max_train_steps": 3000,
      "--demo_step_ms": 100,
      "--validation_steps": 0,
      "--checkpointing_steps": 0,
      "--validation_preview": true,
      "--validation_preview_steps": 5,
      "--validation_num_inference_steps": 10,
      "--validation_prompt": HOSTILE_PROMPT,
    };
    const saved = await t.call("PUT", "/api/configs/live", { json: { config: { ...config, ...changes } }, auth: { key: rita.key } });
    expect(saved.status, saved.text).toBe(200);
    browser = await launchBrowser();
    running = await submit("live", rita.key);
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
    removeFakeSimpleTuners();
    rmSync(runnerDir, { recursive: true, force: true });
  });

  it("shows the owner her job live: running, progress, a growing loss plot; a validation's previews and a checkpoint she asks for", async () => {
    const { page, problems } = await open(rita.cookie, running);
    const status = page.locator(".job-terms .badge");
    await status.filter({ hasText: "running" }).waitFor({ timeout: 45_000 });
    await page.getByText("Live.").waitFor();

    const bar = page.locator("progress");
    await bar.waitFor();
    const firstStep = Number(await bar.getAttribute("value"));
    const summary = page.locator(".plot-summary");
    const firstSummary = await summary.textContent();
    await until("progress to advance", async () => Number(await bar.getAttribute("value")) > firstStep + 3);
    await until("the loss plot to grow", async () => (await summary.textContent()) !== firstSummary);
    expect(await bar.getAttribute("max")).toBe("3000");
    await page.getByText(/steps\/s, about .* left/).waitFor();

    await page.getByRole("button", { name: "Run a validation" }).click();
    await page.getByRole("status").filter({ hasText: "runs a validation" }).waitFor();
    const preview = page.locator('img[alt^="validation preview, step"]').first();
    await preview.waitFor({ timeout: 30_000 });
    expect(await preview.getAttribute("src")).toMatch(/^data:image\/png;base64,/);
    await page.locator(".job-log li", { hasText: "validation.started" }).first().waitFor();
    // The prompt is the trainer's text: shown as written, never run or parsed as markup.
    await page.locator(".job-previews figcaption", { hasText: HOSTILE_PROMPT }).first().waitFor();
    expect(await page.locator(".job-previews b, .job-previews script").count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned)).toBeUndefined();

    await page.getByRole("button", { name: "Save a checkpoint" }).click();
    await page.getByRole("cell", { name: /\(asked for\)/ }).waitFor({ timeout: 30_000 });

    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "job-running");
    expect(problems).toEqual([]);
  }, 120_000);

  it("reads at phone width in the dark", async () => {
    const { page, problems } = await open(rita.cookie, running, { viewport: { width: 390, height: 844 }, colorScheme: "dark" });
    await page.locator('img[alt^="validation preview, step"]').first().waitFor({ timeout: 30_000 });
    await page.getByRole("button", { name: "Stop training" }).waitFor();
    // Opened after steps came in: the job's expected end, estimated from its progress.
    await page.locator(".job-terms dd", { hasText: "(estimated from progress)" }).waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "job-phone");
    expect(problems).toEqual([]);
  }, 60_000);

  it("cancels a second job from its page", async () => {
    const second = await submit("live", rita.key);
    const { page, problems } = await open(rita.cookie, second);
    await page
      .locator(".job-terms .badge")
      .filter({ hasText: /pending|running/ })
      .waitFor();
    await page.getByRole("button", { name: "Cancel job" }).click();
    await page.locator(".job-terms .badge").filter({ hasText: "cancelled" }).waitFor({ timeout: 30_000 });
    expect((await t.call("GET", `/api/queue/jobs/${second}`, { auth: { key: rita.key } })).body.status).toBe("cancelled");
    await expect(page.getByRole("button", { name: "Cancel job" }).count()).resolves.toBe(0);
    expect(problems).toEqual([]);
  }, 60_000);

  it("cancels a running job from its page: its trainer is killed, its GPUs free", async () => {
    expect(
      (await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 2 }, auth: { key: admin.key } })).status,
    ).toBe(200);
    try {
      const third = await submit("live", rita.key);
      const { page, problems } = await open(rita.cookie, third);
      await page.locator(".job-terms .badge").filter({ hasText: "running" }).waitFor({ timeout: 30_000 });
      await page.getByRole("button", { name: "Cancel job" }).click();
      await page.locator(".job-terms .badge").filter({ hasText: "cancelled" }).waitFor({ timeout: 30_000 });
      expect((await t.call("GET", `/api/queue/jobs/${third}`, { auth: { key: rita.key } })).body.status).toBe("cancelled");
      expect(problems).toEqual([]);
    } finally {
      await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 1 }, auth: { key: admin.key } });
      // A running local job cancelled holds local admissions until the queue is processed.
      await t.call("POST", "/api/queue/process", { auth: { key: admin.key } });
    }
  }, 60_000);

  it("shows another researcher the refusal and none of the job's log, previews or controls", async () => {
    const { page, problems } = await open(olga.cookie, running);
    await page.getByRole("alert").filter({ hasText: "another user's" }).waitFor();
    await page.locator(".job-terms").getByText("rita").waitFor();
    expect(await page.locator(".job-log li").count()).toBe(0);
    expect(await page.locator("img").count()).toBe(0);
    expect(await page.getByRole("button", { name: /validation|checkpoint|Stop|Cancel/ }).count()).toBe(0);
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
  }, 60_000);

  it("offers a viewer no control", async () => {
    const { page, problems } = await open(vera.cookie, running);
    await page.locator(".job-terms").getByText("rita").waitFor();
    await page.getByRole("alert").waitFor();
    expect(await page.getByRole("button", { name: /validation|checkpoint|Stop|Cancel/ }).count()).toBe(0);
    expect(problems).toEqual([]);
  }, 60_000);

  it("stops the owner's job: it ends completed and the page says so from the stream's end", async () => {
    const { page, problems } = await open(rita.cookie, running);
    await page.getByRole("button", { name: "Stop training" }).click();
    await page.locator(".job-terms .badge").filter({ hasText: "completed" }).waitFor({ timeout: 45_000 });
    await page.getByText("The job has ended (completed)").waitFor();
    expect(await page.getByRole("button", { name: "Stop training" }).count()).toBe(0);
    expect(problems).toEqual([]);
  }, 90_000);

  it("shows a recorded SimpleTuner run as it shows the demo's: its steps, loss plot, validation images and checkpoints", async () => {
    // SimpleTuner's own events (test/fixtures/simpletuner/webhooks-lora-run.jsonl), replayed by its stand-in.
    const created = await t.call("POST", "/api/configs/environments", { json: { name: "st-replay" }, auth: { key: rita.key } });
    expect(created.status, created.text).toBe(201);
    const form = new FormData();
    form.set("target_path", "st-replay");
    form.append("files[]", new Blob(["a cat"]), "cat.txt");
    expect((await fetch(`${t.base}/api/datasets/upload`, { method: "POST", headers: { "x-api-key": rita.key }, body: form })).status).toBe(
      201,
    );
    const config = { "--num_processes": 0, "--standin_replay": "lora-run" };
    expect((await t.call("PUT", "/api/configs/st-replay", { json: { config }, auth: { key: rita.key } })).status).toBe(200);
    // Rita's demo job may still run: this one runs beside it.
    expect(
      (await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 2 }, auth: { key: admin.key } })).status,
    ).toBe(200);
    const job = await submit("st-replay", rita.key);
    await until(
      "the run to complete",
      async () => (await t.call("GET", `/api/queue/jobs/${job}`, { auth: { key: rita.key } })).body.status === "completed",
      {
        timeoutMs: 30_000,
      },
    );
    const { page, problems } = await open(rita.cookie, job);
    await page.locator(".job-terms .badge").filter({ hasText: "completed" }).waitFor({ timeout: 30_000 });
    await page.getByText("Step 8 of 8, epoch 1").waitFor();
    expect(await page.locator("progress").getAttribute("value")).toBe("8");
    await until("the loss plot's last loss", async () => /0\.9088/.test((await page.locator(".plot-summary").textContent()) ?? ""));
    const images = page.locator('img[alt="validation preview, step 4"]');
    await images.first().waitFor();
    await expect.poll(() => images.count()).toBe(2);
    for (const src of await images.evaluateAll((els) => els.map((e) => (e as HTMLImageElement).src)))
      expect(src).toMatch(/^data:image\/png;base64,/);
    // The images are real pictures the browser decoded: 64 pixels wide, as SimpleTuner rendered them.
    expect(await images.evaluateAll((els) => els.map((e) => (e as HTMLImageElement).naturalWidth))).toEqual([64, 64]);
    await page.locator(".job-previews figcaption", { hasText: "unconditional" }).waitFor();
    const steps = await page.locator(".job-checkpoints tbody td:first-child").allTextContents();
    expect(steps).toEqual(["4", "8"]);
    await screenshot(page, "job-simpletuner");
    expect(problems).toEqual([]);
  }, 90_000);

  it("runs the demo from the browser alone: created from the example, checked, submitted, then seen to start, preview and finish", async () => {
    const dashboard = await openDashboard(browser, t, { cookie: rita.cookie, hash: "#/submit" });
    pages.push(dashboard);
    const { page, problems } = dashboard;
    const fromExample = page.locator("#from-example");
    await fromExample.getByRole("combobox", { name: "Example" }).selectOption("demo");
    await fromExample.getByRole("textbox", { name: /^New environment's name/ }).fill("rita-demo");
    await fromExample.getByRole("button", { name: "Create from example" }).click();
    await until(
      "the new environment chosen",
      async () => (await page.getByRole("combobox", { name: /^Environment/ }).inputValue()) === "rita-demo",
    );
    await page.getByRole("button", { name: "Check" }).click();
    await page.getByRole("heading", { name: "If you submit now" }).waitFor();
    await page.getByRole("button", { name: "Submit", exact: true }).click();
    await page.waitForURL(/#\/jobs\/[^/?]+$/);
    const status = page.locator(".job-terms .badge");
    await status.filter({ hasText: "running" }).waitFor({ timeout: 45_000 });
    // The shipped demo validates at step 25 with previews every 4 inference steps.
    await page.locator('img[alt^="validation preview, step"]').first().waitFor({ timeout: 45_000 });
    await until("the loss plot to show a loss", async () => /loss \d/.test((await page.locator(".plot-summary").textContent()) ?? ""));
    await status.filter({ hasText: "completed" }).waitFor({ timeout: 45_000 });
    expect(problems).toEqual([]);
    for (const dashboard of pages) expect(dashboard.problems).toEqual([]);
  }, 120_000);
});
