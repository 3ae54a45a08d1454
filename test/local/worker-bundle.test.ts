// The Worker bundle's shape that its start time and memory depend on (issue 31): what workerd
// parses and holds at every start. Pure checks on the bundle the test run built
// (test/helpers/global-setup.ts, edge/local/bundle.ts), the same one `npm start` and deploy use.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { asciiOnly } from "../../edge/local/bundle";
import { bundledWorker } from "../helpers/stack";

describe("the Worker bundle", () => {
  it("is ASCII only, so V8 holds its source in one byte a character", () => {
    const script = bundledWorker();
    const outside = [...script.matchAll(/[^\x00-\x7f]/g)].map((m) => script.slice(Math.max(0, m.index - 40), m.index + 10));
    expect(outside).toEqual([]);
  });

  it("embeds the API docs' assets compressed, not as their text", () => {
    const script = bundledWorker();
    // A line that only the uncompressed Swagger UI bundle has.
    const swagger = readFileSync("node_modules/swagger-ui-dist/swagger-ui-bundle.js", "utf8");
    expect(script).not.toContain(swagger.slice(1000, 1200));
    expect(script.length).toBeLessThan(4_500_000);
  });

  it("carries zod's English messages only, its default, not its other locales", () => {
    const locales = [...new Set(bundledWorker().match(/node_modules\/zod\/v4\/locales\/[\w-]+\.js/g))];
    expect(locales).toEqual(["node_modules/zod/v4/locales/en.js"]);
  });

  it("writes characters outside ASCII as escapes, a pair of surrogates as two", () => {
    expect(asciiOnly("a // dash \u2014 and \u00e0\n")).toBe("a // dash \\u2014 and \\u00e0\n");
    expect(asciiOnly("/* \u{1f600} */")).toBe("/* \\ud83d\\ude00 */");
    expect(asciiOnly("plain ascii \t\n")).toBe("plain ascii \t\n");
    // A line separator ends a line comment: the code after it stays code.
    const commented = asciiOnly("let a = 1; // note\u2028a = 2;\n");
    expect(commented).toBe("let a = 1; // note\na = 2;\n");
    expect(new Function(`${commented} return a;`)()).toBe(2);
    // An escape in a string means the same string.
    expect(eval(asciiOnly('"caf\u00e9 \u{1f600}"'))).toBe("caf\u00e9 \u{1f600}");
  });
});
