// The routes are the top of edge/: only the app (edge/app.ts) mounts them, so middleware and the domain
// never import from edge/routes/. And the API document's prose is the Markdown under edge/routes/api-docs/,
// every file of which the document is built from.
import { readdirSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { relativeSpecifiers, roomImports } from "../tools/import-graph";

const ROUTES = resolve(import.meta.dirname, "..", "..", "edge", "routes");

describe("edge/routes/", () => {
  it("is imported by edge/app.ts alone", () => {
    const importers = roomImports().filter((i) => i.to === "routes/");
    expect([...new Set(importers.map((i) => i.file))]).toEqual(["edge/app.ts"]);
  });

  it("builds the API document from every Markdown file in api-docs/", () => {
    const files = readdirSync(join(ROUTES, "api-docs")).filter((name) => name.endsWith(".md"));
    const tags = join(ROUTES, "openapi-tags.ts");
    const imported = relativeSpecifiers(tags)
      .filter((specifier) => specifier.endsWith(".md"))
      .map((specifier) => resolve(dirname(tags), specifier))
      .map((target) => relative(join(ROUTES, "api-docs"), target));
    expect(imported.sort()).toEqual(files.sort());
  });
});
