import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import * as esbuild from "esbuild";
import { englishZod } from "../../runner/agent/build.mjs";
import { DASHBOARD_MODULE, dashboardModuleSource } from "./ui-build";

const require = createRequire(import.meta.url);
export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

// `import x from "gzip-asset:<package>/<file>"` embeds that file of an npm package gzip-compressed,
// as a base64 string (the API docs' Swagger UI and ReDoc, which must not come from a CDN; served
// by edge/docs-assets.ts). Level 9: built once per content, read at every start.
const GZIP_ASSET = "gzip-asset:";
const embedAssets: esbuild.Plugin = {
  name: "embed-gzip-assets",
  setup(build) {
    build.onResolve({ filter: /^gzip-asset:/ }, (args) => ({
      path: require.resolve(args.path.slice(GZIP_ASSET.length)),
      namespace: "gzip-asset",
    }));
    build.onLoad({ filter: /.*/, namespace: "gzip-asset" }, async (args) => ({
      contents: (await promisify(gzip)(await readFile(args.path), { level: 9 })).toString("base64"),
      loader: "text",
    }));
  },
};

/**
 * The bundle with every character outside ASCII written as a \u escape. esbuild already escapes
 * them in strings, regular expressions and names, but keeps comments as they are, and one em dash
 * in a package's comment makes V8 hold the whole 3.7 MB source in two bytes a character.
 * An escape inside a comment is still a comment, so nothing else changes.
 */
export function asciiOnly(script: string): string {
  // Without the u flag the pattern matches UTF-16 code units, so a pair of surrogates becomes two
  // escapes. U+2028 and U+2029 end a line comment, so they become the line end they are.
  return script.replace(/[^\x00-\x7f]/g, (unit) =>
    unit === "\u2028" || unit === "\u2029" ? "\n" : `\\u${unit.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

// `import dashboard from "ui-build:dashboard"` embeds the dashboard (edge/ui), built by esbuild
// here; `onInputs` hears the files that build read (the Worker's metafile names only the module).
const embedDashboard = (onInputs?: (inputs: string[]) => void): esbuild.Plugin => ({
  name: "embed-dashboard",
  setup(build) {
    build.onResolve({ filter: /^ui-build:/ }, (args) => ({ path: args.path, namespace: "ui-build" }));
    build.onLoad({ filter: /.*/, namespace: "ui-build" }, async (args) => {
      if (args.path !== DASHBOARD_MODULE) return { errors: [{ text: `unknown dashboard module ${args.path}` }] };
      return { contents: await dashboardModuleSource(onInputs), loader: "js" };
    });
  },
});

/** esbuild options shared by the local stack and the deploy build: one bundle, both places. */
export const WORKER_BUILD: esbuild.BuildOptions = {
  entryPoints: [`${REPO_ROOT}edge/index.ts`],
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  conditions: ["workerd", "worker", "browser"],
  external: ["cloudflare:*", "node:*"],
  // zod's messages are its default English; its other locales were 360 kB for workerd to read at every start.
  plugins: [embedAssets, embedDashboard(), englishZod],
  // The API document's prose (edge/routes/api-docs/*.md), embedded as text.
  loader: { ".md": "text" },
  logLevel: "silent",
};

/** Bundles the Worker in memory and returns its ES module source. */
export async function bundleWorker(): Promise<string> {
  return (await bundleWorkerWithInputs()).script;
}

/**
 * Bundles the Worker in memory: its ES module source, and the absolute paths of every file that
 * went into it (its sources, packages, embedded assets and the dashboard's), for `npm start`'s
 * build cache (edge/local/build-cache.mjs).
 */
export async function bundleWorkerWithInputs(): Promise<{ script: string; inputs: string[] }> {
  const inputs: string[] = [];
  const result = await esbuild.build({
    ...WORKER_BUILD,
    plugins: [embedAssets, embedDashboard((dashboard) => inputs.push(...dashboard)), englishZod],
    absWorkingDir: REPO_ROOT,
    write: false,
    outfile: "index.js",
    metafile: true,
  });
  for (const input of Object.keys(result.metafile.inputs)) {
    // "gzip-asset:<path>" is a file embedded compressed; "ui-build:..." is the dashboard, whose files were heard above.
    if (input.startsWith("ui-build:")) continue;
    inputs.push(resolve(REPO_ROOT, input.startsWith(GZIP_ASSET) ? input.slice(GZIP_ASSET.length) : input));
  }
  return { script: asciiOnly(result.outputFiles[0]!.text), inputs };
}
