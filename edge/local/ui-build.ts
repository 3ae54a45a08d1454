import { createHash } from "node:crypto";
import { relative, resolve } from "node:path";
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";
import type { WireEndpoint } from "../../shared/client/endpoint";
import { endpoints } from "../../shared/client/endpoints";

const UI_ENTRY = fileURLToPath(new URL("../ui/main.tsx", import.meta.url));
const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));
const ENDPOINTS_FILE = resolve(REPO_ROOT, "shared/client/endpoints.ts");
const SCHEMAS_DIR = resolve(REPO_ROOT, "shared/schemas");

/** The most the dashboard's script may weigh, minified (test/ui/dashboard-build.test.ts holds it to this). */
export const DASHBOARD_SCRIPT_BUDGET = 250_000;

/** The dashboard as the Worker serves it: one script, one stylesheet, and a version naming both. */
export interface DashboardBuild {
  js: string;
  css: string;
  version: string;
}

/**
 * The endpoint table as the dashboard's build carries it: each operation's method, path and
 * whether its answer is raw, without the zod schemas (zod's core and the schemas were more than
 * half of the script). The dashboard calls only its own origin and takes those answers as they
 * come; the types still come from the real table (tsconfig.ui.json checks edge/ui against it).
 */
export function wireEndpoints(): Record<string, WireEndpoint> {
  return Object.fromEntries(
    Object.entries(endpoints).map(([name, e]) => [
      name,
      { method: e.method, path: e.path, response: e.response === "raw" ? "raw" : "json" },
    ]),
  );
}

/** shared/client/endpoints.ts, in the dashboard's build only, is the zod-free table above. */
const zodFreeEndpoints: esbuild.Plugin = {
  name: "zod-free-endpoints",
  setup(build) {
    build.onLoad({ filter: /[\\/]shared[\\/]client[\\/]endpoints\.ts$/ }, (args) =>
      resolve(args.path) === ENDPOINTS_FILE
        ? { contents: `export const endpoints = ${JSON.stringify(wireEndpoints())};`, loader: "js" }
        : undefined,
    );
  },
};

/** What the dashboard must not carry: zod (in any form) and the schemas built with it. */
function forbidden(args: esbuild.OnResolveArgs): string | undefined {
  if (/^(zod|@hono\/zod-openapi|@zod\/[^/]+)(\/|$)/.test(args.path)) return args.path;
  if (args.path.startsWith(".") && resolve(args.resolveDir, args.path).startsWith(SCHEMAS_DIR)) return "shared/schemas";
  return undefined;
}

/**
 * Fails the build, naming the importing file, when anything in it imports zod or shared/schemas
 * at run time (`import type` is erased before this and stays allowed). Directly importing an
 * endpoint table other than shared/client/endpoints.ts (endpoints-*.ts, which import schemas)
 * fails the same way: the dashboard calls through edge/ui/api.ts.
 */
const noZod: esbuild.Plugin = {
  name: "no-zod-in-the-dashboard",
  setup(build) {
    build.onResolve({ filter: /zod|schemas/ }, (args) => {
      const what = forbidden(args);
      if (!what) return undefined;
      return {
        errors: [
          {
            text: `the dashboard imports ${what} at run time (${relative(REPO_ROOT, args.importer)} imports "${args.path}"): zod and shared/schemas stay out of its script. Use \`import type\` for types, call the API through edge/ui/api.ts to validate, and keep plain constants in a zod-free module of shared/`,
          },
        ],
      };
    });
  },
};

/**
 * Builds the dashboard (edge/ui) with esbuild into one minified ES module and one stylesheet
 * (its own CSS and uPlot's). Nothing is fetched at run time: the machines that serve it have no CDN.
 * `entry` replaces edge/ui/main.tsx (a test builds a module of its own through the same rules).
 */
export async function buildDashboard(entry?: DashboardEntry): Promise<DashboardBuild> {
  return (await bundleDashboard(entry)).build;
}

/** A module built in place of edge/ui/main.tsx: its source and the folder its imports resolve from. */
export interface DashboardEntry {
  contents: string;
  resolveDir: string;
}

/**
 * The build with what the script is made of: its minified bytes by origin (`edge/ui`, `shared`,
 * and each package), for `npm run bench:dashboard` and the build's test, and the absolute paths
 * of the files it read, for `npm start`'s build cache (edge/local/build-cache.mjs).
 */
export async function bundleDashboard(
  entry?: DashboardEntry,
): Promise<{ build: DashboardBuild; scriptBytesByOrigin: Record<string, number>; inputs: string[] }> {
  const result = await esbuild.build({
    ...(entry ? { stdin: { ...entry, loader: "tsx", sourcefile: "entry.tsx" } } : { entryPoints: { app: UI_ENTRY } }),
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    jsx: "automatic",
    jsxImportSource: "preact",
    minify: true,
    legalComments: "none",
    write: false,
    outdir: "ui",
    logLevel: "silent",
    metafile: true,
    absWorkingDir: REPO_ROOT,
    plugins: [noZod, zodFreeEndpoints],
  });
  // Belt and braces: whatever way zod got in (a package that depends on it), the build stops.
  const zodInputs = Object.keys(result.metafile.inputs).filter((input) =>
    /node_modules\/(zod|@hono\/zod-openapi)\/|shared\/schemas\//.test(input),
  );
  if (zodInputs.length) throw new Error(`the dashboard's script would carry zod or shared/schemas: ${zodInputs.slice(0, 5).join(", ")}`);
  const js = result.outputFiles.find((file) => file.path.endsWith(".js"))?.text ?? "";
  const css = result.outputFiles.find((file) => file.path.endsWith(".css"))?.text ?? "";
  const version = createHash("sha256").update(js).update(css).digest("hex").slice(0, 16);
  const scriptBytesByOrigin: Record<string, number> = {};
  for (const output of Object.values(result.metafile.outputs))
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
      const origin = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input)?.[1] ?? (/^(edge\/ui|shared)\//.exec(input)?.[1] || input);
      scriptBytesByOrigin[origin] = (scriptBytesByOrigin[origin] ?? 0) + bytesInOutput;
    }
  const inputs = Object.keys(result.metafile.inputs)
    .filter((input) => !input.includes(":"))
    .map((input) => resolve(REPO_ROOT, input));
  return { build: { js, css, version }, scriptBytesByOrigin, inputs };
}

/** `import dashboard from "ui-build:dashboard"` in the Worker embeds that build (edge/routes/ui.ts). */
export const DASHBOARD_MODULE = "ui-build:dashboard";

/** The build as the ES module that the `ui-build:dashboard` import resolves to; `onInputs` hears the files it read. */
export async function dashboardModuleSource(onInputs?: (inputs: string[]) => void): Promise<string> {
  const { build, inputs } = await bundleDashboard();
  onInputs?.(inputs);
  return `export default ${JSON.stringify(build)};`;
}
