// Each Durable Object is declared once, in edge/durable-objects.ts. wrangler.toml must stay a
// static file for wrangler, and edge/index.ts must export the classes by name for workerd: these
// tests hold both to the declarations, so neither can drift from them.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DURABLE_OBJECTS } from "../../edge/durable-objects";
import { bundleWorker, REPO_ROOT } from "../../edge/local/bundle";

type Table = Record<string, string | string[]>;

/**
 * The `[[name]]` tables of a TOML file, in order, each as its `key = value` pairs (strings and
 * arrays of strings only, as wrangler.toml's Durable Object tables hold). Not a TOML parser: just
 * enough for these two tables, and it fails loudly on any value it does not understand.
 */
function arrayTables(toml: string, name: string): Table[] {
  const tables: Table[] = [];
  let current: Table | null = null;
  for (const raw of toml.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    if (line.startsWith("[")) {
      current = line === `[[${name}]]` ? {} : null;
      if (current) tables.push(current);
      continue;
    }
    if (!current) continue;
    const pair = /^([A-Za-z0-9_]+)\s*=\s*(.+?)\s*(?:#.*)?$/.exec(line);
    if (!pair) throw new Error(`wrangler.toml: cannot read "${line}" in [[${name}]]`);
    const [, key, value] = pair as unknown as [string, string, string];
    const text = /^"([^"]*)"$/.exec(value);
    const list = /^\[\s*((?:"[^"]*"\s*,?\s*)*)\]$/.exec(value);
    if (text) current[key] = text[1]!;
    else if (list) current[key] = [...list[1]!.matchAll(/"([^"]*)"/g)].map((m) => m[1]!);
    else throw new Error(`wrangler.toml: cannot read the value of ${key} in [[${name}]]: ${value}`);
  }
  return tables;
}

const declared = Object.entries(DURABLE_OBJECTS).map(([binding, { className, migrationTag }]) => ({ binding, className, migrationTag }));
const wranglerToml = readFileSync(`${REPO_ROOT}wrangler.toml`, "utf8");

describe("the Durable Objects declared in edge/durable-objects.ts", () => {
  it("are exactly wrangler.toml's Durable Object bindings", () => {
    const bindings = arrayTables(wranglerToml, "durable_objects.bindings");
    expect(bindings).toEqual(declared.map(({ binding, className }) => ({ name: binding, class_name: className })));
  });

  it("are exactly the classes wrangler.toml's migrations create, each by its own tag, in the declared order", () => {
    const migrations = arrayTables(wranglerToml, "migrations");
    expect(migrations).toEqual(declared.map(({ className, migrationTag }) => ({ tag: migrationTag, new_sqlite_classes: [className] })));
  });

  it("are exactly the classes the Worker's bundle exports, beside its default handler", async () => {
    const bundle = await bundleWorker();
    const exported = /^export \{([^}]*)\};?\s*$/m.exec(bundle);
    expect(exported, "the bundle ends with one export list").not.toBeNull();
    const names = exported![1]!
      .split(",")
      .map((entry) =>
        entry
          .trim()
          .split(/\s+as\s+/)
          .at(-1)!,
      )
      .filter(Boolean);
    expect(names.sort()).toEqual([...declared.map((d) => d.className), "default"].sort());
  });

  it("reads a table it does not understand as an error, not as nothing", () => {
    expect(() => arrayTables("[[migrations]]\ntag = v1\n", "migrations")).toThrow("cannot read the value of tag");
    expect(
      arrayTables('[vars]\nA = "1"\n[[migrations]] \ntag = "v1" # first\nnew_sqlite_classes = ["A", "B"]\n[other]\nx = 1\n', "migrations"),
    ).toEqual([{ tag: "v1", new_sqlite_classes: ["A", "B"] }]);
  });
});
