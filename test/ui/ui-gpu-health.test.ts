// GPU health in the dashboard's #/system, in a real browser against the real stack: a box's
// heartbeat (sent over HTTP with its worker token, as its runner sends it) reports uncorrected ECC
// errors on GPU 1; every user sees the quarantine and the GPU's last 24 hours, only an admin gets
// the button that clears it (audited), and a probe error full of markup shows as text.
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAS_CHROMIUM, launchBrowser, openDashboard, screenshot, seriousA11yViolations, type DashboardPage } from "../helpers/browser";
import { healthSample } from "../helpers/boxes";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

const ATTACK = "<img src=x onerror=alert(1)>";

let t: TestStack;
let browser: Browser;
let admin: { key: string; cookie: string };
let researcher: { key: string; cookie: string };
let boxId: number;

async function open(cookie: string): Promise<DashboardPage> {
  const dashboard = await openDashboard(browser, t, { cookie, hash: "#/system" });
  dashboard.page.on("dialog", (dialog) => {
    dashboard.problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return dashboard;
}

const quarantineOf = async (index: number) =>
  ((await t.call("GET", "/api/system/workers", { auth: { key: admin.key } })).body.workers as any[])
    .find((w) => w.id === boxId)
    .gpus.find((g: any) => g.index === index).quarantine;

describe.skipIf(!HAS_CHROMIUM)("GPU health in #/system", () => {
  beforeAll(async () => {
    t = await startTestStack();
    admin = await setUpAdmin(t);
    researcher = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "rita");
    await t.call("POST", "/api/queue/concurrency", { json: { worker_heartbeat_timeout_seconds: 86_400 }, auth: { key: admin.key } });
    const created = await t.call("POST", "/api/admin/workers", { json: { name: "box-1" }, auth: { key: admin.key } });
    boxId = created.body.id;
    const bearer = created.body.token as string;
    const gpus = [0, 1].map((index) => ({ index, name: "NVIDIA A100-SXM4-80GB", memory_mb: 81920 }));
    expect((await t.call("POST", "/api/workers/register", { json: { role: "local", gpus }, auth: { bearer } })).status).toBe(200);
    await t.call("POST", "/api/workers/heartbeat", {
      json: { gpu_health: [healthSample(0), healthSample(1)], xid_readable: false },
      auth: { bearer },
    });
    const broken = await t.call("POST", "/api/workers/heartbeat", {
      json: { gpu_health: [healthSample(0), healthSample(1, { ecc_uncorrected_volatile: 2, utilization_percent: 97 })] },
      auth: { bearer },
    });
    expect(broken.body.quarantined_gpus).toEqual([1]);
    const other = await t.call("POST", "/api/admin/workers", { json: { name: "lab-a" }, auth: { key: admin.key } });
    const otherBearer = other.body.token as string;
    await t.call("POST", "/api/workers/register", {
      json: { role: "remote", gpus: [{ index: 0, name: "NVIDIA L4", memory_mb: 23034 }] },
      auth: { bearer: otherBearer },
    });
    const attacked = await t.call("POST", "/api/workers/heartbeat", {
      json: { gpu_health: [healthSample(0, { probe_error: ATTACK, temperature_c: null })] },
      auth: { bearer: otherBearer },
    });
    expect(attacked.body.quarantined_gpus).toEqual([0]);
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it("shows a researcher the quarantine and the GPU's last day, with no button to clear it", { timeout: 60_000 }, async () => {
    const { page, problems, close } = await open(researcher.cookie);
    const tiles = page.getByRole("list", { name: "GPUs of box-1" }).getByRole("listitem");
    await tiles.nth(1).getByText("Quarantined").waitFor();
    expect(await tiles.nth(1).innerText()).toContain("2 uncorrected ECC errors (volatile)");
    expect(await tiles.nth(1).innerText()).toContain("97 % busy, 1 of 80 GiB, 45 °C");
    expect(await tiles.nth(0).innerText()).toContain("free");
    await page.getByRole("region", { name: "Local box: box-1" }).getByText("0 of 2 GPUs in use, 1 quarantined.").waitFor();
    expect(await page.getByRole("button", { name: /Clear GPU/ }).count()).toBe(0);
    // The other box's probe error is text: the markup shows as written, no image is made of it.
    const lab = page.getByRole("list", { name: "GPUs of lab-a" });
    expect(await lab.innerText()).toContain(`device probe failed: ${ATTACK}`);
    expect(await page.locator("img").count()).toBe(0);

    await page.getByRole("button", { name: "Health history of GPU 1" }).first().click();
    const history = page.getByRole("region", { name: "Health of GPU 1 of box-1, last 24 hours" });
    await history.getByRole("table", { name: "Samples with a fault" }).waitFor();
    expect(await history.getByRole("table", { name: "Samples with a fault" }).innerText()).toContain("2 uncorrected ECC errors (volatile)");
    expect(await history.getByRole("img", { name: /GPU 1 utilisation and temperature/ }).count()).toBe(1);
    expect(await seriousA11yViolations(page)).toEqual([]);
    await screenshot(page, "system-gpu-quarantine");
    expect(problems).toEqual([]);
    await close();
    expect(await quarantineOf(1)).not.toBeNull();
  });

  it("lets an admin clear the quarantine with the button, audited", { timeout: 60_000 }, async () => {
    const { page, problems, close } = await open(admin.cookie);
    const tile = page.getByRole("list", { name: "GPUs of box-1" }).getByRole("listitem").nth(1);
    await tile.getByRole("button", { name: "Clear GPU 1" }).click();
    await page.getByRole("region", { name: "Local box: box-1" }).getByText("0 of 2 GPUs in use.").waitFor();
    expect(await tile.getByText("Quarantined").count()).toBe(0);
    expect(await tile.innerText()).toContain("free");
    expect(await quarantineOf(1)).toBeNull();
    const audit = (await t.call("GET", "/api/audit?event_type=gpu_cleared", { auth: { key: admin.key } })).body.entries;
    expect(audit).toMatchObject([{ actor: "admin", target: `worker:${boxId}/gpu:1` }]);
    expect(await seriousA11yViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await close();
  });
});
