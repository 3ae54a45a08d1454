// The routes are the top of edge/: only the app (edge/app.ts) mounts them, so middleware and the domain
// never import from edge/routes/. And the API document's prose is the Markdown under edge/routes/api-docs/,
// every file of which the document is built from.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..", "..");
const EDGE = join(ROOT, "edge");
const ROUTES = join(EDGE, "routes");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) ? [path] : [];
  });
}

/** The relative modules a file imports (static, type-only, re-exports and dynamic imports alike). */
function relativeImports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)["'](\.[^"']*)["']/g)].map((m) => resolve(dirname(file), m[1]!));
}

describe("edge/routes/", () => {
  it("is imported by edge/app.ts alone", () => {
    const importers = sourceFiles(EDGE)
      .filter((file) => !file.startsWith(ROUTES + "/"))
      .filter((file) => relativeImports(file).some((target) => target === ROUTES || target.startsWith(ROUTES + "/")))
      .map((file) => relative(ROOT, file));
    expect(importers).toEqual(["edge/app.ts"]);
  });

  it("builds the API document from every Markdown file in api-docs/", () => {
    const files = readdirSync(join(ROUTES, "api-docs")).filter((name) => name.endsWith(".md"));
    const imported = relativeImports(join(ROUTES, "openapi-tags.ts"))
      .filter((target) => target.endsWith(".md"))
      .map((target) => relative(join(ROUTES, "api-docs"), target));
    expect(imported.sort()).toEqual(files.sort());
  });
});
