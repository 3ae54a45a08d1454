import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import { DASHBOARD_MODULE, dashboardModuleSource } from "./ui-build";

const require = createRequire(import.meta.url);
export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

// `import x from "asset:<package>/<file>"` embeds that file of an npm package as a string
// (the API docs' Swagger UI and ReDoc, which must not come from a CDN).
const embedAssets: esbuild.Plugin = {
  name: "embed-assets",
  setup(build) {
    build.onResolve({ filter: /^asset:/ }, (args) => ({ path: require.resolve(args.path.slice("asset:".length)), namespace: "asset" }));
    build.onLoad({ filter: /.*/, namespace: "asset" }, async (args) => ({ contents: await readFile(args.path, "utf8"), loader: "text" }));
  },
};

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
  plugins: [embedAssets, embedDashboard()],
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
    plugins: [embedAssets, embedDashboard((dashboard) => inputs.push(...dashboard))],
    absWorkingDir: REPO_ROOT,
    write: false,
    outfile: "index.js",
    metafile: true,
  });
  for (const input of Object.keys(result.metafile.inputs)) {
    // "asset:<path>" is a file embedded as text; "ui-build:..." is the dashboard, whose files were heard above.
    if (input.startsWith("ui-build:")) continue;
    inputs.push(resolve(REPO_ROOT, input.replace(/^asset:/, "")));
  }
  return { script: result.outputFiles[0]!.text, inputs };
}
