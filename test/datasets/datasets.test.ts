// Datasets over real HTTP into the real R2 binding: folders, uploads, zip extraction,
// and every way a name could leave the datasets root - refused, naming the culprit, nothing written;
// zip bombs stopped by the bytes really produced; folders changed only by their creator, leads and admins.
import { strToU8, zipSync } from "fflate";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let key: string;
let viewerKey: string;
let adminCookie: string;
const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);

beforeAll(async () => {
  t = await startTestStack();
  const admin = await setUpAdmin(t);
  adminCookie = admin.cookie;
  key = (await createUserWithKey(t, { cookie: admin.cookie }, "researcher")).key;
  viewerKey = (await createUserWithKey(t, { cookie: admin.cookie }, "viewer")).key;
});
afterAll(async () => {
  await t?.stop();
});

async function post(path: string, fields: Record<string, string | Blob | [Blob, string][]>, as = key) {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) {
    if (Array.isArray(value)) for (const [blob, filename] of value) form.append(name, blob, filename);
    else form.set(name, value);
  }
  const response = await fetch(`${t.base}${path}`, { method: "POST", headers: { "x-api-key": as }, body: form });
  return { status: response.status, body: (await response.json()) as any };
}
const list = async (path = "") =>
  (await (await fetch(`${t.base}/api/datasets?path=${encodeURIComponent(path)}`, { headers: { "x-api-key": viewerKey } })).json()) as any;
const blob = (bytes: Uint8Array | string) => new Blob([typeof bytes === "string" ? bytes : (bytes as Uint8Array<ArrayBuffer>)]);

describe("folders", () => {
  it("creates folders under the root and nested, refuses duplicates and names that leave the root", async () => {
    expect(await post("/api/datasets/folders", { parent_path: "", folder_name: "portraits" })).toMatchObject({
      status: 201,
      body: { path: "portraits" },
    });
    expect(await post("/api/datasets/folders", { parent_path: "portraits", folder_name: "edits" })).toMatchObject({
      status: 201,
      body: { path: "portraits/edits" },
    });
    expect((await post("/api/datasets/folders", { parent_path: "", folder_name: "portraits" })).status).toBe(409);
    for (const [parent, name, message] of [
      ["", "..", 'must not contain ".."'],
      ["", "a/b", "must be a single name, without /"],
      ["../etc", "x", 'must not contain ".."'],
      ["/abs", "x", "must be relative to the datasets root (no leading /)"],
      ["a\\b", "x", "must use / between folders, not \\"],
      ["a//b", "x", "must not contain empty segments (//)"],
      ["", "", "must not be empty"],
    ]) {
      const reply = await post("/api/datasets/folders", { parent_path: parent!, folder_name: name! });
      expect(reply.status, `${parent} ${name}`).toBe(422);
      expect(reply.body.errors[0].message).toBe(message);
    }
    expect(await list()).toMatchObject({ path: "", folders: ["portraits"], files: [] });
    expect((await list("portraits")).folders).toEqual(["edits"]);
    expect((await fetch(`${t.base}/api/datasets?path=..%2Fx`, { headers: { "x-api-key": viewerKey } })).status).toBe(422);
    expect((await post("/api/datasets/folders", { parent_path: "", folder_name: "nope" }, viewerKey)).status).toBe(403);
  });
});

describe("file uploads", () => {
  it("stores images and captions byte for byte with their SHA-256", async () => {
    const reply = await post("/api/datasets/upload", {
      target_path: "portraits",
      "files[]": [
        [blob(PNG), "001.png"],
        [blob("a woman in a red coat"), "001.txt"],
      ],
    });
    expect(reply.status).toBe(201);
    expect(reply.body.files.map((f: any) => [f.path, f.size])).toEqual([
      ["portraits/001.png", PNG.length],
      ["portraits/001.txt", 21],
    ]);
    expect(reply.body.files[0].sha256).toMatch(/^[0-9a-f]{64}$/);
    const listed = await list("portraits");
    expect(listed.files.map((f: any) => [f.name, f.size, f.sha256])).toEqual([
      ["001.png", PNG.length, reply.body.files[0].sha256],
      ["001.txt", 21, reply.body.files[1].sha256],
    ]);
  });

  it("refuses the whole upload, naming the file, when one name or type is bad", async () => {
    const wrongType = await post("/api/datasets/upload", {
      target_path: "portraits",
      "files[]": [
        [blob(PNG), "002.png"],
        [blob("#!/bin/sh"), "run.sh"],
      ],
    });
    expect(wrongType.status).toBe(415);
    expect(wrongType.body.detail).toContain('"run.sh" is not an image or a .txt/.jsonl/.csv file');
    const traversal = await post("/api/datasets/upload", { target_path: "../outside", "files[]": [[blob(PNG), "x.png"]] });
    expect(traversal).toMatchObject({ status: 422, body: { errors: [{ path: "form.target_path", message: 'must not contain ".."' }] } });
    const none = await post("/api/datasets/upload", { target_path: "portraits" });
    expect(none.status).toBe(422);
    expect((await list("portraits")).files.map((f: any) => f.name)).toEqual(["001.png", "001.txt"]);
    expect((await list("")).folders).toEqual(["portraits"]);
  });
});

describe("zip uploads", () => {
  it("extracts a zip with its folders into the target", async () => {
    const zip = zipSync({
      "set/a.png": PNG,
      "set/a.txt": strToU8("caption a"),
      "set/meta/info.jsonl": strToU8('{"f":"a.png"}\n'),
      "__MACOSX/set/._a.png": strToU8("x"),
    });
    const reply = await post("/api/datasets/upload/zip", { target_path: "zipped", file: new Blob([zip]) });
    expect(reply.status).toBe(201);
    expect(reply.body.files.map((f: any) => f.path).sort()).toEqual(["zipped/set/a.png", "zipped/set/a.txt", "zipped/set/meta/info.jsonl"]);
    expect(reply.body.skipped).toEqual(["__MACOSX/set/._a.png"]);
    expect((await list("zipped/set")).folders).toEqual(["meta"]);
  });

  it("refuses zip-slip, absolute paths, symbolic links and bad types, naming the entry and writing nothing", async () => {
    const cases: [Record<string, Uint8Array>, string][] = [
      [{ "ok.png": PNG, "../evil.png": PNG }, 'Zip entry "../evil.png" must not contain ".."'],
      [{ "ok.png": PNG, "a/../../evil.png": PNG }, 'Zip entry "a/../../evil.png" must not contain ".."'],
      [{ "ok.png": PNG, "/etc/evil.png": PNG }, 'Zip entry "/etc/evil.png" must be relative to the datasets root'],
      [{ "ok.png": PNG, "x\\\\..\\\\evil.png": PNG }, "must use / between folders"],
      [{ "ok.png": PNG, "run.exe": PNG }, 'Zip entry "run.exe" is not an image'],
    ];
    for (const [files, message] of cases) {
      const reply = await post("/api/datasets/upload/zip", { target_path: "slip", file: new Blob([zipSync(files)]) });
      expect(reply.status).toBeGreaterThanOrEqual(400);
      expect(reply.status).toBeLessThan(500);
      expect(reply.body.detail).toContain(message);
      expect(reply.body.detail).toContain("nothing was extracted");
    }
    // A symbolic link: Unix mode 0120777 in the entry's external attributes.
    const link = zipSync({ "ok.png": PNG, "link.png": [strToU8("/etc/passwd"), { os: 3, attrs: (0o120777 << 16) >>> 0 }] as never });
    const linked = await post("/api/datasets/upload/zip", { target_path: "slip", file: new Blob([link]) });
    expect(linked).toMatchObject({ status: 422 });
    expect(linked.body.detail).toBe('Zip entry "link.png" is a symbolic link; nothing was extracted');
    const notZip = await post("/api/datasets/upload/zip", { target_path: "slip", file: new Blob(["not a zip"]) });
    expect(notZip.status).toBe(422);
    expect((await list("")).folders).not.toContain("slip");
  });
});

describe("zip bombs", () => {
  /** A zip whose one entry declares `declared` bytes but inflates to `actual` zeros. */
  function bomb(name: string, actual: number, declared: number): Uint8Array {
    const zip = zipSync({ [name]: new Uint8Array(actual) }, { level: 9 });
    const view = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
    view.setUint32(22, declared, true); // local file header: uncompressed size
    const central = view.getUint32(zip.byteLength - 22 + 16, true);
    view.setUint32(central + 24, declared, true); // central directory: uncompressed size
    return zip;
  }

  it("stops extracting once an entry produces more than its cap, whatever it declares (413), writing nothing", async () => {
    const zip = bomb("bomb.png", 101 * 1024 * 1024, 1000);
    expect(zip.byteLength).toBeLessThan(200 * 1024);
    const reply = await post("/api/datasets/upload/zip", { target_path: "bombed", file: new Blob([zip as Uint8Array<ArrayBuffer>]) });
    expect(reply.status).toBe(413);
    expect(reply.body).toMatchObject({
      code: "zip_too_large",
      detail: `Zip entry "bomb.png" expands to more than ${100 * 1024 * 1024} bytes (counted while extracting, whatever it declares); nothing was extracted`,
    });
    expect((await list("")).folders).not.toContain("bombed");
  });

  it("still extracts a zip whose entries are within the caps", async () => {
    const reply = await post("/api/datasets/upload/zip", {
      target_path: "bombed-not",
      file: new Blob([zipSync({ "a.png": new Uint8Array(1024 * 1024) }) as Uint8Array<ArrayBuffer>]),
    });
    expect(reply.status).toBe(201);
    expect(reply.body.files).toEqual([expect.objectContaining({ path: "bombed-not/a.png", size: 1024 * 1024 })]);
  });
});

describe("folder owners", () => {
  let other: string;
  let lead: string;
  beforeAll(async () => {
    other = (await createUserWithKey(t, { cookie: adminCookie }, "researcher", "otto")).key;
    lead = (await createUserWithKey(t, { cookie: adminCookie }, "lead", "lena")).key;
    expect((await post("/api/datasets/folders", { parent_path: "", folder_name: "mine" })).status).toBe(201);
    expect((await post("/api/datasets/upload", { target_path: "mine", "files[]": [[blob(PNG), "1.png"]] })).status).toBe(201);
  });
  const refusal = {
    code: "folder_not_yours",
    detail: "Dataset folder mine belongs to another user: only its creator, leads and admins change its files (reading it is open to all)",
  };

  it("refuse another researcher's upload, zip and new subfolder in the creator's folder (403), changing nothing", async () => {
    const before = JSON.stringify([await list("mine"), await list("mine/sub")]);
    expect(await post("/api/datasets/upload", { target_path: "mine", "files[]": [[blob(PNG), "1.png"]] }, other)).toMatchObject({
      status: 403,
      body: refusal,
    });
    expect(await post("/api/datasets/upload", { target_path: "mine/sub", "files[]": [[blob(PNG), "2.png"]] }, other)).toMatchObject({
      status: 403,
      body: refusal,
    });
    expect(
      await post(
        "/api/datasets/upload/zip",
        { target_path: "mine", file: new Blob([zipSync({ "1.png": strToU8("overwritten") })]) },
        other,
      ),
    ).toMatchObject({ status: 403, body: refusal });
    expect(
      await post(
        "/api/datasets/upload/zip",
        { target_path: "", file: new Blob([zipSync({ "mine/1.png": strToU8("overwritten") })]) },
        other,
      ),
    ).toMatchObject({ status: 403, body: refusal });
    expect(await post("/api/datasets/folders", { parent_path: "mine", folder_name: "sub" }, other)).toMatchObject({
      status: 403,
      body: refusal,
    });
    expect(JSON.stringify([await list("mine"), await list("mine/sub")])).toBe(before);
    // Reading stays open.
    expect((await (await fetch(`${t.base}/api/datasets?path=mine`, { headers: { "x-api-key": other } })).json()).files).toHaveLength(1);
  });

  it("let the creator and leads change the folder, and give a new folder to whoever writes into it first", async () => {
    expect((await post("/api/datasets/folders", { parent_path: "mine", folder_name: "sub" })).status).toBe(201);
    expect((await post("/api/datasets/upload", { target_path: "mine/sub", "files[]": [[blob(PNG), "by-lead.png"]] }, lead)).status).toBe(
      201,
    );
    expect((await post("/api/datasets/upload", { target_path: "ottos", "files[]": [[blob(PNG), "1.png"]] }, other)).status).toBe(201);
    expect((await post("/api/datasets/upload", { target_path: "ottos", "files[]": [[blob(PNG), "2.png"]] })).status).toBe(403);
    expect((await list("mine/sub")).files.map((f: any) => f.name)).toEqual(["by-lead.png"]);
  });

  it("keep files straight under the datasets root for leads and admins", async () => {
    const refused = await post("/api/datasets/upload", { target_path: "", "files[]": [[blob(PNG), "root.png"]] }, other);
    expect(refused).toMatchObject({ status: 403, body: { code: "folder_not_yours" } });
    expect((await list("")).files.map((f: any) => f.name)).not.toContain("root.png");
    expect((await post("/api/datasets/upload", { target_path: "", "files[]": [[blob(PNG), "root.png"]] }, lead)).status).toBe(201);
  });
});
