// The datasets view (#/datasets) in a real browser against the real stack, as a new researcher:
// a folder of PNGs with .txt captions chosen and uploaded with progress, thumbnails and captions
// shown, a zip, a batch refused by the quota and retried alone, delete with a confirm step; and as
// attackers: a viewer and another researcher see no upload or delete and the API refuses them,
// markup in captions and file names stays text. Every change is checked through the API.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deflateSync } from "node:zlib";
import { zipSync } from "fflate";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BATCH_LIMITS, planBatches } from "../../edge/ui/views/dataset-upload";
import { HAS_CHROMIUM, launchBrowser, openDashboard, screenshot, seriousA11yViolations, type DashboardPage } from "../helpers/browser";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

const ATTACK_NAME = "<img src=x onerror=alert(1)>.png";
const ATTACK_CAPTION = "<script>alert(2)</script> a <b>red</b> coat";

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}
/** A real PNG of one colour, `size` pixels square: a browser decodes it. */
function png(size: number, [r, g, b]: [number, number, number]): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  const row = Buffer.concat([Buffer.from([0]), Buffer.from(Array.from({ length: size }, () => [r, g, b]).flat())]);
  const pixels = Buffer.concat(Array.from({ length: size }, () => row));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(pixels)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

let t: TestStack;
let browser: Browser;
let admin: { key: string; cookie: string };
let rita: { key: string; cookie: string };
let sam: { key: string; cookie: string };
let vera: { key: string; cookie: string };
let workDir: string;

const listing = async (path: string) =>
  (await t.call("GET", `/api/datasets?path=${encodeURIComponent(path)}&captions=true`, { auth: { key: admin.key } })).body as {
    folders: string[];
    files: { name: string; caption?: string | null }[];
  };
const names = async (path: string) => (await listing(path)).files.map((f) => f.name).sort();

/** Opens a view and fails the test on any dialog (an injected alert would be one). */
async function open(cookie: string, hash: string): Promise<DashboardPage> {
  const dashboard = await openDashboard(browser, t, { cookie, hash });
  dashboard.page.on("dialog", (dialog) => {
    dashboard.problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return dashboard;
}
const percent = (page: Page) => page.getByTestId("upload-percent");
const thumbs = (page: Page) => page.getByRole("list", { name: "Images" }).getByRole("listitem");

describe("the datasets view's upload batches", () => {
  const file = (name: string, size = 1) => new File([new Uint8Array(size)], name);
  it("groups files by folder under the target, sends a zip alone and drops system clutter", () => {
    const batches = planBatches("portraits", [
      { file: file("a.png"), dir: "shots" },
      { file: file("a.txt"), dir: "shots" },
      { file: file("b.png"), dir: "shots/close" },
      { file: file("more.zip", 5), dir: "" },
      { file: file(".DS_Store"), dir: "shots" },
      { file: file("._a.png"), dir: "shots" },
      { file: file("c.png"), dir: "" },
    ]);
    expect(batches.map((b) => [b.kind, b.target, b.files.map((f) => f.name), b.bytes])).toEqual([
      ["files", "portraits/shots", ["a.png", "a.txt"], 2],
      ["files", "portraits/shots/close", ["b.png"], 1],
      ["zip", "portraits", ["more.zip"], 5],
      ["files", "portraits", ["c.png"], 1],
    ]);
    expect(planBatches("", [{ file: file("a.png"), dir: "new" }])[0]!.target).toBe("new");
  });

  it("starts a new batch past the file or byte limit, and sends a file larger than the byte limit alone", () => {
    const many = Array.from({ length: BATCH_LIMITS.files + 1 }, (_, i) => ({ file: file(`${i}.png`), dir: "" }));
    expect(planBatches("x", many).map((b) => b.files.length)).toEqual([BATCH_LIMITS.files, 1]);
    const sized = planBatches(
      "x",
      [
        { file: file("a.png", 6), dir: "" },
        { file: file("b.png", 6), dir: "" },
        { file: file("c.png", 20), dir: "" },
      ],
      {
        files: 10,
        bytes: 10,
      },
    );
    expect(sized.map((b) => b.files.map((f) => f.name))).toEqual([["a.png"], ["b.png"], ["c.png"]]);
  });
});

describe.skipIf(!HAS_CHROMIUM)("the datasets view", () => {
  beforeAll(async () => {
    t = await startTestStack();
    admin = await setUpAdmin(t);
    rita = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "rita");
    sam = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "sam");
    vera = await createUserWithKey(t, { cookie: admin.cookie }, "viewer", "vera");
    workDir = mkdtempSync(join(tmpdir(), "ui-datasets-"));
    const shots = join(workDir, "shots");
    mkdirSync(shots);
    writeFileSync(join(shots, "001.png"), png(16, [200, 30, 30]));
    writeFileSync(join(shots, "001.txt"), "a red square\n");
    writeFileSync(join(shots, "002.png"), png(16, [30, 200, 30]));
    writeFileSync(join(shots, "002.txt"), "a green square");
    writeFileSync(join(shots, ATTACK_NAME), png(16, [30, 30, 200]));
    writeFileSync(join(shots, "<img src=x onerror=alert(1)>.txt"), ATTACK_CAPTION);
    browser = await launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it(
    "lets a researcher make a folder, upload a folder of captioned PNGs with progress and see them as thumbnails",
    { timeout: 90_000 },
    async () => {
      const { page, problems, close } = await open(rita.cookie, "#/datasets");
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Datasets" }).waitFor();
      await page.getByText("Your datasets: 0 B of 50.0 GB (0%), 0 of 200000 files.").waitFor();
      await page.getByLabel("Folder name").fill("portraits");
      await page.getByRole("button", { name: "Create folder" }).click();
      await page.waitForURL(/#\/datasets\/portraits$/);
      await page.getByRole("navigation", { name: "Breadcrumb" }).getByText("portraits").waitFor();
      await page.getByText("This folder is empty.").waitFor();

      await page.getByLabel("Choose a folder").setInputFiles(join(workDir, "shots"));
      await expect.poll(() => percent(page).innerText(), { timeout: 30_000 }).toBe("100%, done");
      expect(await page.locator("#upload-progress-bar").getAttribute("value")).toBe("100");
      expect(await page.locator(".batch").innerText()).toContain("6 files into portraits/shots");

      // The upload kept the folder: the files are under portraits/shots, captions beside them.
      expect(await names("portraits/shots")).toEqual(
        ["001.png", "001.txt", "002.png", "002.txt", ATTACK_NAME, "<img src=x onerror=alert(1)>.txt"].sort(),
      );
      await page.getByRole("link", { name: "shots/" }).click();
      await page.waitForURL(/#\/datasets\/portraits\/shots$/);
      await expect.poll(() => thumbs(page).count()).toBe(3);
      // Every thumbnail decoded: the browser loaded each image through GET /api/datasets/file.
      await expect
        .poll(() => page.locator(".thumbs img").evaluateAll((imgs) => imgs.map((i) => (i as HTMLImageElement).naturalWidth)))
        .toEqual([16, 16, 16]);
      const first = thumbs(page).filter({ hasText: "001.png" });
      expect(await first.locator("figcaption").innerText()).toBe("001.png\na red square");
      // Markup in a file name and a caption is text: shown as written, no element made of it.
      const attack = thumbs(page).filter({ hasText: ATTACK_NAME });
      expect(await attack.locator(".thumb-caption").innerText()).toBe(ATTACK_CAPTION);
      expect(await attack.locator("img").getAttribute("alt")).toBe(ATTACK_NAME);
      expect(await page.locator(".thumbs img").count()).toBe(3);
      expect(await page.locator(".page script, .page b").count()).toBe(0);
      expect(await page.getByRole("rowheader", { name: "001.txt" }).count()).toBe(1);
      await page.getByText(/^rita's datasets \(owner of portraits\): /).waitFor();

      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, "datasets");
      await page.setViewportSize({ width: 390, height: 800 });
      await expect.poll(() => page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      await screenshot(page, "datasets-phone");
      expect(problems).toEqual([]);
      await close();
    },
  );

  it("shows the upload's progress as it goes, not only at its end (upload throttled to 256 KiB/s)", { timeout: 90_000 }, async () => {
    const { page, problems, close } = await open(rita.cookie, "#/datasets/portraits");
    await page
      .getByText("This folder is empty.")
      .or(page.getByRole("link", { name: "shots/" }))
      .first()
      .waitFor();
    // Chromium's own network emulation slows the XMLHttpRequest's body, so its upload events
    // arrive while it is being sent; every percentage the page shows is recorded as it changes.
    const cdp = await page.context().newCDPSession(page);
    await cdp.send("Network.enable");
    await cdp.send("Network.emulateNetworkConditions", {
      offline: false,
      latency: 0,
      downloadThroughput: -1,
      uploadThroughput: 256 * 1024,
    });
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { seen: string[] }).seen = seen;
      new MutationObserver(() => {
        const text = document.querySelector("[data-testid=upload-percent]")?.textContent ?? "";
        if (text && seen[seen.length - 1] !== text) seen.push(text);
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    const big = Buffer.concat([png(16, [1, 2, 3]), Buffer.alloc(1536 * 1024, 7)]);
    await page.getByLabel("Choose files or a zip").setInputFiles({ name: "large.png", mimeType: "image/png", buffer: big });
    await expect.poll(() => percent(page).innerText(), { timeout: 60_000 }).toBe("100%, done");
    const seen = await page.evaluate(() => (window as unknown as { seen: string[] }).seen);
    const values = seen.map((text) => Number(/^(\d+)%/.exec(text)?.[1]));
    expect(
      values.some((v) => v > 0 && v < 100),
      seen.join(" | "),
    ).toBe(true);
    expect(values).toEqual([...values].sort((a, b) => a - b));
    expect(seen[seen.length - 1]).toBe("100%, done");
    const stored = (await listing("portraits")).files.find((f) => f.name === "large.png") as { size?: number } | undefined;
    expect(stored?.size).toBe(big.length);
    await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    expect(problems).toEqual([]);
    await close();
  });

  it("extracts a chosen zip into the folder", { timeout: 60_000 }, async () => {
    const { page, problems, close } = await open(rita.cookie, "#/datasets/portraits");
    const zip = zipSync({ "zipped/a.png": png(8, [10, 10, 10]), "zipped/a.txt": new TextEncoder().encode("from a zip") });
    await page
      .getByLabel("Choose files or a zip")
      .setInputFiles({ name: "set.zip", mimeType: "application/zip", buffer: Buffer.from(zip) });
    await expect.poll(() => percent(page).innerText(), { timeout: 30_000 }).toBe("100%, done");
    expect(await page.locator(".batch").innerText()).toContain("set.zip (zip) into portraits");
    expect(await listing("portraits/zipped")).toMatchObject({ files: [{ name: "a.png", caption: "from a zip" }, { name: "a.txt" }] });
    await page.getByRole("link", { name: "zipped/" }).waitFor();
    expect(problems).toEqual([]);
    await close();
  });

  it("shows each refused batch's reason, and retries only that batch once the cause is gone", { timeout: 60_000 }, async () => {
    const { page, problems, close } = await open(rita.cookie, "#/datasets/portraits");
    await page.getByText(/^rita's datasets/).waitFor();
    // A bad file type is refused by the API with its reason; nothing of that batch is stored.
    await page
      .getByLabel("Choose files or a zip")
      .setInputFiles({ name: "notes.pdf", mimeType: "application/pdf", buffer: Buffer.from("%PDF") });
    await expect.poll(() => percent(page).innerText()).toBe("100%, 1 batch failed");
    await page.getByRole("alert").getByText('File "notes.pdf" is not an image or a .txt/.jsonl/.csv file').waitFor();
    await page.getByRole("button", { name: "Clear finished" }).click();

    // The quota: full for rita, so her next batch is refused as a whole, naming the quota.
    const usage = (await t.call("GET", "/api/datasets/usage?path=portraits", { auth: { key: rita.key } })).body;
    await t.call("PUT", "/api/admin/dataset-quota", { json: { max_files: usage.used_files }, auth: { key: admin.key } });
    await page.getByLabel("Choose files or a zip").setInputFiles([
      { name: "late-1.png", mimeType: "image/png", buffer: png(4, [1, 2, 3]) },
      { name: "late-1.txt", mimeType: "text/plain", buffer: Buffer.from("late") },
    ]);
    await expect.poll(() => percent(page).innerText()).toMatch(/1 batch failed$/);
    await page
      .getByRole("alert")
      .getByText(/The dataset quota of rita .* is full/)
      .waitFor();
    expect(await names("portraits")).not.toContain("late-1.png");

    await t.call("PUT", "/api/admin/dataset-quota", { json: { max_files: 200_000 }, auth: { key: admin.key } });
    await page.getByRole("button", { name: "Retry batch 1" }).click();
    await expect.poll(() => percent(page).innerText()).toBe("100%, done");
    expect(await names("portraits")).toEqual(expect.arrayContaining(["late-1.png", "late-1.txt"]));
    expect(await page.getByRole("alert").count()).toBe(0);
    expect(problems).toEqual([]);
    await close();
  });

  it("uploads files dropped anywhere on the page, and pages a folder of more entries than a page holds", { timeout: 60_000 }, async () => {
    const { page, problems, close } = await open(rita.cookie, "#/datasets/portraits");
    await page.getByText(/^rita's datasets/).waitFor();
    const transfer = await page.evaluateHandle(() => {
      const data = new DataTransfer();
      data.items.add(new File(["dropped caption"], "dropped.txt", { type: "text/plain" }));
      data.items.add(new File([new Uint8Array([0x89, 0x50, 0x4e, 0x47])], "dropped.png", { type: "image/png" }));
      return data;
    });
    // Dropped on the page's heading, away from the dashed area: anywhere on the page will do.
    await page.getByRole("heading", { name: "Datasets", level: 1 }).dispatchEvent("drop", { dataTransfer: transfer });
    await expect.poll(() => percent(page).innerText()).toBe("100%, done");
    expect(await names("portraits")).toEqual(expect.arrayContaining(["dropped.png", "dropped.txt"]));

    // 101 files: the first page shows 100, the next the last one.
    const form = new FormData();
    form.set("target_path", "many");
    for (let i = 0; i < 101; i++) form.append("files[]", new Blob([`caption ${i}`]), `${String(i).padStart(3, "0")}.txt`);
    expect((await t.call("POST", "/api/datasets/upload", { body: form, auth: { key: rita.key } })).status).toBe(201);
    await page.goto(`${t.base}/#/datasets/many`);
    const rows = page.getByRole("table").getByRole("rowheader");
    await expect.poll(() => rows.count()).toBe(100);
    await page.getByRole("button", { name: "Next page" }).click();
    await expect.poll(() => rows.allInnerTexts()).toEqual(["100.txt"]);
    await page.getByText("Page 2").waitFor();
    await page.getByRole("button", { name: "First page" }).click();
    await expect.poll(() => rows.count()).toBe(100);
    expect(problems).toEqual([]);
    await close();
  });

  it("deletes an image after a confirm step, and backing out keeps it", { timeout: 60_000 }, async () => {
    const { page, problems, close } = await open(rita.cookie, "#/datasets/portraits/shots");
    await expect.poll(() => thumbs(page).count()).toBe(3);
    await page.getByRole("button", { name: "Delete 002.png" }).click();
    await page.getByRole("button", { name: "Keep" }).click();
    expect(await names("portraits/shots")).toContain("002.png");
    await page.getByRole("button", { name: "Delete 002.png" }).click();
    await page.getByRole("button", { name: "Yes, delete" }).click();
    await expect.poll(() => thumbs(page).count()).toBe(2);
    expect(await names("portraits/shots")).not.toContain("002.png");
    expect(problems).toEqual([]);
    await close();
  });

  it(
    "shows a viewer the thumbnails but no upload or delete, and the API refuses the viewer's forced upload, storing nothing",
    { timeout: 60_000 },
    async () => {
      const before = await names("portraits/shots");
      const { page, problems, close } = await open(vera.cookie, "#/datasets/portraits/shots");
      await expect.poll(() => thumbs(page).count()).toBe(2);
      expect(await page.getByRole("region", { name: "Upload" }).count()).toBe(0);
      expect(await page.locator("input[type=file]").count()).toBe(0);
      expect(await page.getByRole("button", { name: /^Delete/ }).count()).toBe(0);
      expect(await page.getByRole("button", { name: "Create folder" }).count()).toBe(0);
      // Forced from the viewer's own page (session cookie, same origin): 403, nothing written.
      const forced = await page.evaluate(async () => {
        const form = new FormData();
        form.set("target_path", "portraits/shots");
        form.append("files[]", new Blob([new Uint8Array([0x89, 0x50, 0x4e, 0x47])]), "forced.png");
        const upload = await fetch("/api/datasets/upload", { method: "POST", body: form });
        const remove = await fetch("/api/datasets?path=portraits%2Fshots%2F001.png", { method: "DELETE" });
        return [upload.status, remove.status];
      });
      expect(forced).toEqual([403, 403]);
      expect(await names("portraits/shots")).toEqual(before);
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, "datasets-viewer");
      expect(problems).toEqual([]);
      await close();
    },
  );

  it("shows another researcher rita's folder read-only, and the API refuses their upload and delete", { timeout: 60_000 }, async () => {
    const before = await names("portraits/shots");
    const { page, problems, close } = await open(sam.cookie, "#/datasets/portraits/shots");
    await expect.poll(() => thumbs(page).count()).toBe(2);
    await page.getByText(/^rita's datasets/).waitFor();
    expect(await page.locator("input[type=file]").count()).toBe(0);
    expect(await page.getByRole("button", { name: /^Delete/ }).count()).toBe(0);
    const forced = await page.evaluate(async () => {
      const form = new FormData();
      form.set("target_path", "portraits/shots");
      form.append("files[]", new Blob([new Uint8Array([0x89, 0x50, 0x4e, 0x47])]), "forced.png");
      return [
        (await fetch("/api/datasets/upload", { method: "POST", body: form })).status,
        (await fetch("/api/datasets?path=portraits%2Fshots%2F001.png", { method: "DELETE" })).status,
      ];
    });
    expect(forced).toEqual([403, 403]);
    expect(await names("portraits/shots")).toEqual(before);
    // A folder whose name is markup: a link and a breadcrumb showing it as written.
    const form = new FormData();
    form.set("parent_path", "portraits");
    form.set("folder_name", "<img src=x onerror=alert(3)>");
    expect((await t.call("POST", "/api/datasets/folders", { body: form, auth: { key: rita.key } })).status).toBe(201);
    await page.goto(`${t.base}/#/datasets/portraits`);
    await page.getByRole("link", { name: "<img src=x onerror=alert(3)>/" }).click();
    await page.getByRole("navigation", { name: "Breadcrumb" }).getByText("<img src=x onerror=alert(3)>", { exact: true }).waitFor();
    await page.getByText("This folder is empty.").waitFor();
    expect(await page.locator(".page img").count()).toBe(0);
    // At the root sam may still make a folder of his own.
    await page.goto(`${t.base}/#/datasets`);
    await page.getByRole("button", { name: "Create folder" }).waitFor();
    expect(problems).toEqual([]);
    await close();
  });
});
