import { accessSync, constants, statSync } from "node:fs";
import { readOutboundVariables } from "../cloud/outbound";
import { LOG_LEVELS, type LogLevel } from "../config";
import { readRateLimitSettings } from "../ratelimit/rate-limit-variables";
import { MAX_CA_BUNDLE_BYTES, type OutboundDefaults } from "./provider-outbound";
import { StartupError, type StackOptions } from "./stack";
import { readRunnerConfigFile, RunnerConfigError } from "../../runner/agent/config";

/** Environment variables handed to the Worker as they are (the Worker validates them). */
export const WORKER_VARIABLES = [
  "RATE_LIMIT_CALLS",
  "RATE_LIMIT_PERIOD",
  "RATE_LIMIT_LOOPBACK",
  "TRUSTED_PROXIES",
  "METRICS_SCRAPE_TOKEN",
  "SETUP_TOKEN",
  "SERVICE_HTTP_TIMEOUT",
  "CIRCUIT_BREAKER_RESET_SECONDS",
  "LIVE_KEEPALIVE_SECONDS",
  "LIVE_STREAMS_PER_USER",
  "SCHEDULER_PASS_SECONDS",
  "VAULT_ADDR",
  "VAULT_TOKEN",
  "VAULT_SECRET_PATH",
] as const;

function readableFile(variable: string, path: string): void {
  try {
    accessSync(path, constants.R_OK);
  } catch (error) {
    throw new StartupError(`${variable} names ${path}, which cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
}

function proxyUrl(variable: string, value: string | undefined): string | null {
  if (!value) return null;
  let url: URL | null = null;
  try {
    url = new URL(value);
  } catch {}
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:"))
    throw new StartupError(`${variable} must be an http(s) URL of a proxy, not "${value.replace(/\/\/[^@/]*@/, "//***@")}"`);
  return value;
}

/**
 * The host's defaults for provider calls (README "Configuration"): HTTPS_PROXY and HTTP_PROXY
 * (or their lower-case forms), NO_PROXY, SERVICE_CA_BUNDLE (checked readable) and
 * SERVICE_SSL_VERIFY. A bad value is a StartupError naming the variable.
 *
 * @example
 * readOutboundDefaults({ HTTPS_PROXY: "http://proxy.internal:3128", NO_PROXY: "localhost" });
 */
export function readOutboundDefaults(env: NodeJS.ProcessEnv): OutboundDefaults {
  const verify = (env.SERVICE_SSL_VERIFY ?? "true").trim().toLowerCase();
  if (!["1", "0", "true", "false", "yes", "no"].includes(verify))
    throw new StartupError(`SERVICE_SSL_VERIFY must be true or false, not "${env.SERVICE_SSL_VERIFY}"`);
  const caBundle = env.SERVICE_CA_BUNDLE || null;
  if (caBundle) {
    readableFile("SERVICE_CA_BUNDLE", caBundle);
    let info: ReturnType<typeof statSync>;
    try {
      info = statSync(caBundle);
    } catch (error) {
      throw new StartupError(
        `SERVICE_CA_BUNDLE names ${caBundle}, which cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
      );
    }
    if (!info.isFile()) throw new StartupError(`SERVICE_CA_BUNDLE names ${caBundle}, which is not a regular file`);
    if (info.size > MAX_CA_BUNDLE_BYTES)
      throw new StartupError(
        `SERVICE_CA_BUNDLE names ${caBundle}, of ${info.size} bytes: a CA bundle may hold at most ${MAX_CA_BUNDLE_BYTES}`,
      );
  }
  return {
    httpsProxy: proxyUrl("HTTPS_PROXY", env.HTTPS_PROXY || env.https_proxy),
    httpProxy: proxyUrl("HTTP_PROXY", env.HTTP_PROXY || env.http_proxy),
    noProxy: (env.NO_PROXY ?? env.no_proxy ?? "")
      .split(",")
      .map((entry) => entry.trim())
      .filter(Boolean),
    caBundle,
    sslVerify: ["1", "true", "yes"].includes(verify),
  };
}

/**
 * SERVICE_SSL_CERT and SERVICE_SSL_KEY (README "Configuration"): both PEM files, and the client front serves
 * HTTPS; neither, and it serves HTTP; one alone is a mistake.
 */
export function readTlsFiles(env: NodeJS.ProcessEnv): { certFile: string; keyFile: string } | undefined {
  const certFile = env.SERVICE_SSL_CERT || undefined;
  const keyFile = env.SERVICE_SSL_KEY || undefined;
  if (!certFile && !keyFile) return undefined;
  if (!certFile || !keyFile)
    throw new StartupError(
      `${certFile ? "SERVICE_SSL_CERT" : "SERVICE_SSL_KEY"} is set but ${certFile ? "SERVICE_SSL_KEY" : "SERVICE_SSL_CERT"} is not: set both (PEM files) to serve HTTPS, or neither`,
    );
  return { certFile, keyFile };
}

/**
 * The local default's settings, from the environment (README "Configuration"). Invalid values
 * stop start-up with a one-line message naming the variable.
 */
export function readConfigFromEnvironment(env: NodeJS.ProcessEnv): Omit<StackOptions, "workerScript"> & { host: string; port: number } {
  const port = Number(env.SERVICE_PORT ?? 8001);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new StartupError(`SERVICE_PORT must be a port number from 0 to 65535, not "${env.SERVICE_PORT}"`);
  const logLevel = (env.SERVICE_LOG_LEVEL ?? "INFO").toUpperCase();
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel))
    throw new StartupError(`SERVICE_LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, not "${env.SERVICE_LOG_LEVEL}"`);
  const logFormat = (env.SERVICE_LOG_FORMAT ?? "text").toLowerCase();
  if (logFormat !== "json" && logFormat !== "text")
    throw new StartupError(`SERVICE_LOG_FORMAT must be json or text, not "${env.SERVICE_LOG_FORMAT}"`);
  if (env.SERVICE_PUBLIC_URL && !/^https?:\/\//.test(env.SERVICE_PUBLIC_URL))
    throw new StartupError(`SERVICE_PUBLIC_URL must be an http(s) URL, not "${env.SERVICE_PUBLIC_URL}"`);
  const allowedHosts = (env.SERVICE_ALLOWED_HOSTS ?? "")
    .split(",")
    .map((h) => h.trim())
    .filter(Boolean);
  for (const name of allowedHosts)
    if (!/^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(name))
      throw new StartupError(`SERVICE_ALLOWED_HOSTS must be host names separated by commas, not "${env.SERVICE_ALLOWED_HOSTS}"`);
  const runner = (env.SERVICE_LOCAL_RUNNER ?? "1").toLowerCase();
  if (!["1", "0", "true", "false", "yes", "no"].includes(runner))
    throw new StartupError(`SERVICE_LOCAL_RUNNER must be 1 or 0, not "${env.SERVICE_LOCAL_RUNNER}"`);
  const bindings: Record<string, string> = {};
  for (const name of WORKER_VARIABLES) if (env[name] !== undefined) bindings[name] = env[name]!;
  // The Worker would answer every request with a 500 naming it; better not to start at all.
  try {
    readRateLimitSettings(bindings, "development");
    readOutboundVariables(bindings);
  } catch (error) {
    throw new StartupError((error as Error).message);
  }
  const localRunner = ["1", "true", "yes"].includes(runner);
  // The local runner's config file is checked now: a mistake in it stops start-up with its one line.
  if (localRunner && env.RUNNER_CONFIG) {
    try {
      readRunnerConfigFile(env.RUNNER_CONFIG);
    } catch (error) {
      throw new StartupError(error instanceof RunnerConfigError ? error.message : String(error));
    }
  }
  return {
    bindings,
    localRunner,
    runnerConfig: env.RUNNER_CONFIG || undefined,
    runnerEnv: env,
    outboundDefaults: readOutboundDefaults(env),
    secretsEnv: env,
    tls: readTlsFiles(env),
    host: env.SERVICE_HOST || "0.0.0.0",
    port,
    dataDir: env.SERVICE_DATA_DIR || ".data",
    logLevel: logLevel as LogLevel,
    logFormat,
    logFile: env.SERVICE_LOG_FILE || undefined,
    publicUrl: env.SERVICE_PUBLIC_URL || undefined,
    allowedHosts,
  };
}
