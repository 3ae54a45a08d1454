import { spawn } from "node:child_process";
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { endWhenDone } from "../helpers/cleanup";
import { freePort } from "../helpers/ports";
import { processTree } from "../helpers/process-tree";

// `npm start` builds the host and the Worker once and keeps the build under .build/local by the
// content of what went into it (edge/local/build-cache.mjs). These tests run it in a copy of the
// checkout elsewhere, whose sources they change.

/** A checkout of this repository's sources in a temp folder, with its node_modules linked. */
function copyCheckout(): string {
  const root = mkdtempSync(join(tmpdir(), "build-cache-checkout-"));
  for (const entry of ["edge", "shared", "runner", "package.json", "package-lock.json", "tsconfig.json"])
    cpSync(entry, join(root, entry), { recursive: true });
  symlinkSync(realpathSync("node_modules"), join(root, "node_modules"));
  return root;
}

const checkout = copyCheckout();
afterAll(() => rmSync(checkout, { recursive: true, force: true }));

interface Run {
  /** Every line the service logged (JSON), with the processes below `npm start` once it was up. */
  messages: string[];
  banner: string;
  processes: string[];
  description: string;
  exitCode: number | null;
}

/** `npm start` in the copy until it is up; reads its log, processes and API description; stops it with SIGTERM. */
async function npmStart(): Promise<Run> {
  const dataDir = mkdtempSync(join(tmpdir(), "build-cache-data-"));
  const port = await freePort();
  const child = endWhenDone(
    spawn("npm", ["start", "--silent"], {
      cwd: checkout,
      env: {
        ...process.env,
        SERVICE_HOST: "127.0.0.1",
        SERVICE_PORT: String(port),
        SERVICE_DATA_DIR: dataDir,
        SERVICE_LOG_FORMAT: "json",
        SERVICE_LOCAL_RUNNER: "0",
      },
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const exited = new Promise<number | null>((done) => child.once("exit", done));
  await expect.poll(() => stderr, { timeout: 90_000, interval: 200 }).toMatch(/is up on/);
  const processes = processTree(child.pid!).map((p) => p.command);
  const openapi = (await (await fetch(`http://127.0.0.1:${port}/openapi.json`)).json()) as { info: { description: string } };
  child.kill("SIGTERM");
  const exitCode = await exited;
  rmSync(dataDir, { recursive: true, force: true });
  return {
    messages: stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => (JSON.parse(line) as { message: string }).message),
    banner: stderr,
    processes,
    description: openapi.info.description,
    exitCode,
  };
}

describe("npm start's build cache", () => {
  it("builds once, reuses the build while the sources' content is unchanged, and builds again when a source changes", async () => {
    rmSync(join(checkout, ".build"), { recursive: true, force: true });
    const first = await npmStart();
    expect(first.exitCode).toBe(0);
    expect(first.messages).toContainEqual(
      expect.stringMatching(/^bundle built in \d+ ms from \d+ source files \(\.build\/local\/[0-9a-f]{16}\)$/),
    );
    // The build ran in a child that has ended: no esbuild service and no TypeScript loader below npm start.
    expect(first.processes.filter((command) => /esbuild|tsx/.test(command))).toEqual([]);
    expect(first.processes).toContainEqual(expect.stringMatching(/workerd serve/));
    expect(first.banner).toContain("Training service is up on");

    // A new time stamp on a source, its content the same, and what a user leaves in the checkout
    // (the default data directory, a cookie jar): still the same build.
    const overview = join(checkout, "edge/routes/api-docs/overview.md");
    const later = new Date(Date.now() + 60_000);
    utimesSync(overview, later, later);
    mkdirSync(join(checkout, ".data"));
    writeFileSync(join(checkout, "cookies.txt"), "");
    const second = await npmStart();
    expect(second.messages).toContainEqual(
      expect.stringMatching(/^bundle cached: \d+ source files unchanged since \.build\/local\/[0-9a-f]{16} was built/),
    );
    expect(second.messages.filter((m) => m.startsWith("bundle built"))).toEqual([]);
    expect(second.processes.filter((command) => /esbuild|tsx/.test(command))).toEqual([]);
    expect(second.description).toBe(first.description);

    // A change to the Worker's sources (the API document's prose) and one to the host's (its banner): both served.
    appendFileSync(overview, "\nChanged for the build cache's test.\n");
    const host = join(checkout, "edge/local/host.ts");
    writeFileSync(host, readFileSync(host, "utf8").replace("Training service is up on", "Training service (changed) is up on"));
    const third = await npmStart();
    expect(third.messages).toContainEqual(expect.stringMatching(/^bundle built in /));
    expect(third.description).toContain("Changed for the build cache's test.");
    expect(third.banner).toContain("Training service (changed) is up on");
    expect(third.processes.filter((command) => /esbuild|tsx/.test(command))).toEqual([]);

    const fourth = await npmStart();
    expect(fourth.messages).toContainEqual(expect.stringMatching(/^bundle cached: /));
    expect(fourth.description).toContain("Changed for the build cache's test.");
  }, 300_000);

  it("stops with the build's error and exit 1 when a source does not compile, and builds again once it does", async () => {
    const file = join(checkout, "edge/routes/health.ts");
    const source = readFileSync(file, "utf8");
    const current = join(checkout, ".build/local/current.json");
    const lastBuild = existsSync(current) ? readFileSync(current, "utf8") : null;
    writeFileSync(file, source + "\nexport const broken = ;\n");
    const child = spawn("npm", ["start", "--silent"], {
      cwd: checkout,
      env: {
        ...process.env,
        SERVICE_HOST: "127.0.0.1",
        SERVICE_PORT: "0",
        SERVICE_DATA_DIR: mkdtempSync(join(tmpdir(), "build-cache-data-")),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    endWhenDone(child);
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    expect(await new Promise((done) => child.once("exit", done))).toBe(1);
    expect(stderr).toMatch(/^error: the build failed: /);
    expect(stderr).toContain("edge/routes/health.ts");
    // The last good build stays the one in use.
    expect(existsSync(current) ? readFileSync(current, "utf8") : null).toBe(lastBuild);

    writeFileSync(file, source);
    const fixed = await npmStart();
    expect(fixed.exitCode).toBe(0);
    expect(fixed.messages).toContainEqual(expect.stringMatching(/^(bundle built|bundle cached)/));
  }, 300_000);
});
