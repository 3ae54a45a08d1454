import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { gzipSync } from "node:zlib";
import { defineConfig, type Plugin } from "vitest/config";
import { DASHBOARD_MODULE, dashboardModuleSource } from "./edge/local/ui-build";

const require = createRequire(import.meta.url);

// The same `gzip-asset:` imports the Worker bundler embeds (edge/local/bundle.ts), for tests that
// import the app directly (the route inventory in test/api/openapi.test.ts).
const embedAssets: Plugin = {
  name: "embed-gzip-assets",
  resolveId: (id) => (id.startsWith("gzip-asset:") ? "\0" + id : null),
  load: (id) =>
    id.startsWith("\0gzip-asset:")
      ? `export default ${JSON.stringify(gzipSync(readFileSync(require.resolve(id.slice("\0gzip-asset:".length)))).toString("base64"))};`
      : null,
};

// The API document's prose (edge/routes/api-docs/*.md) as text, as the Worker bundler's `.md` loader embeds it.
const embedMarkdown: Plugin = {
  name: "embed-markdown",
  transform: (code, id) => (id.endsWith(".md") ? { code: `export default ${JSON.stringify(code)};`, map: null } : null),
};

// The dashboard, built as the Worker bundler builds it (edge/local/bundle.ts).
const embedDashboard: Plugin = {
  name: "embed-dashboard",
  resolveId: (id) => (id === DASHBOARD_MODULE ? "\0" + id : null),
  load: (id) => (id === "\0" + DASHBOARD_MODULE ? dashboardModuleSource() : null),
};

export default defineConfig({
  plugins: [embedAssets, embedMarkdown, embedDashboard],
  test: {
    include: ["test/**/*.test.ts"],
    // Bundles the Worker once for every stack the run starts (test/helpers/stack.ts).
    globalSetup: ["test/helpers/global-setup.ts"],
    // Stops whatever a file's tests started and did not stop (test/helpers/cleanup.ts).
    setupFiles: ["test/helpers/setup.ts"],
    pool: "forks",
    // The files of a worker share its imported modules (miniflare, the edge and the runner are
    // imported once per worker, not once per file: seconds a file on 2 cores). A file's own
    // state is still its own, and what it started is stopped at its end (test/helpers/setup.ts).
    isolate: false,
    // Each integration file starts its own stack (workerd + libSQL), which spends much of its time
    // waiting on trainers, timers and sockets: three files at a time keep 2 cores busy (measured on
    // 2 cores: 5 min 28 s with two workers, 4 min 21 s with three, every test passing both ways).
    maxWorkers: 3,
    // A test's own work (stacks, runners, CLI processes) scales with the machine: on a slower 2-core
    // machine the suite took 924 s where it had taken 350 s, and single tests under the old 30 s
    // default took 18 to 28 s (one, nine runner starts in turn, passed it).
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // expect.poll's own default is 1 s: a dashboard upload or page that a loaded machine takes
    // longer over failed a poll (four UI tests in one run with the queue tests beside them). A
    // poll that passes returns as soon as it does; this only bounds one that never would.
    expect: { poll: { timeout: 10_000 } },
  },
});
