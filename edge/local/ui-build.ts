import { createHash } from "node:crypto";
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";

const UI_ENTRY = fileURLToPath(new URL("../ui/main.tsx", import.meta.url));

/** The dashboard as the Worker serves it: one script, one stylesheet, and a version naming both. */
export interface DashboardBuild {
  js: string;
  css: string;
  version: string;
}

/**
 * zod's classic build re-exports every translation of its error messages as `z.locales` (about
 * 260 KB minified, more than a third of the dashboard's script), and esbuild keeps all of it since
 * `z` is used as a namespace object. The dashboard never sets a locale (zod's English default is
 * imported on its own, from locales/en.js), so its build gets an empty `z.locales`.
 */
const noZodLocales: esbuild.Plugin = {
  name: "no-zod-locales",
  setup(build) {
    build.onResolve({ filter: /\/locales\/index\.js$/ }, (args) =>
      /[\\/]node_modules[\\/]zod[\\/]/.test(args.importer) ? { path: "zod-locales", namespace: "no-zod-locales" } : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: "no-zod-locales" }, () => ({ contents: "export {};", loader: "js" }));
  },
};

/**
 * Builds the dashboard (edge/ui) with esbuild into one minified ES module and one stylesheet
 * (its own CSS and uPlot's). Nothing is fetched at run time: the machines that serve it have no CDN.
 */
export async function buildDashboard(): Promise<DashboardBuild> {
  const result = await esbuild.build({
    entryPoints: { app: UI_ENTRY },
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
    plugins: [noZodLocales],
  });
  const js = result.outputFiles.find((file) => file.path.endsWith(".js"))?.text ?? "";
  const css = result.outputFiles.find((file) => file.path.endsWith(".css"))?.text ?? "";
  const version = createHash("sha256").update(js).update(css).digest("hex").slice(0, 16);
  return { js, css, version };
}

/** `import dashboard from "ui-build:dashboard"` in the Worker embeds that build (edge/routes/ui.ts). */
export const DASHBOARD_MODULE = "ui-build:dashboard";

/** The build as the ES module that the `ui-build:dashboard` import resolves to. */
export async function dashboardModuleSource(): Promise<string> {
  return `export default ${JSON.stringify(await buildDashboard())};`;
}
