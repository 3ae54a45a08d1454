import { LOG_LEVELS, type LogLevel } from "../config";
import { readRateLimitSettings } from "../ratelimit/settings";
import { StartupError, type StackOptions } from "./stack";
import { readRunnerConfigFile, RunnerConfigError } from "../../runner/config";

/** Environment variables handed to the Worker as they are (the Worker validates them). */
export const WORKER_VARIABLES = [
  "RATE_LIMIT_CALLS",
  "RATE_LIMIT_PERIOD",
  "RATE_LIMIT_LOOPBACK",
  "TRUSTED_PROXIES",
  "METRICS_SCRAPE_TOKEN",
  "SETUP_TOKEN",
] as const;

/**
 * The local default's settings, from the environment (README "Configuration"). Invalid values
 * stop start-up with a one-line message naming the variable.
 */
export function readConfigFromEnvironment(env: NodeJS.ProcessEnv): StackOptions & { host: string; port: number } {
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
  const runner = (env.SERVICE_LOCAL_RUNNER ?? "1").toLowerCase();
  if (!["1", "0", "true", "false", "yes", "no"].includes(runner))
    throw new StartupError(`SERVICE_LOCAL_RUNNER must be 1 or 0, not "${env.SERVICE_LOCAL_RUNNER}"`);
  const bindings: Record<string, string> = {};
  for (const name of WORKER_VARIABLES) if (env[name] !== undefined) bindings[name] = env[name]!;
  // The Worker would answer every request with a 500 naming it; better not to start at all.
  try {
    readRateLimitSettings(bindings, "development");
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
    host: env.SERVICE_HOST || "0.0.0.0",
    port,
    dataDir: env.SERVICE_DATA_DIR || ".data",
    logLevel: logLevel as LogLevel,
    logFormat,
    logFile: env.SERVICE_LOG_FILE || undefined,
    publicUrl: env.SERVICE_PUBLIC_URL || undefined,
  };
}
