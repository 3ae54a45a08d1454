// Bounds on datasets (issue 26, item 5) over real HTTP into the real R2 binding: each user's
// folders hold at most their quota (an upload, a zip or a folder past it is 413 saying the quota
// and the usage, and writes nothing; deleting gives room back), while another user uploads on;
// and a 5,000-file folder is listed a page at a time, each entry once.
import { strToU8, zipSync } from "fflate";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DATASET_QUOTA_DEFAULTS } from "../../shared/schemas/datasets";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string; cookie: string };
let rita: { key: string };
let oscar: { key: string };

async function post(path: string, fields: Record<string, string | Blob | [Blob, string][]>, key: string) {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) {
    if (Array.isArray(value)) for (const [blob, filename] of value) form.append(name, blob, filename);
    else form.set(name, value);
  }
  const response = await fetch(`${t.base}${path}`, { method: "POST", headers: { "x-api-key": key }, body: form });
  return { status: response.status, body: (await response.json()) as any };
}
const bytes = (n: number, fill = 7) => new Blob([new Uint8Array(n).fill(fill)]);
const upload = (target: string, files: [Blob, string][], key: string) =>
  post("/api/datasets/upload", { target_path: target, "files[]": files }, key);
const folder = (parent: string, name: string, key: string) =>
  post("/api/datasets/folders", { parent_path: parent, folder_name: name }, key);
const list = async (query: string, key = rita.key) => t.call("GET", `/api/datasets?${query}`, { auth: { key } });
const names = async (path: string) => (await list(`path=${encodeURIComponent(path)}`)).body.files.map((f: any) => f.name);
const setQuota = async (quota: Record<string, number>) => {
  const reply = await t.call("PUT", "/api/admin/dataset-quota", { json: quota, auth: { key: admin.key } });
  expect(reply.status).toBe(200);
  return reply.body;
};

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  rita = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "rita");
  oscar = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "oscar");
});
afterAll(async () => {
  await t?.stop();
});

describe("the dataset quota per owner", () => {
  it("refuses an upload, a zip or a folder past the owner's quota with 413 saying the quota and the usage, writing nothing", async () => {
    await setQuota({ max_bytes: 10_000, max_files: 6 });
    expect((await folder("", "rita-set", rita.key)).status).toBe(201);
    expect(
      (
        await upload(
          "rita-set",
          [
            [bytes(3000), "a.png"],
            [bytes(3000), "b.png"],
          ],
          rita.key,
        )
      ).status,
    ).toBe(201);

    const before = await names("rita-set");
    const refused = await upload(
      "rita-set",
      [
        [bytes(3000), "c.png"],
        [bytes(3000), "d.png"],
      ],
      rita.key,
    );
    expect(refused.status).toBe(413);
    expect(refused.body.code).toBe("dataset_quota_exceeded");
    expect(refused.body.detail).toContain("rita");
    expect(refused.body.detail).toContain("6000 of 10000 bytes and 3 of 6 files");
    expect(refused.body.detail).toContain("this upload adds 6000 bytes and 2 files");
    const zip = zipSync({ "z/e.png": new Uint8Array(5000), "z/f.png": new Uint8Array(10) });
    const zipped = await post("/api/datasets/upload/zip", { target_path: "rita-set", file: [[new Blob([zip]), "set.zip"]] }, rita.key);
    expect([zipped.status, zipped.body.code]).toEqual([413, "dataset_quota_exceeded"]);
    expect(await names("rita-set")).toEqual(before);
    expect((await list("path=rita-set")).body.folders).toEqual([]);

    // Within it: a file replaced by one as large adds nothing; one more small file fits.
    expect((await upload("rita-set", [[bytes(3000, 9), "a.png"]], rita.key)).status).toBe(201);
    expect((await upload("rita-set", [[bytes(1000), "c.png"]], rita.key)).status).toBe(201);
    // Files: the folder counts as one (4 of 6 now); two folders more pass it.
    expect((await folder("rita-set", "sub", rita.key)).status).toBe(201);
    expect((await folder("rita-set", "sub2", rita.key)).status).toBe(201);
    const third = await folder("rita-set", "sub3", rita.key);
    expect([third.status, third.body.code]).toEqual([413, "dataset_quota_exceeded"]);
    expect((await list("path=rita-set")).body.folders).toEqual(["sub", "sub2"]);
    // A lead or admin writing into her folder uses her quota too.
    expect((await upload("rita-set", [[bytes(2000), "by-admin.png"]], admin.key)).status).toBe(413);

    // Another user, meanwhile: his own folder, his own quota.
    expect((await folder("", "oscar-set", oscar.key)).status).toBe(201);
    expect(
      (
        await upload(
          "oscar-set",
          [
            [bytes(3000), "a.png"],
            [bytes(3000), "b.png"],
          ],
          oscar.key,
        )
      ).status,
    ).toBe(201);
    expect(await names("oscar-set")).toEqual(["a.png", "b.png"]);
  });

  it("gives room back when files or folders are deleted, by their owner, leads and admins only", async () => {
    expect((await t.call("DELETE", "/api/datasets?path=rita-set/b.png", { auth: { key: oscar.key } })).body.code).toBe("folder_not_yours");
    expect((await t.call("DELETE", "/api/datasets?path=rita-set/nothing.png", { auth: { key: rita.key } })).status).toBe(404);
    expect((await t.call("DELETE", "/api/datasets?path=", { auth: { key: rita.key } })).status).toBe(422);
    const file = await t.call("DELETE", "/api/datasets?path=rita-set/b.png", { auth: { key: rita.key } });
    expect(file.body).toEqual({ success: true, path: "rita-set/b.png", deleted_files: 1, deleted_bytes: 3000 });
    const sub = await t.call("DELETE", "/api/datasets?path=rita-set/sub2", { auth: { key: rita.key } });
    expect(sub.body).toMatchObject({ deleted_files: 1, deleted_bytes: 0 });
    expect(await names("rita-set")).toEqual(["a.png", "c.png"]);
    // 4,000 bytes and 4 files: what was refused fits now.
    expect((await upload("rita-set", [[bytes(3000), "d.png"]], rita.key)).status).toBe(201);
  });

  it("is read and changed by admins only, and audited", async () => {
    expect((await t.call("GET", "/api/admin/dataset-quota", { auth: { key: rita.key } })).status).toBe(403);
    expect((await t.call("PUT", "/api/admin/dataset-quota", { json: { max_bytes: 1 }, auth: { key: rita.key } })).status).toBe(403);
    expect((await t.call("PUT", "/api/admin/dataset-quota", { json: { max_files: -1 }, auth: { key: admin.key } })).status).toBe(422);
    expect(await setQuota(DATASET_QUOTA_DEFAULTS)).toEqual(DATASET_QUOTA_DEFAULTS);
    expect((await t.call("GET", "/api/admin/dataset-quota", { auth: { key: admin.key } })).body).toEqual(DATASET_QUOTA_DEFAULTS);
    await until("the audit entry", async () => {
      const reply = await t.call("GET", "/api/audit?event_type=dataset_quota_changed", { auth: { key: admin.key } });
      return reply.body.entries.some((e: any) => e.details.after?.max_files === DATASET_QUOTA_DEFAULTS.max_files);
    });
  });
});

describe("folder listings", () => {
  it("list a 5,000-file folder in pages: every entry once, in order, the last page without a cursor", async () => {
    // One zip (extracted into the root, so into the new folder "big"): the quicker way to 5,000 files.
    const entries: Record<string, Uint8Array> = {};
    for (let i = 0; i < 5_000; i++) entries[`big/${String(i).padStart(5, "0")}.txt`] = strToU8(`caption ${i}`);
    for (const sub of ["00100", "02500"]) entries[`big/${sub}/inside.png`] = new Uint8Array(4);
    const zipped = await post(
      "/api/datasets/upload/zip",
      { target_path: "", file: [[new Blob([zipSync(entries)]), "big.zip"]] },
      admin.key,
    );
    expect(zipped.status).toBe(201);

    const seen: string[] = [];
    let pages = 0;
    let cursor: string | null = null;
    do {
      const reply = await list(cursor === null ? "path=big" : `cursor=${cursor}`);
      expect(reply.status).toBe(200);
      expect(reply.body.path).toBe("big");
      expect(reply.body.folders.length + reply.body.files.length).toBeLessThanOrEqual(500);
      seen.push(...reply.body.folders.map((f: string) => `${f}/`), ...reply.body.files.map((f: any) => f.name));
      cursor = reply.body.next_cursor;
      pages++;
    } while (cursor !== null);
    const expected = [...Array.from({ length: 5_000 }, (_, i) => `${String(i).padStart(5, "0")}.txt`), "00100/", "02500/"];
    expect(seen.sort()).toEqual(expected.sort());
    expect(pages).toBe(11);
    // A page of 1,000 at most.
    const full = (await list("path=big&limit=1000")).body;
    expect([full.folders, full.files.length]).toEqual([["00100"], 999]);
    expect((await list("path=big&limit=1001")).status).toBe(422);
  }, 90_000); // 5,000 files extracted into R2 and listed: about 10 s alone, three times that beside a heavy file

  it("go on past a folder to the file that sorts right after it", async () => {
    for (const [target, name] of [
      ["order", "m-1.png"],
      ["order", "m.png"],
      ["order/m", "a.png"],
      ["order", "m0.png"],
      ["order", "n.png"],
    ] as const)
      expect((await upload(target, [[bytes(4), name]], rita.key)).status).toBe(201);
    const seen: string[] = [];
    let reply = await list("path=order&limit=1");
    for (;;) {
      seen.push(...reply.body.folders.map((f: string) => `${f}/`), ...reply.body.files.map((f: any) => f.name));
      if (reply.body.next_cursor === null) break;
      reply = await list(`cursor=${reply.body.next_cursor}&limit=1`);
    }
    expect(seen).toEqual(["m-1.png", "m.png", "m/", "m0.png", "n.png"]);
  });

  it("refuse a cursor for another path, another listing's cursor, or garbage (422 invalid_cursor)", async () => {
    const first = (await list("path=big&limit=10")).body;
    const other = await list(`path=order&cursor=${first.next_cursor}`);
    expect([other.status, other.body.code]).toEqual([422, "invalid_cursor"]);
    expect((await list(`path=big&cursor=${first.next_cursor}`)).status).toBe(200);
    const queueCursor = (await t.call("GET", "/api/queue?limit=1", { auth: { key: admin.key } })).body.next_cursor ?? "eyJsIjoicXVldWUifQ";
    for (const cursor of ["garbage!", queueCursor])
      expect((await list(`cursor=${encodeURIComponent(cursor)}`)).body.code).toBe("invalid_cursor");
  });
});
