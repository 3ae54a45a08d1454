import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/*
 * The import graph between edge/'s rooms (a folder directly under edge/, or a file at its top),
 * and the README's layering of them. Module specifiers are read by TypeScript's own pre-processor
 * (imports, `import type`, re-exports and dynamic imports alike), so a type-only import counts:
 * it ties the rooms together as much as a value import does for a reader.
 *
 * `npm run imports` prints the figures; test/house/layering.test.ts holds the README to them.
 */

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** One import of one room by another: the importing file and what it names. */
export interface RoomImport {
  from: string;
  to: string;
  file: string;
  specifier: string;
}

/** A room: `routes/` for edge/routes/**, `env.ts` for edge/env.ts. */
export function roomOf(edgeRelativePath: string): string {
  const [first, ...rest] = edgeRelativePath.split("/");
  return rest.length ? `${first}/` : first!;
}

/** The relative module specifiers a file names (imports, `import type`, re-exports and dynamic imports alike). */
export function relativeSpecifiers(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
  return importedFiles.map((i) => i.fileName).filter((specifier) => specifier.startsWith("."));
}

/** The source files (.ts, .tsx) under `dir`. */
export function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : sourceFiles(path);
    return /\.(ts|tsx)$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

/** Every import of one edge/ room by another (relative specifiers only: packages and shared/ are not rooms). */
export function roomImports(root = ROOT): RoomImport[] {
  const edge = join(root, "edge");
  const found: RoomImport[] = [];
  for (const file of sourceFiles(edge)) {
    for (const specifier of relativeSpecifiers(file)) {
      const target = relative(edge, normalize(join(dirname(file), specifier)));
      if (target.startsWith("..")) continue; // shared/ or the repository root
      const from = roomOf(relative(edge, file));
      const to = roomOf(target.replace(/\.(js|ts|tsx)$/, "") + (target.includes("/") ? "" : ".ts"));
      if (from !== to) found.push({ from, to, file: relative(root, file), specifier });
    }
  }
  return found;
}

/**
 * The layering written in the README between `<!-- layers -->` and `<!-- /layers -->`: one numbered
 * list item per layer, top first (an item may run over several lines), naming its rooms in
 * backquotes (`routes/`, `env.ts`). Other names in backquotes (a file inside a room) are not rooms:
 * only the names in `rooms` count, and a room named in two layers is an error.
 */
export function readmeLayers(readme = readFileSync(join(ROOT, "README.md"), "utf8"), rooms = edgeRooms()): string[][] {
  const block = /<!-- layers -->([\s\S]*?)<!-- \/layers -->/.exec(readme);
  if (!block) throw new Error("README.md has no <!-- layers --> ... <!-- /layers --> block");
  const items: string[] = [];
  for (const line of block[1]!.split("\n")) {
    if (/^\s*\d+\.\s/.test(line)) items.push(line);
    else if (items.length && line.trim()) items[items.length - 1] += " " + line.trim();
  }
  const seen = new Set<string>();
  return items.map((item) =>
    [...item.matchAll(/`([^`]+)`/g)]
      .map((m) => m[1]!)
      .filter((name) => rooms.has(name))
      .filter((room) => {
        if (seen.has(room)) throw new Error(`README.md's layers name ${room} twice`);
        return seen.add(room);
      }),
  );
}

/** The rooms of edge/: its folders (`jobs/`) and the source files at its top (`env.ts`). */
export function edgeRooms(root = ROOT): Set<string> {
  const entries = readdirSync(join(root, "edge"), { withFileTypes: true });
  return new Set(
    entries.flatMap((e) => (e.isDirectory() ? [`${e.name}/`] : /\.tsx?$/.test(e.name) && !e.name.endsWith(".d.ts") ? [e.name] : [])),
  );
}

/** Imports that go from a room to one in a layer above it (a smaller index), and rooms the layering does not name. */
export function checkLayers(imports: RoomImport[], layers: string[][]) {
  const layerOf = new Map<string, number>();
  layers.forEach((rooms, index) => rooms.forEach((room) => layerOf.set(room, index)));
  const unplaced = [...new Set(imports.flatMap((i) => [i.from, i.to]))].filter((room) => !layerOf.has(room)).sort();
  const upward = imports.filter((i) => layerOf.has(i.from) && layerOf.has(i.to) && layerOf.get(i.to)! < layerOf.get(i.from)!);
  return { upward, unplaced };
}

/** Pairs of rooms that import each other, directly. */
export function mutualPairs(imports: RoomImport[]): string[] {
  const edges = new Set(imports.map((i) => `${i.from} -> ${i.to}`));
  return [...new Set(imports.filter((i) => i.from < i.to && edges.has(`${i.to} -> ${i.from}`)).map((i) => `${i.from} <-> ${i.to}`))].sort();
}

/** Strongly connected groups of more than one room (Tarjan): rooms that reach each other through imports. */
export function roomCycles(imports: RoomImport[]): string[][] {
  const next = new Map<string, Set<string>>();
  for (const { from, to } of imports) next.set(from, (next.get(from) ?? new Set()).add(to));
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (room: string) => {
    index.set(room, index.size);
    low.set(room, index.get(room)!);
    stack.push(room);
    onStack.add(room);
    for (const to of next.get(room) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(room, Math.min(low.get(room)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(room, Math.min(low.get(room)!, index.get(to)!));
    }
    if (low.get(room) === index.get(room)) {
      const group: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        group.push(member);
      } while (member !== room);
      if (group.length > 1) groups.push(group.sort());
    }
  };
  for (const room of next.keys()) if (!index.has(room)) visit(room);
  return groups;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === normalize(process.argv[1])) {
  const imports = roomImports();
  const edges = new Set(imports.map((i) => `${i.from} -> ${i.to}`));
  const pairs = mutualPairs(imports);
  const cycles = roomCycles(imports);
  console.log(
    `edge/ rooms: ${new Set(imports.flatMap((i) => [i.from, i.to])).size}, room-to-room edges: ${edges.size} (${imports.length} imports)`,
  );
  console.log(`rooms importing each other: ${pairs.length}${pairs.length ? "\n  " + pairs.join("\n  ") : ""}`);
  console.log(`import cycles between rooms: ${cycles.length}${cycles.length ? "\n  " + cycles.map((c) => c.join(" ")).join("\n  ") : ""}`);
  let layers: string[][] | null = null;
  try {
    layers = readmeLayers();
  } catch (error) {
    console.log(String(error));
  }
  if (layers) {
    const { upward, unplaced } = checkLayers(imports, layers);
    const upwardEdges = [...new Set(upward.map((i) => `${i.from} -> ${i.to}`))];
    console.log(`imports against the README's layering: ${upward.length} (${upwardEdges.length} room edges)`);
    for (const i of upward) console.log(`  ${i.file}: ${i.specifier}`);
    if (unplaced.length) console.log(`rooms the layering does not name: ${unplaced.join(" ")}`);
  }
}
