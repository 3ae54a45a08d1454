// `npm start`'s service: the whole service on this machine, configured by environment variables.
// edge/local/start.mjs builds this file (and the Worker) once per content and runs the build.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { LocalBuild } from "./build-cache.mjs";
import { readConfigFromEnvironment } from "./host-environment";
import { takeSignals } from "./signals";
import { StartupError, startStack } from "./stack";

/**
 * Starts the service as `npm start` does, from this process's environment and arguments, with
 * the Worker bundle `workerScript` of `build`, and stops it on SIGINT or SIGTERM. A start-up
 * failure is printed as one line and exits 1.
 *
 * @example
 * const build = localBuild(root);
 * await runLocalService(readFileSync(join(build.dir, "worker.js"), "utf8"), build);
 */
export async function runLocalService(workerScript: string, build: LocalBuild): Promise<void> {
  await main(workerScript, build).catch((error: unknown) => {
    if (error instanceof StartupError) {
      process.stderr.write(`error: ${error.message}\n`);
    } else {
      process.stderr.write(`error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    }
    process.exit(1);
  });
}

/** The log line saying whether this start built or reused the build (test/local/build-cache.test.ts reads it). */
export function describeBuild(build: LocalBuild): string {
  const where = `.build/local/${build.digest.slice(0, 16)}`;
  return build.cached
    ? `bundle cached: ${build.inputs} source files unchanged since ${where} was built (checked in ${build.ms} ms)`
    : `bundle built in ${build.ms} ms from ${build.inputs} source files (${where})`;
}

async function main(workerScript: string, build: LocalBuild): Promise<void> {
  const settings = readConfigFromEnvironment(process.env);
  const args = process.argv.slice(2);
  if (args.length) {
    if (args[0] !== "--env" || !args[1] || args.length > 2)
      throw new StartupError(
        `unknown arguments ${JSON.stringify(args.join(" "))}; the only one is --env <environment name> (validate it and start training it once up)`,
      );
    settings.startEnvironment = args[1];
  }
  const stack = await startStack({ ...settings, workerScript });
  stack.log.info(describeBuild(build));
  const local = new URL(stack.url);
  if (settings.host === "0.0.0.0" || settings.host === "::") local.hostname = "localhost";
  const base = local.origin;
  const scheme = settings.tls ? "https" : "http";
  // Asked over loopback HTTP: a certificate made for the public name would not verify here.
  const setup = (await (await fetch(new URL("/api/cloud/auth/setup/status", stack.loopbackUrl))).json()) as { needs_setup: boolean };
  const lines = [
    ``,
    `Training service is up on ${scheme}://${settings.host}:${stack.url.port}  (data: ${stack.dataDir})`,
    ...(settings.tls ? [`  HTTPS with the certificate in ${settings.tls.certFile}`] : []),
    `  Dashboard: ${base}/   API docs: ${base}/docs   health: ${base}/api/cloud/health`,
    setup.needs_setup
      ? `  Next: open ${base}/ in a browser to create the first admin, or:\n    curl -c cookies.txt -H 'Content-Type: application/json' -d '{"email":"you@example.com","username":"admin","password":"choose-a-long-one"}' ${base}/api/cloud/auth/setup/first-admin\n` +
        (settings.bindings?.SETUP_TOKEN
          ? `  From another machine, give the SETUP_TOKEN you set (the form's Setup token, or "setup_token")`
          : `  From another machine, give the setup token ${stack.setupToken} (the form's Setup token, or "setup_token"; one-time, new at each start; SETUP_TOKEN sets your own)`)
      : `  Next: log in at ${base}/, or:  curl -c cookies.txt -H 'Content-Type: application/json' -d '{"username":"…","password":"…"}' ${base}/api/cloud/auth/login`,
    `  Stop with Ctrl-C; everything is kept in the data directory.`,
    ``,
  ];
  process.stderr.write(lines.join("\n") + "\n");

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    stack.log.info(`received ${signal}, stopping`);
    await stack.stop();
    process.exit(0);
  };
  // Miniflare's own handlers kill workerd and exit at once (130/143), before the database is
  // closed; this process owns its signals, so it replaces them with an orderly stop and exit 0.
  takeSignals(["SIGINT", "SIGTERM"], (signal) => void stop(signal));
  collectStartupGarbage();
}

/**
 * Start-up leaves about 60 MB of ArrayBuffers that nothing references any more (measured with
 * process.memoryUsage(); Miniflare's serialised workerd configuration among them), and an idle
 * service may never reach V8's next full collection: they stayed resident. One collection now
 * (V8's own `gc`, which the --expose-gc flag makes callable) returns them.
 */
function collectStartupGarbage(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}
