// Runs and compare (#/runs, #/compare?jobs=a,b): their rules as pure functions, then in a real
// browser against the real stack, whose local runner replays a recorded SimpleTuner run
// (test/fixtures/simpletuner/webhooks-lora-run.jsonl, through its stand-in) and runs the demo trainer.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { comparedJobs, differingOptions, gallery, overlay, pairImages, smooth } from "../../edge/ui/views/compare-data";
import { HAS_CHROMIUM, launchBrowser, openDashboard, screenshot, seriousA11yViolations, type DashboardPage } from "../helpers/browser";
import { fakeSimpleTuner, removeFakeSimpleTuners } from "../helpers/simpletuner";
import { createUserWithKey, setUpAdmin, startStackWithLocalRunner, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

describe("the compare view's rules", () => {
  it("takes up to 8 distinct runs and refuses more with a message", () => {
    expect(comparedJobs(" a, b,,a ")).toEqual({ jobs: ["a", "b"], refusal: null });
    expect(comparedJobs(null)).toEqual({ jobs: [], refusal: null });
    const nine = comparedJobs("1,2,3,4,5,6,7,8,9");
    expect(nine.jobs).toEqual([]);
    expect(nine.refusal).toMatch(/^At most 8 runs can be compared at once; 9 were asked for/);
  });

  it("aligns runs on one axis, smooths with a debiased moving average, and lists only the options that differ", () => {
    const a = [
      { step: 1, seconds: 0, loss: 1, lr: 0.1 },
      { step: 2, seconds: 1, loss: 0.5, lr: 0.1 },
    ];
    const b = [{ step: 2, seconds: 3, loss: 2, lr: 0.2 }];
    expect(overlay([a, b], "step", "loss")).toEqual([
      [1, 2],
      [1, 0.5],
      [null, 2],
    ]);
    expect(overlay([a, b], "seconds", "lr")).toEqual([
      [0, 1, 3],
      [0.1, 0.1, null],
      [null, null, 0.2],
    ]);
    // Points stored in one batch share a time: each keeps its row, so none is lost from the plot or its smoothing.
    const batched = [
      { step: 1, seconds: 0.5, loss: 1, lr: 0.1 },
      { step: 2, seconds: 0.5, loss: 0.9, lr: 0.1 },
      { step: 3, seconds: 0.5, loss: 0.8, lr: 0.1 },
    ];
    expect(overlay([batched, b], "seconds", "loss")).toEqual([
      [0.5, 0.5, 0.5, 3],
      [1, 0.9, 0.8, null],
      [null, null, null, 2],
    ]);
    expect(overlay([batched, [{ step: 7, seconds: 0.5, loss: 3, lr: 0.1 }]], "seconds", "loss")).toEqual([
      [0.5, 0.5, 0.5],
      [1, 0.9, 0.8],
      [3, null, null],
    ]);
    expect(smooth([1, null, 0], 0)).toEqual([1, null, 0]);
    const smoothed = smooth([1, null, 0, 0], 0.5) as number[];
    expect(smoothed[0]).toBe(1);
    expect(smoothed[1]).toBeNull();
    expect(smoothed[2]).toBeCloseTo(1 / 3);
    expect(smoothed[3]).toBeCloseTo(1 / 7);
    expect(
      differingOptions([
        { "--learning_rate": 0.0001, "--seed": 1, "--note": "<b>x</b>" },
        { "--learning_rate": 0.0003, "--seed": 1 },
      ]),
    ).toEqual([
      { option: "--learning_rate", values: ["0.0001", "0.0003"] },
      { option: "--note", values: ["<b>x</b>", "(not set)"] },
    ]);
  });

  it("grids images by prompt and step and pairs two runs' images", () => {
    const img = (n: number, prompt: string | null, step: number | null, index = 0) => ({ n, prompt, step, index, url: `/i/${n}` });
    const grid = gallery([img(0, "cat", 8), img(1, "dog", 4), img(2, "cat", 4), img(3, "cat", 4, 1), img(4, null, null)]);
    expect(grid.prompts).toEqual(["cat", "dog", null]);
    expect(grid.steps).toEqual([4, 8, null]);
    expect(grid.cell("cat", 4).map((i) => i.n)).toEqual([2, 3]);
    expect(grid.cell("dog", 8)).toEqual([]);
    const pairs = pairImages([img(0, "cat", 4), img(1, "dog", 4)], [img(0, "cat", 4), img(1, "owl", 4)]);
    expect(pairs.map((p) => [p.prompt, p.left?.n ?? null, p.right?.n ?? null])).toEqual([
      ["cat", 0, 0],
      ["dog", 1, null],
      ["owl", null, 1],
    ]);
  });
});

describe.skipIf(!HAS_CHROMIUM)("runs and compare in a browser", () => {
  const runnerDir = mkdtempSync(join(tmpdir(), "ui-compare-runner-"));
  const HOSTILE_PROMPT = "<script>window.pwned = 1</script><b>bold prompt</b>";
  const HOSTILE_OPTION = '<img src=x onerror="window.pwned = 2">';
  let t: TestStack;
  let browser: Browser;
  let admin: { cookie: string; key: string };
  let rita: { cookie: string; key: string; id: number };
  let olga: { cookie: string; key: string; id: number };
  let runA: string;
  let runB: string;
  let demoRun: string;
  const pages: DashboardPage[] = [];
  const open = async (cookie: string, hash: string) => {
    const dashboard = await openDashboard(browser, t, { cookie, hash });
    pages.push(dashboard);
    return dashboard;
  };

  async function environment(name: string, config: Record<string, unknown>, fromExample?: string) {
    const created = await t.call("POST", "/api/configs/environments", {
      json: { name, ...(fromExample ? { from_example: fromExample } : {}) },
      auth: { key: rita.key },
    });
    expect(created.status, created.text).toBe(201);
    if (!fromExample) {
      const form = new FormData();
      form.set("target_path", name);
      form.append("files[]", new Blob(["a cat"]), "cat.txt");
      const upload = await fetch(`${t.base}/api/datasets/upload`, { method: "POST", headers: { "x-api-key": rita.key }, body: form });
      expect(upload.status).toBe(201);
    }
    const base = fromExample ? (await t.call("GET", `/api/configs/${name}`, { auth: { key: rita.key } })).body.config : {};
    const saved = await t.call("PUT", `/api/configs/${name}`, { json: { config: { ...base, ...config } }, auth: { key: rita.key } });
    expect(saved.status, saved.text).toBe(200);
  }
  async function submit(name: string): Promise<string> {
    const reply = await t.call("POST", "/api/queue/submit", { json: { config_name: name }, auth: { key: rita.key } });
    expect(reply.status, reply.text).toBeLessThan(300);
    return reply.body.job_id;
  }
  const completed = (job: string) =>
    until(
      `${job} to complete`,
      async () => (await t.call("GET", `/api/queue/jobs/${job}`, { auth: { key: rita.key } })).body.status === "completed",
      { timeoutMs: 60_000 },
    );

  beforeAll(async () => {
    t = await startStackWithLocalRunner(runnerDir, { simpletuner: fakeSimpleTuner() });
    admin = await setUpAdmin(t);
    rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
    olga = await createUserWithKey(t, { key: admin.key }, "researcher", "olga");
    expect(
      (await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 3 }, auth: { key: admin.key } })).status,
    ).toBe(200);
    const replay = { "--num_processes": 0, "--standin_replay": "lora-run" };
    await environment("lr-low", { ...replay, "--learning_rate": 0.0001 });
    await environment("lr-high", { ...replay, "--learning_rate": 0.0003, "--tracker_run_name": HOSTILE_OPTION });
    await environment(
      "hostile",
      {
        "--max_train_steps": 10,
        "--demo_step_ms": 20,
        "--validation_steps": 5,
        "--checkpointing_steps": 0,
        "--validation_preview": false,
        "--validation_prompt": HOSTILE_PROMPT,
      },
      "demo",
    );
    browser = await launchBrowser();
    runA = await submit("lr-low");
    runB = await submit("lr-high");
    demoRun = await submit("hostile");
    await completed(runA);
    await completed(runB);
    await completed(demoRun);
  }, 150_000);

  afterAll(async () => {
    for (const p of pages) await p.close().catch(() => {});
    await browser?.close();
    await t?.stop();
    removeFakeSimpleTuners();
    rmSync(runnerDir, { recursive: true, force: true });
  });

  it("compares two finished runs picked on #/runs: both series overlaid, both galleries, side by side, the option that differs", async () => {
    const { page, problems } = await open(rita.cookie, "#/runs");
    await page.getByRole("heading", { name: "Runs", level: 1 }).waitFor();
    for (const job of [runA, runB, demoRun]) await page.getByRole("link", { name: job }).waitFor();
    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "runs");
    await page.getByRole("checkbox", { name: `Compare ${runA}` }).check();
    await page.getByRole("checkbox", { name: `Compare ${runB}` }).check();
    await page.getByRole("button", { name: "Compare 2 runs" }).click();
    await page.getByRole("heading", { name: "Compare runs", level: 1 }).waitFor();
    expect(new URL(page.url()).hash).toBe(`#/compare?jobs=${encodeURIComponent(`${runA},${runB}`)}`);

    // The overlay: both runs' series, each ending at the recorded final loss and learning rate.
    const loss = page.locator("figure.plot", { has: page.locator("figcaption", { hasText: /^Loss/ }) });
    await until("both loss series", async () => {
      const text = (await loss.locator(".plot-summary").textContent()) ?? "";
      return text.includes(`${runA} (lr-low) 0.9088`) && text.includes(`${runB} (lr-high) 0.9088`);
    });
    const lr = page.locator("figure.plot", { has: page.locator("figcaption", { hasText: /^Learning rate/ }) });
    expect(await lr.locator(".plot-summary").textContent()).toContain(`${runA} (lr-low) 0.0001`);
    expect(await loss.locator(".u-legend").textContent()).toContain(`${runB} (lr-high)`);
    // By time, and smoothed: the plot follows.
    await page.getByRole("radio", { name: "By time" }).check();
    await until("both loss series by time", async () => {
      const text = (await loss.locator(".u-legend").textContent()) ?? "";
      const summary = (await loss.locator(".plot-summary").textContent()) ?? "";
      return (
        text.includes("Seconds since start") && summary.includes(`${runA} (lr-low) 0.9088`) && summary.includes(`${runB} (lr-high) 0.9088`)
      );
    });
    // The slider from the keyboard: End is its strongest smoothing. Under load a key can land before the view
    // listens (the slider then reads 0.99 with the plot unsmoothed): if the plot has not followed 3 s after a
    // press, Home and End are pressed again (never sooner: a slow render must not be undone by the next press).
    const slider = page.getByRole("slider", { name: /Smoothing/ });
    let pressedAt = 0;
    // What the page showed at the last look, for the message if the plot never follows.
    let seen = "";
    await until(
      "the smoothed last loss",
      async () => {
        const text = (await loss.locator(".plot-summary").textContent()) ?? "";
        if (!text.includes("0.9088") && text.includes(runA)) return true;
        seen = `summary "${text}", slider ${await slider.inputValue()}, label "${await page.locator(".compare-controls .field-label").textContent()}", focus on ${await page.evaluate(() => document.activeElement?.outerHTML.slice(0, 120))}`;
        if (Date.now() - pressedAt < 3_000) return false;
        // Each press focuses the slider itself (a render between a focus and a key could move the focus).
        if ((await slider.inputValue()) === "0.99") await slider.press("Home");
        await slider.press("End");
        pressedAt = Date.now();
        return false;
      },
      { timeoutMs: 30_000, everyMs: 200, context: () => seen },
    );
    expect(await slider.inputValue()).toBe("0.99");

    // The options that differ: the learning rate, and the hostile value as text.
    const diff = page.locator("table.option-diff");
    const lrRow = diff.locator("tr", { has: page.locator("th", { hasText: "--learning_rate" }) });
    expect(await lrRow.locator("td").allTextContents()).toEqual(["0.0001", "0.0003"]);
    const hostileRow = diff.locator("tr", { has: page.locator("th", { hasText: "--tracker_run_name" }) });
    expect(await hostileRow.locator("td").allTextContents()).toEqual(["(not set)", HOSTILE_OPTION]);
    expect(await diff.locator("th", { hasText: "--num_processes" }).count()).toBe(0);

    // The galleries: each run's two images (prompt by step), decoded by the browser.
    const galleries = page.locator("table.gallery");
    expect(await galleries.count()).toBe(2);
    for (const [i, job] of [runA, runB].entries()) {
      const g = galleries.nth(i);
      expect(await g.locator("caption").textContent()).toContain(job);
      expect(await g.locator("tbody th").allTextContents()).toEqual(["unconditional", "validation"]);
      expect(await g.locator("thead th").allTextContents()).toEqual(["Prompt", "step 4"]);
      const imgs = g.locator("img");
      await until(`${job}'s images to load`, async () =>
        (await imgs.evaluateAll((els) => els.map((e) => (e as HTMLImageElement).naturalWidth))).every((w) => w === 64),
      );
      expect(await imgs.count()).toBe(2);
    }
    // Side by side, paired by prompt and step.
    const pairs = page.locator("table.side-by-side tbody tr");
    expect(await pairs.count()).toBe(2);
    expect(await pairs.first().locator("img").count()).toBe(2);

    // The lightbox, from the keyboard: Enter on a thumbnail opens it, Escape closes it.
    const thumb = page.getByRole("button", { name: `Open unconditional, step 4, run ${runB}` }).first();
    await thumb.focus();
    await page.keyboard.press("Enter");
    const dialog = page.locator("dialog.lightbox");
    await dialog.locator("img").waitFor();
    expect(await dialog.evaluate((d) => (d as HTMLDialogElement).open)).toBe(true);
    expect(await dialog.locator("h2").textContent()).toBe(`unconditional, step 4, run ${runB}`);
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Close");
    expect(await seriousA11yViolations(page)).toEqual([]);
    await page.keyboard.press("Escape");
    await until("the lightbox to close", async () => !(await dialog.evaluate((d) => (d as HTMLDialogElement).open)));

    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "compare");
    expect(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned)).toBeUndefined();
    expect(problems).toEqual([]);
  }, 90_000);

  it("filters #/runs by environment, kept in the address", async () => {
    const { page, problems } = await open(rita.cookie, "#/runs");
    await page.getByRole("link", { name: runB }).waitFor();
    await page.getByLabel("Environment").fill("lr-low");
    await page.getByRole("button", { name: "Filter" }).click();
    await until("only lr-low's run", async () => (await page.locator("table.runs-table tbody tr").count()) === 1);
    expect(await page.locator("table.runs-table tbody th").allTextContents()).toEqual([runA]);
    expect(new URL(page.url()).hash).toBe("#/runs?environment=lr-low");
    expect(problems).toEqual([]);
  }, 60_000);

  it("lists an environment's runs on its page, with final loss, and links to compare them", async () => {
    const listed = await t.call("GET", "/api/runs?environment=lr-high", { auth: { key: rita.key } });
    expect(listed.status).toBe(200);
    const run = listed.body.runs.find((r: { job_id: string }) => r.job_id === runB);
    expect(run.final_loss).toBeTypeOf("number");
    const { page, problems } = await open(rita.cookie, "#/environments/lr-high");
    const section = page.getByRole("region", { name: "Runs of lr-high" });
    await section.getByRole("link", { name: runB }).waitFor({ timeout: 30_000 });
    expect(await section.locator("table.runs-table tbody th").allTextContents()).toEqual([runB]);
    const row = section.locator("table.runs-table tbody tr").first();
    expect(await row.textContent()).toContain(String(Number(run.final_loss.toPrecision(4))));
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
  }, 60_000);

  it("shows a prompt with markup as text in the gallery", async () => {
    const { page, problems } = await open(rita.cookie, `#/compare?jobs=${demoRun}`);
    const prompt = page.locator("table.gallery tbody th").first();
    await prompt.waitFor({ timeout: 30_000 });
    expect(await prompt.textContent()).toBe(HOSTILE_PROMPT);
    expect(await page.locator("table.gallery b, table.gallery script").count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned)).toBeUndefined();
    expect(problems).toEqual([]);
  }, 60_000);

  it("refuses nine runs with a message and loads none of them", async () => {
    const nine = [runA, runB, demoRun, "a", "b", "c", "d", "e", "f"].join(",");
    const { page, problems } = await open(rita.cookie, `#/compare?jobs=${nine}`);
    await page.getByRole("alert").filter({ hasText: "At most 8 runs can be compared at once; 9 were asked for" }).waitFor();
    expect(await page.locator("figure.plot, table.gallery").count()).toBe(0);
    expect(problems).toEqual([]);
  }, 60_000);

  it("shows another researcher neither the runs nor their images: the API's refusal instead", async () => {
    const { page, problems } = await open(olga.cookie, `#/compare?jobs=${runA},${runB}`);
    await page.getByRole("alert").filter({ hasText: "another user's" }).first().waitFor();
    expect(await page.locator("table.gallery, table.side-by-side, table.option-diff img").count()).toBe(0);
    expect(await page.locator("img").count()).toBe(0);
    const list = await open(olga.cookie, "#/runs");
    await list.page.getByText("No runs yet.").waitFor();
    expect(await list.page.getByRole("link", { name: runA }).count()).toBe(0);
    expect(problems).toEqual([]);
    expect(list.problems).toEqual([]);
  }, 60_000);
});
