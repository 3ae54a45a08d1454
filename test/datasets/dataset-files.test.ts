// Reading dataset files back (GET /api/datasets/file), the listing's captions and a folder owner's
// quota use (GET /api/datasets/usage) over real HTTP into the real R2 binding: what a file is served
// as, that nothing stored runs as a page of the service's origin, and that every level reads what
// the listing shows while only the folder's owner, leads and admins may change it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let rita: string;
let sam: string;
let viewer: string;
let lead: string;
const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);
// An "image" whose bytes are a page: a browser that sniffed it would run the script.
const HTML_AS_PNG = new TextEncoder().encode("<html><script>alert(document.cookie)</script></html>");

beforeAll(async () => {
  t = await startTestStack();
  const admin = await setUpAdmin(t);
  rita = (await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "rita")).key;
  sam = (await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "sam")).key;
  viewer = (await createUserWithKey(t, { cookie: admin.cookie }, "viewer", "vera")).key;
  lead = (await createUserWithKey(t, { cookie: admin.cookie }, "lead", "lee")).key;
  const stored = await upload(rita, "portraits", [
    [PNG, "001.png"],
    ["a woman in a <b>red</b> coat\n", "001.txt"],
    [PNG, "002.png"],
    [HTML_AS_PNG, "page.png"],
    ["id,caption\n1,x\n", "meta.csv"],
  ]);
  expect(stored).toBe(201);
});
afterAll(async () => {
  await t?.stop();
});

async function upload(key: string, target: string, files: [Uint8Array | string, string][]): Promise<number> {
  const form = new FormData();
  form.set("target_path", target);
  for (const [bytes, name] of files) form.append("files[]", new Blob([bytes as BlobPart]), name);
  const response = await fetch(`${t.base}/api/datasets/upload`, { method: "POST", headers: { "x-api-key": key }, body: form });
  await response.arrayBuffer();
  return response.status;
}
const read = (path: string, key = viewer, headers: Record<string, string> = {}) =>
  fetch(`${t.base}/api/datasets/file?path=${encodeURIComponent(path)}`, { headers: { "x-api-key": key, ...headers } });
const get = async (path: string, key = viewer) => {
  const response = await fetch(`${t.base}${path}`, { headers: { "x-api-key": key } });
  return { status: response.status, body: (await response.json()) as any };
};

describe("reading a dataset file", () => {
  it("serves an image byte for byte as its image type, inline, sandboxed and unsniffable, to any level", async () => {
    const response = await read("portraits/001.png");
    expect(response.status).toBe(200);
    expect(new Uint8Array(await response.arrayBuffer())).toEqual(PNG);
    expect(response.headers.get("content-type")).toBe("image/png");
    expect(response.headers.get("x-content-type-options")).toBe("nosniff");
    expect(response.headers.get("content-security-policy")).toBe("sandbox; default-src 'none'");
    expect(response.headers.get("content-disposition")).toBe(`inline; filename="001.png"; filename*=UTF-8''001.png`);
    const etag = response.headers.get("etag");
    expect(etag).toMatch(/^"[0-9a-f]{64}"$/);
    const again = await read("portraits/001.png", viewer, { "if-none-match": etag! });
    expect(again.status).toBe(304);
  });

  it("serves captions and metadata as plain text", async () => {
    const caption = await read("portraits/001.txt");
    expect(caption.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await caption.text()).toBe("a woman in a <b>red</b> coat\n");
    const csv = await read("portraits/meta.csv");
    expect(csv.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(csv.headers.get("content-security-policy")).toBe("sandbox; default-src 'none'");
  });

  it("serves markup stored under an image's name as that image type, never as a page", async () => {
    const response = await read("portraits/page.png");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("image/png");
    expect(response.headers.get("x-content-type-options")).toBe("nosniff");
    expect(response.headers.get("content-security-policy")).toContain("sandbox");
  });

  it("refuses an uploaded .html or .svg, so there is none to serve", async () => {
    expect(await upload(rita, "portraits", [["<svg onload=alert(1)></svg>", "x.svg"]])).toBe(415);
    expect(await upload(rita, "portraits", [["<script>alert(1)</script>", "x.html"]])).toBe(415);
    for (const name of ["x.svg", "x.html"]) {
      const response = await read(`portraits/${name}`);
      expect(response.status).toBe(404);
      expect(response.headers.get("content-type")).toContain("application/json");
    }
  });

  it("answers 404 for a missing file or a folder, 422 for a path leaving the root, 401 without a credential", async () => {
    for (const path of ["portraits/nope.png", "portraits", "nowhere/001.png"]) {
      const response = await read(path);
      expect(response.status, path).toBe(404);
      expect(((await response.json()) as any).code).toBe("not_found");
    }
    for (const path of [
      "../portraits/001.png",
      "portraits/../../etc/passwd",
      "/portraits/001.png",
      "portraits\\001.png",
      "portraits/./001.png",
    ]) {
      const response = await read(path);
      expect(response.status, path).toBe(422);
      expect(((await response.json()) as any).code).toBe("invalid_path");
    }
    expect((await fetch(`${t.base}/api/datasets/file?path=`, { headers: { "x-api-key": viewer } })).status).toBe(422);
    expect((await fetch(`${t.base}/api/datasets/file?path=portraits/001.png`)).status).toBe(401);
  });
});

describe("the listing's captions", () => {
  it("gives each image its .txt sidecar's text when asked, null when it has none, and only when asked", async () => {
    const listed = await get("/api/datasets?path=portraits&captions=true");
    expect(listed.status).toBe(200);
    const byName = Object.fromEntries(listed.body.files.map((f: any) => [f.name, f.caption]));
    expect(byName).toEqual({
      "001.png": "a woman in a <b>red</b> coat",
      "001.txt": undefined,
      "002.png": null,
      "meta.csv": undefined,
      "page.png": null,
    });
    const plain = await get("/api/datasets?path=portraits");
    expect(plain.body.files.every((f: any) => !("caption" in f))).toBe(true);
    expect((await get("/api/datasets?path=portraits&captions=yes")).status).toBe(422);
  });

  it("cuts a long caption at 2,000 characters", async () => {
    expect(
      await upload(rita, "long", [
        [PNG, "a.png"],
        ["é".repeat(3000), "a.txt"],
      ]),
    ).toBe(201);
    const listed = await get("/api/datasets?path=long&captions=true");
    expect(listed.body.files[0].caption).toBe("é".repeat(2000));
  });
});

describe("a folder owner's quota use", () => {
  it("counts the owner's folders and says who may change them", async () => {
    const own = await get("/api/datasets/usage?path=portraits", rita);
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ folder: "portraits", owner: "rita", may_write: true, max_files: 200_000 });
    expect(own.body.used_files).toBeGreaterThanOrEqual(5);
    expect(own.body.used_bytes).toBeGreaterThan(0);
    // Another researcher and a viewer read the same numbers but may not write; a lead may.
    expect((await get("/api/datasets/usage?path=portraits/sub", sam)).body).toEqual({ ...own.body, may_write: false });
    expect((await get("/api/datasets/usage?path=portraits", viewer)).body.may_write).toBe(false);
    expect((await get("/api/datasets/usage?path=portraits", lead)).body.may_write).toBe(true);
    // A folder nobody made yet: a researcher's upload would make it theirs.
    expect((await get("/api/datasets/usage?path=fresh", sam)).body).toMatchObject({
      folder: "fresh",
      owner: null,
      may_write: true,
      used_files: 0,
    });
    expect((await get("/api/datasets/usage?path=fresh", viewer)).body.may_write).toBe(false);
  });

  it("at the root, answers the caller's own use", async () => {
    expect((await get("/api/datasets/usage", sam)).body).toMatchObject({ folder: null, owner: "sam", used_files: 0, may_write: false });
    expect((await get("/api/datasets/usage?path=", rita)).body).toMatchObject({ folder: null, owner: "rita", may_write: false });
    expect((await get("/api/datasets/usage?path=..", rita)).status).toBe(422);
  });

  it("refuses a viewer's upload and another researcher's delete, changing nothing", async () => {
    const before = await get("/api/datasets/usage?path=portraits", rita);
    expect(await upload(viewer, "portraits", [[PNG, "v.png"]])).toBe(403);
    expect(await upload(sam, "portraits", [[PNG, "s.png"]])).toBe(403);
    const deleted = await fetch(`${t.base}/api/datasets?path=portraits/001.png`, { method: "DELETE", headers: { "x-api-key": sam } });
    expect(deleted.status).toBe(403);
    expect((await read("portraits/001.png")).status).toBe(200);
    expect((await read("portraits/v.png")).status).toBe(404);
    expect((await get("/api/datasets/usage?path=portraits", rita)).body).toEqual(before.body);
  });
});
