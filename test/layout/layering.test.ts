import { describe, expect, it } from "vitest";
import { checkLayers, mutualPairs, readmeLayers, roomCycles, roomImports, roomOf, type RoomImport } from "../tools/import-graph";

// The README's code map gives edge/'s rooms in layers, top first; a room imports only from its own
// layer or any layer below it (type-only imports count: they tie the rooms together just the same).

const edge = (from: string, to: string): RoomImport => ({ from, to, file: `edge/${from}x.ts`, specifier: `../${to}` });

describe("the import graph between edge/ rooms", () => {
  it("names a room by its folder, or by its file at the top of edge/", () => {
    expect(roomOf("jobs/lifecycle/cancel.ts")).toBe("jobs/");
    expect(roomOf("env.ts")).toBe("env.ts");
  });

  it("finds an import up the layering, rooms no layer names, rooms importing each other and cycles", () => {
    const layers = [["routes/"], ["scheduler/"], ["jobs/"], ["db/", "env.ts"]];
    const imports = [
      edge("routes/", "jobs/"),
      edge("jobs/", "scheduler/"),
      edge("scheduler/", "jobs/"),
      edge("db/", "env.ts"),
      edge("jobs/", "cloud/"),
    ];
    const { upward, unplaced } = checkLayers(imports, layers);
    expect(upward).toEqual([edge("jobs/", "scheduler/")]);
    expect(unplaced).toEqual(["cloud/"]);
    expect(mutualPairs(imports)).toEqual(["jobs/ <-> scheduler/"]);
    expect(roomCycles(imports)).toEqual([["jobs/", "scheduler/"]]);
  });

  it("reads the layers from the README's block", () => {
    const rooms = new Set(["index.ts", "local/", "routes/", "jobs/"]);
    const readme =
      "x\n<!-- layers -->\n1. `index.ts`, `local/`: the entries (`main.ts`)\n2. `routes/` (thin),\n   and `jobs/`\n<!-- /layers -->\n";
    expect(readmeLayers(readme, rooms)).toEqual([
      ["index.ts", "local/"],
      ["routes/", "jobs/"],
    ]);
    expect(() => readmeLayers("no block", rooms)).toThrow(/layers/);
    expect(() => readmeLayers("<!-- layers -->\n1. `jobs/`\n2. `jobs/`\n<!-- /layers -->", rooms)).toThrow(/twice/);
  });

  it("keeps every edge/ room in the README's layering, with no import up it and no cycle", () => {
    const imports = roomImports();
    expect(imports.length).toBeGreaterThan(100); // the graph was really read
    const { upward, unplaced } = checkLayers(imports, readmeLayers());
    expect(unplaced, "rooms missing from the README's layers").toEqual([]);
    expect(
      upward.map((i) => `${i.file} imports ${i.specifier} (${i.from} -> ${i.to})`),
      "imports up the README's layering",
    ).toEqual([]);
    expect(roomCycles(imports)).toEqual([]);
  });
});
