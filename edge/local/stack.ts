import { appendFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { createSecureContext } from "node:tls";
import type { Readable } from "node:stream";
import { createRequire } from "node:module";
import { createClient } from "@libsql/client/web";
import type { LogLevel } from "../config";
import { applyMigrations } from "../db/migrate";
import { DURABLE_OBJECTS } from "../durable-objects";
import { createLogger, type Logger } from "../log";
import { startClientFront, type AnswerHeaders, type ClientFront } from "./client-front";
import { rateRuleFor, uncountedRateLimitHeaders } from "../../shared/rate-rules";
import { readRateLimitSettings, type RateLimitSettings } from "../ratelimit/rate-limit-variables";
import { randomBytes } from "node:crypto";
import { createHranaServer, serveHranaOverHttp } from "./hrana";
import { startLocalRunner } from "./local-runner";
import { startEnvironmentAtBoot } from "./start-environment";
import { deliverGuarded, outboundAnswer } from "./webhook-outbound";
import { forwardProviderRequest, NO_OUTBOUND_DEFAULTS, type OutboundDefaults } from "./provider-outbound";
import { answerSecretRequest } from "./secret-host";
import type { SubmitOutcome } from "../jobs/job";
import { HOST_STARTUP_PASS_PATH, HOST_TOKEN_HEADER } from "../host-call";
import { request as undiciRequest } from "undici";
import type { Runner } from "../../runner/agent/agent";

// Required, not imported: Miniflare is one CommonJS file of 3.8 MB, and importing it from an ES
// module first scans all of it for its export names (Node's cjs-module-lexer), 0.3 s of each start.
const { Miniflare, Response: MiniflareResponse } = createRequire(import.meta.url)("miniflare") as typeof import("miniflare");

/** The Worker's compatibility date: at most the bundled workerd's. */
export const COMPATIBILITY_DATE = "2026-04-26";

/** A start-up failure the user can fix; printed as one line, without a stack trace. */
export class StartupError extends Error {}

export interface StackOptions {
  dataDir: string;
  host?: string;
  port?: number;
  logLevel?: LogLevel;
  logFormat?: "json" | "text";
  /** Every log line (host and Worker) is appended here too. */
  logFile?: string;
  publicUrl?: string;
  /** Where log lines go; stdout by default. */
  output?: (line: string) => void;
  /** Start this machine's runner as the local GPU box (npm start: yes; tests: only when asked). */
  localRunner?: boolean;
  /** The local runner's config file (RUNNER_CONFIG) and the environment its settings read (runner/agent/config.ts). */
  runnerConfig?: string;
  runnerEnv?: Record<string, string | undefined>;
  /** `npm start -- --env <name>`: validate that environment and start training it once up. */
  startEnvironment?: string;
  /** More Worker variables (rate limiting, metrics, trusted proxies: README "Configuration"). */
  bindings?: Record<string, string>;
  /** The host's proxy, CA and verification defaults for provider calls (npm start: from its environment; default none). */
  outboundDefaults?: OutboundDefaults;
  /** Where the host looks secrets up (variables, `<NAME>_FILE`, SERVICE_SECRETS_DIR); default this process's environment. */
  secretsEnv?: Record<string, string | undefined>;
  /** SERVICE_SSL_CERT and SERVICE_SSL_KEY: PEM files; the client front then serves HTTPS. */
  tls?: { certFile: string; keyFile: string };
  /** How long a write that meets another process's lock on the database is tried again before it is answered 503 database_busy (default 5 s). */
  databaseBusyWaitMs?: number;
  /** The bundled Worker's source (edge/local/bundle.ts): `npm start`'s cached build (edge/local/start.mjs), or the test run's (test/helpers/global-setup.ts). */
  workerScript: string;
  /** SERVICE_ALLOWED_HOSTS: more host names the front answers to (besides IP addresses, localhost, this machine's name, the bind address and the public URL's). */
  allowedHosts?: string[];
  /**
   * Tests only (npm start never sets it): workerd's V8 inspector on a free loopback port
   * (`Stack.inspectorUrl`), for a test that looks into the Worker's heap. Whoever reaches it
   * runs code in the Worker.
   */
  inspector?: boolean;
}

/**
 * The host names the front answers to besides IP addresses and localhost (client-front.ts
 * ownHost): this machine's name (and `<name>.local`), the address it binds, the public URL's host
 * and SERVICE_ALLOWED_HOSTS. Another name is a rebinding page's, answered 421.
 */
export function ownHostNames(bind: string, publicUrl: string | undefined, allowed: string[]): string[] {
  const machine = hostname().toLowerCase();
  const names = [machine, `${machine}.local`, bind, ...allowed];
  if (publicUrl) names.push(new URL(publicUrl).hostname.replace(/^\[|\]$/g, ""));
  return [...new Set(names.filter(Boolean).map((n) => n.toLowerCase()))];
}

export interface Stack {
  /** The client front's URL: https:// when started with `tls`. */
  url: URL;
  /** Plain HTTP on loopback, for this process's own calls and its runner (the certificate may name another host): `url` itself without `tls`. */
  loopbackUrl: URL;
  /** workerd's private address, which takes only the front's requests (for the tests that try it). */
  workerUrl: URL;
  dataDir: string;
  /** The first admin's setup token: SETUP_TOKEN when given, else random per start ("" when set empty). */
  setupToken: string;
  log: Logger;
  /** workerd's inspector (ws:// targets listed at its /json), when started with `inspector`. */
  inspectorUrl?: URL;
  stop(): Promise<void>;
}

function ensureWritable(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
    const probe = join(dir, `.write-test-${process.pid}`);
    writeFileSync(probe, "");
    rmSync(probe);
  } catch (error) {
    throw new StartupError(
      `data directory ${dir} is not writable (${(error as NodeJS.ErrnoException).code ?? String(error)}); set SERVICE_DATA_DIR to a writable directory`,
    );
  }
}

// workerd's own bind error is a multi-line dump; checking first gives the user one clear line.
async function ensurePortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((done, fail) => {
    const server = createServer();
    server.once("error", (error: NodeJS.ErrnoException) =>
      fail(
        new StartupError(
          error.code === "EADDRINUSE"
            ? `port ${port} on ${host} is already in use; stop the other process or set SERVICE_PORT`
            : `cannot listen on ${host}:${port} (${error.code ?? error.message})`,
        ),
      ),
    );
    server.listen(port, host, () => server.close(() => done()));
  });
}

function forwardLines(stream: Readable, write: (line: string) => void): void {
  createInterface({ input: stream, crlfDelay: Infinity }).on("line", (line) => line && write(line));
}

/**
 * Starts the local default: migrates the libSQL file under `dataDir`, serves it over Hrana to
 * the Worker as a service binding, and runs the bundled Worker in workerd with DOs and R2
 * persisted under `dataDir`. Tests use it with port 0.
 *
 * @example
 * const stack = await startStack({ dataDir: ".data", port: 8001, workerScript: await bundleWorker() });
 * await fetch(new URL("/api/cloud/health", stack.url));
 * await stack.stop();
 */
export async function startStack(options: StackOptions): Promise<Stack> {
  const dataDir = resolve(options.dataDir);
  const host = options.host ?? "0.0.0.0";
  const port = options.port ?? 8001;
  const logLevel = options.logLevel ?? "INFO";
  const logFormat = options.logFormat ?? "json";
  const output = options.output ?? ((line: string) => process.stdout.write(line + "\n"));
  const emit = (line: string) => {
    output(line);
    if (options.logFile) appendFileSync(options.logFile, line + "\n");
  };
  const log = createLogger("edge/local/stack.ts", { logLevel, logFormat }, null, emit);

  ensureWritable(dataDir);
  const tls = options.tls ? readTls(options.tls) : undefined;
  await ensurePortFree(host, port);

  const hrana = createHranaServer(join(dataDir, "service.db"), {
    busyWaitMs: options.databaseBusyWaitMs,
    logger: (message) => log.warning(message),
  });
  let closeBridge = async () => {};
  try {
    // The schema is brought up to date while workerd starts (issue 31: the start waited for the
    // one, then the other): the migrations begin once Miniflare has spawned workerd, which then
    // parses and runs the Worker's bundle in its own process. Until they are done, the bridge
    // holds the Worker's statements (a Durable Object's alarm may fire as workerd starts).
    let runtimeSpawned = () => {};
    const spawned = new Promise<void>((done) => (runtimeSpawned = done));
    const migrator = createClient({ url: "http://libsql.internal", fetch: (request: Request) => hrana.handle(request) });
    const migrated = spawned.then(() =>
      applyMigrations(migrator, { onApply: (m) => log.info(`applying schema migration ${m.version} (${m.name})`) }),
    );
    // Awaited once workerd is ready; this keeps a failure while workerd is still starting from counting as unhandled.
    migrated.catch(() => {});

    // workerd talks to the bridge directly over loopback HTTP (an external service binding):
    // several times faster than a Node-function binding, which Miniflare proxies and re-encodes.
    // The random token keeps other local users off the port.
    const bridgeToken = randomBytes(32).toString("base64url");
    const frontToken = randomBytes(32).toString("base64url");
    const hostToken = randomBytes(32).toString("base64url");
    // Creating the first admin from another machine needs this (edge/auth/setup-token.ts).
    const setupToken = options.bindings?.SETUP_TOKEN ?? randomBytes(24).toString("base64url");
    const bridge = await serveHranaOverHttp(hrana, 0, "127.0.0.1", { authToken: bridgeToken, opensAfter: migrated });
    closeBridge = bridge.close;

    const outboundDefaults = options.outboundDefaults ?? NO_OUTBOUND_DEFAULTS;
    const secretsEnv = options.secretsEnv ?? process.env;
    const mf = new Miniflare({
      // Given as its one module: with `script` and `modules: true` Miniflare parses the whole bundle
      // (acorn, with locations) to find its imports, which took seconds and over 100 MB at each start.
      // The bundle imports only cloudflare:* and node:* modules, which workerd provides.
      modules: [{ type: "ESModule", path: "index.js", contents: options.workerScript }],
      compatibilityDate: COMPATIBILITY_DATE,
      compatibilityFlags: ["nodejs_compat"],
      defaultPersistRoot: join(dataDir, "worker"),
      r2Buckets: ["STORAGE"],
      durableObjects: Object.fromEntries(
        Object.entries(DURABLE_OBJECTS).map(([binding, { className }]) => [binding, { className, useSQLite: true }]),
      ),
      bindings: {
        LIBSQL_URL: "http://libsql.internal",
        LIBSQL_AUTH_TOKEN: bridgeToken,
        SERVICE_ENV: "development",
        SERVICE_LOG_LEVEL: logLevel,
        SERVICE_LOG_FORMAT: logFormat,
        SERVICE_STARTED_AT: new Date().toISOString(),
        SERVICE_FRONT_TOKEN: frontToken,
        SERVICE_HOST_TOKEN: hostToken,
        SETUP_TOKEN: setupToken,
        ...(options.publicUrl ? { SERVICE_PUBLIC_URL: options.publicUrl } : {}),
        ...options.bindings,
      },
      serviceBindings: {
        LIBSQL_BRIDGE: { external: { address: `127.0.0.1:${bridge.port}`, http: {} } },
        // Webhook deliveries resolve and check names here, in Node (webhook-outbound.ts).
        WEBHOOK_OUTBOUND: async (request: { url: string }) => {
          const answer = outboundAnswer(await deliverGuarded(request as unknown as Request));
          return new MiniflareResponse(null, answer);
        },
        // Provider API calls, with the provider's proxy and CA settings (provider-outbound.ts); bodies stream both ways.
        PROVIDER_OUTBOUND: async (request: { url: string }) => {
          const answer = await forwardProviderRequest(request as unknown as Request, outboundDefaults);
          return new MiniflareResponse(answer.body as never, { status: answer.status, headers: [...answer.headers] });
        },
        // One secret by name from this process's environment or files (secret-host.ts); never a listing.
        SECRETS_HOST: async (request: { url: string }) => {
          const answer = await answerSecretRequest(request as unknown as Request, secretsEnv);
          return new MiniflareResponse(await answer.text(), { status: answer.status });
        },
      },
      // Private: clients reach workerd only through the client front, which sets their address.
      host: "127.0.0.1",
      port: 0,
      cf: false,
      ...(options.inspector ? { inspectorPort: 0 } : {}),
      handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
        forwardLines(stdout, emit);
        forwardLines(stderr, emit);
        runtimeSpawned();
      },
    });
    let workerUrl: URL;
    try {
      workerUrl = await mf.ready;
    } catch (error) {
      await mf.dispose().catch(() => {});
      throw new StartupError(`the Worker runtime failed to start: ${(error as Error).message.split("\n")[0]}`);
    }
    try {
      const applied = await migrated;
      if (applied.length) log.info(`database schema now at version ${applied.at(-1)}`);
    } catch (error) {
      await mf.dispose().catch(() => {});
      throw error;
    } finally {
      migrator.close();
    }
    const frontOptions = {
      upstreamPort: Number(workerUrl.port),
      onError: (message: string) => log.warning(message),
      answerHeaders: frontAnswerHeaders(options.bindings ?? {}),
      frontToken,
      hostNames: ownHostNames(host, options.publicUrl, options.allowedHosts ?? []),
    };
    let front: ClientFront;
    try {
      front = await startClientFront({ ...frontOptions, host, port, tls });
    } catch (error) {
      await mf.dispose().catch(() => {});
      throw new StartupError(`cannot listen on ${host}:${port} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
    // With HTTPS, this process and its runner still talk plain HTTP over loopback: the
    // certificate names the public host, and a self-signed one would not verify here.
    let loopbackFront: ClientFront | null = null;
    if (tls) {
      try {
        loopbackFront = await startClientFront({ ...frontOptions, host: "127.0.0.1", port: 0 });
      } catch (error) {
        await front.close();
        await mf.dispose().catch(() => {});
        throw new StartupError(`cannot listen on 127.0.0.1 (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
      }
    }
    const url = new URL(
      `${tls ? "https" : "http"}://${host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host}:${front.port}`,
    );
    const loopbackUrl = loopbackFront ? new URL(`http://127.0.0.1:${loopbackFront.port}`) : url;
    // The queue is processed once at start-up (queued jobs start where capacity exists);
    // this also arms the Scheduler's 5 s alarm. Straight to workerd with this start's host token
    // (edge/host-call.ts), not through Miniflare's binding proxy, which blocks this thread.
    const startup = await undiciRequest(new URL(HOST_STARTUP_PASS_PATH, workerUrl), {
      method: "POST",
      headers: { [HOST_TOKEN_HEADER]: hostToken },
    });
    if (startup.statusCode !== 200) throw new StartupError(`the start-up scheduler pass failed: ${await startup.body.text()}`);
    const passed = (await startup.body.json()) as { started: string[] };
    if (passed.started.length) log.info(`start-up scheduler pass started ${passed.started.length} job(s)`);
    let runner: Runner | null = null;
    if (options.localRunner) {
      const db = createClient({ url: "http://libsql.internal", fetch: (request: Request) => hrana.handle(request) });
      runner = await startLocalRunner(db, {
        url: `http://127.0.0.1:${loopbackUrl.port}`,
        dataDir,
        runnerConfig: options.runnerConfig,
        runnerEnv: options.runnerEnv,
        log: (level, line) => log[level](line),
      });
      db.close();
    }
    if (options.startEnvironment) {
      const db = createClient({ url: "http://libsql.internal", fetch: (request: Request) => hrana.handle(request) });
      const scheduler = await mf.getDurableObjectNamespace("SCHEDULER");
      const stub = scheduler.get(scheduler.idFromName("main"));
      const submit = async (user: unknown, body: unknown) =>
        (await (
          await stub.fetch("http://scheduler/submit", { method: "POST", body: JSON.stringify({ user, body }) })
        ).json()) as SubmitOutcome;
      await startEnvironmentAtBoot(db, submit, options.startEnvironment, (level, line) => log[level](line));
      db.close();
    }
    return {
      url,
      loopbackUrl,
      workerUrl,
      dataDir,
      setupToken,
      log,
      ...(options.inspector ? { inspectorUrl: await mf.getInspectorURL() } : {}),
      async stop() {
        // Said as it happens, so whoever stopped it knows what it waited for.
        const since = Date.now();
        const trainers = runner?.runningJobs() ?? 0;
        if (trainers)
          log.info(`stopping: ending ${trainers} trainer(s) of the local runner (their jobs go back to the queue at the next start)`);
        await runner?.stop();
        const cut = (await front.close()).upgraded + ((await loopbackFront?.close())?.upgraded ?? 0);
        if (cut) log.info(`stopping: closed ${cut} open WebSocket connection(s) (runners' channels, live streams)`);
        await mf.dispose();
        await closeBridge();
        hrana.close();
        log.info(`stopped in ${((Date.now() - since) / 1000).toFixed(1)} s`);
      },
    };
  } catch (error) {
    await closeBridge().catch(() => {});
    hrana.close();
    throw error;
  }
}

/** The certificate and key files, read now: a file that cannot be read is one line naming it. */
function readTls(files: { certFile: string; keyFile: string }): { cert: Buffer; key: Buffer } {
  const read = (variable: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (error) {
      throw new StartupError(`${variable} names ${path}, which cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
  };
  const pair = { cert: read("SERVICE_SSL_CERT", files.certFile), key: read("SERVICE_SSL_KEY", files.keyFile) };
  // Loaded once now, so a wrong pair stops start-up before anything else has started.
  try {
    createSecureContext(pair);
  } catch (error) {
    throw new StartupError(
      `SERVICE_SSL_CERT and SERVICE_SSL_KEY do not load as a PEM certificate and its key (${(error as Error).message})`,
    );
  }
  return pair;
}

/**
 * The rate-limit headers of the answers the client front gives by itself (a malformed request, an
 * unreachable Worker): every response carries them. Such a request is never counted, so
 * they describe the rule that would apply, as the Worker does for uncounted requests; none when
 * limits are off (RATE_LIMIT_CALLS=0) or misconfigured (the Worker then says so itself).
 */
function frontAnswerHeaders(bindings: Record<string, string>): AnswerHeaders {
  let settings: RateLimitSettings;
  try {
    settings = readRateLimitSettings(bindings, "development");
  } catch {
    return () => ({});
  }
  if (!settings.enabled) return () => ({});
  return (method, path) => uncountedRateLimitHeaders(rateRuleFor(method, path, settings.defaultRule), Date.now());
}
