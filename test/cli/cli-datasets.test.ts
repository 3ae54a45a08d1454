// `jobs datasets list`, `upload` and `rm`: the built binary run as a subprocess (and once on a
// pseudo-terminal, for its progress) against the real local stack, each result read back over
// HTTP. A viewer's upload and another researcher's delete are refused with nothing changed; a
// refused file does not lose the others; bad arguments exit 2 before any request.
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pty from "node-pty";
import { zipSync } from "fflate";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jobs, tempConfigHome } from "../helpers/cli";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let alice: { key: string; id: number };
let bob: { key: string; id: number };
let vera: { key: string; id: number };
const dir = mkdtempSync(join(tmpdir(), "cli-datasets-"));

const as = (who: { key: string }, args: string[]) =>
  jobs(args, { env: { SERVICE_URL: t.base, SERVICE_API_KEY: who.key }, timeoutMs: 120_000 });
const listing = async (path: string, who = alice) => {
  const names: string[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor === null ? `path=${encodeURIComponent(path)}` : `cursor=${encodeURIComponent(cursor)}`;
    const reply = await t.call("GET", `/api/datasets?${query}&limit=1000`, { auth: { key: who.key } });
    if (reply.status !== 200) throw new Error(`list ${path}: ${reply.status} ${reply.text}`);
    names.push(...reply.body.folders.map((f: string) => `${f}/`), ...reply.body.files.map((f: { name: string }) => f.name));
    cursor = reply.body.next_cursor;
  } while (cursor !== null);
  return names;
};
const lines = (text: string) => text.split("\n").filter(Boolean);
const write = (path: string, content: string | Uint8Array) => {
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, content);
};

beforeAll(async () => {
  t = await startTestStack();
  const admin = await setUpAdmin(t);
  alice = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "alice");
  bob = await createUserWithKey(t, { cookie: admin.cookie }, "researcher", "bob");
  vera = await createUserWithKey(t, { cookie: admin.cookie }, "viewer", "vera");
});

afterAll(async () => {
  await t?.stop();
});

describe("jobs datasets upload", () => {
  it("sends files, folders (relative paths kept, hidden files skipped) and a zip (extracted) into --to", async () => {
    write(join(dir, "ada/one.png"), "png-1");
    write(join(dir, "ada/one.txt"), "a photo of ada");
    write(join(dir, "ada/close/two.png"), "png-2");
    write(join(dir, "ada/.DS_Store"), "finder");
    write(join(dir, "cover.jpg"), "jpg");
    write(join(dir, "bea.zip"), zipSync({ "bea/three.png": new TextEncoder().encode("png-3") }));
    const run = await as(alice, [
      "datasets",
      "upload",
      join(dir, "ada"),
      join(dir, "cover.jpg"),
      join(dir, "bea.zip"),
      "--to",
      "portraits",
    ]);
    expect([run.code, run.stderr]).toEqual([0, ""]);
    expect(run.stdout).toBe("Uploaded 5 files (32 B) to portraits\n");
    expect(await listing("portraits")).toEqual(["ada/", "bea/", "cover.jpg"]);
    expect(await listing("portraits/ada")).toEqual(["close/", "one.png", "one.txt"]);
    expect(await listing("portraits/ada/close")).toEqual(["two.png"]);
    expect(await listing("portraits/bea")).toEqual(["three.png"]);
  });

  it("a refused file fails alone: the others are stored, the failure named on stderr, exit 1", async () => {
    write(join(dir, "mixed/good.png"), "png");
    write(join(dir, "mixed/run.sh"), "#!/bin/sh");
    write(join(dir, "mixed/good.txt"), "caption");
    const run = await as(alice, ["datasets", "upload", join(dir, "mixed"), "--to", "portraits"]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("Uploaded 2 files (10 B) to portraits\n");
    const errors = lines(run.stderr);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(new RegExp(`^failed: ${join(dir, "mixed/run.sh")}: .+`));
    expect(errors[1]).toBe("error: 1 of 3 files not uploaded");
    expect(await listing("portraits/mixed")).toEqual(["good.png", "good.txt"]);
  });

  it("a viewer's upload is the API's 403 (exit 1), each file named, and nothing is stored", async () => {
    write(join(dir, "vera/v.png"), "png");
    write(join(dir, "vera/v.txt"), "caption");
    const before = await listing("");
    const run = await as(vera, ["datasets", "upload", join(dir, "vera"), "--to", "viewer-set"]);
    expect([run.code, run.stdout]).toEqual([1, "Uploaded 0 files (0 B) to viewer-set\n"]);
    const errors = lines(run.stderr);
    expect(errors.slice(0, 2).map((line) => line.split(": ")[0])).toEqual(["failed", "failed"]);
    expect(errors[2]).toBe("error: 2 of 2 files not uploaded");
    expect(await listing("")).toEqual(before);
  });

  it("another researcher may not upload into alice's folder: refused, her folder unchanged", async () => {
    write(join(dir, "intruder.png"), "png");
    const before = await listing("portraits");
    const run = await as(bob, ["datasets", "upload", join(dir, "intruder.png"), "--to", "portraits"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(new RegExp(`^failed: ${join(dir, "intruder.png")}: .+\\nerror: 1 of 1 file not uploaded\\n$`));
    expect(await listing("portraits")).toEqual(before);
  });

  it("bad arguments exit 2 before any request: no --to, a path that does not exist, a folder with nothing to send", async () => {
    mkdirSync(join(dir, "empty/.hidden"), { recursive: true });
    const before = await listing("");
    for (const [args, message] of [
      [[join(dir, "cover.jpg")], "error: required option '--to <folder>' not specified\n(add --help for usage)\n"],
      [[join(dir, "nowhere.png"), "--to", "x"], `error: ${join(dir, "nowhere.png")}: no such file or folder\n`],
      [[join(dir, "empty"), "--to", "x"], "error: no files to upload (folders' hidden files are skipped)\n"],
    ] as const) {
      const run = await as(vera, ["datasets", "upload", ...args]);
      expect([run.code, run.stdout, run.stderr]).toEqual([2, "", message]);
    }
    expect(await listing("")).toEqual(before);
  });

  it("on a terminal shows bytes sent of the total on stderr", async () => {
    write(join(dir, "big/a.png"), new Uint8Array(700_000));
    write(join(dir, "big/b.png"), new Uint8Array(300_000));
    const term = pty.spawn(process.execPath, ["runner/cli/bin.mjs", "datasets", "upload", join(dir, "big"), "--to", "big"], {
      cols: 120,
      rows: 20,
      cwd: process.cwd(),
      env: {
        PATH: process.env.PATH!,
        HOME: process.env.HOME!,
        TERM: "xterm-256color",
        XDG_CONFIG_HOME: tempConfigHome(),
        SERVICE_URL: t.base,
        SERVICE_API_KEY: alice.key,
      },
    });
    let output = "";
    term.onData((data) => (output += data));
    const code = await new Promise<number>((resolve) => term.onExit(({ exitCode }) => setTimeout(() => resolve(exitCode), 50)));
    expect(code, output).toBe(0);
    const counts = [...output.matchAll(/\r([\d.]+ [KMG]?i?B) of 976\.6 KiB sent \((\d+)%\)/g)].map((m) => Number(m[2]));
    expect(counts.length).toBeGreaterThan(1);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
    expect(counts.at(-1)).toBe(100);
    expect(output).toContain("Uploaded 2 files (976.6 KiB) to big");
  });
});

describe("jobs datasets list", () => {
  it("lists folders and files (name, size, modified) following every page; JSON is the API's answer of one page's shape", async () => {
    for (let i = 0; i < 1001; i++) write(join(dir, `many/f${String(i).padStart(4, "0")}.txt`), "x");
    const upload = await as(alice, ["datasets", "upload", join(dir, "many"), "--to", "paged"]);
    expect([upload.code, upload.stderr, upload.stdout]).toEqual([0, "", "Uploaded 1001 files (1001 B) to paged\n"]);

    const table = await as(vera, ["datasets", "list", "paged/many"]);
    expect(table.code, table.stderr).toBe(0);
    const rows = lines(table.stdout);
    expect(rows[0]!.split(/ {2,}/)).toEqual(["NAME", "SIZE", "MODIFIED"]);
    expect(rows).toHaveLength(1002);
    expect(rows[1]!.split(/ {2,}/)).toEqual(["f0000.txt", "1 B", expect.stringMatching(/^\d+s ago$/)]);
    expect(rows.at(-1)!.split(/ {2,}/)[0]).toBe("f1000.txt");

    const root = await as(vera, ["datasets", "list", "portraits"]);
    expect(lines(root.stdout).map((line) => line.split(/ {2,}/).slice(0, 2))).toEqual([
      ["NAME", "SIZE"],
      ["ada/", "-"],
      ["bea/", "-"],
      ["mixed/", "-"],
      ["cover.jpg", "3 B"],
    ]);

    const json = await as(vera, ["datasets", "list", "paged/many", "--format", "json"]);
    const first = await t.call("GET", "/api/datasets?path=paged/many&limit=1000", { auth: { key: vera.key } });
    const second = await t.call("GET", `/api/datasets?cursor=${encodeURIComponent(first.body.next_cursor)}&limit=1000`, {
      auth: { key: vera.key },
    });
    expect(second.body.next_cursor).toBeNull();
    expect(json.json()).toEqual({ ...first.body, files: [...first.body.files, ...second.body.files], next_cursor: null });
  });

  it("a bad path is the API's 422 on stderr, exit 1", async () => {
    const run = await as(alice, ["datasets", "list", "../etc"]);
    expect([run.code, run.stdout]).toEqual([1, ""]);
    expect(run.stderr).toMatch(/^error: /);
  });
});

describe("jobs datasets rm", () => {
  it("another researcher's rm is the API's 403 and the file stays; the owner's deletes it", async () => {
    const refused = await as(bob, ["datasets", "rm", "portraits/cover.jpg"]);
    expect([refused.code, refused.stdout]).toEqual([1, ""]);
    expect(refused.stderr).toMatch(/^error: /);
    expect(await listing("portraits")).toContain("cover.jpg");

    const run = await as(alice, ["datasets", "rm", "portraits/cover.jpg"]);
    expect([run.code, run.stdout, run.stderr]).toEqual([0, "Deleted portraits/cover.jpg: 1 file, 3 B\n", ""]);
    expect(await listing("portraits")).not.toContain("cover.jpg");
  });
});
