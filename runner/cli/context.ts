import type { Command } from "commander";
import { ServiceClient } from "../../shared/client/client";
import { isLoopbackHost } from "../../shared/ip";
import { configPath, readConfig } from "./config-file";
import { Output, UsageError, type Format } from "./output";
import { version } from "../../package.json";

/** The options every command takes (declared on the program, accepted after the command too). */
export interface GlobalOptions {
  url?: string;
  apiKey?: string;
  format: Format;
}

/** Where the service is and the key to use, and where each came from (for `jobs whoami`). */
export interface Connection {
  url: string;
  apiKey: string | null;
  source: { url: "flag" | "env" | "config"; apiKey: "flag" | "env" | "config" | null };
  configFile: string;
}

/** The output of the command being run, with its --format. */
export function outputOf(command: Command): Output {
  return new Output((command.optsWithGlobals() as GlobalOptions).format ?? "table");
}

/**
 * Resolves the service URL and API key: --url / --api-key, then SERVICE_URL / SERVICE_API_KEY,
 * then the config file `jobs login` wrote. A missing URL (or key, when `needsKey`) is a usage
 * error that says how to give one.
 */
export function connectionOf(command: Command, needsKey = true, env: NodeJS.ProcessEnv = process.env): Connection {
  const options = command.optsWithGlobals() as GlobalOptions;
  const configFile = configPath(env);
  const stored = readConfig(configFile);
  const pick = <T>(flag: T | undefined, fromEnv: T | undefined, fromConfig: T | undefined) =>
    flag
      ? { value: flag, from: "flag" as const }
      : fromEnv
        ? { value: fromEnv, from: "env" as const }
        : fromConfig
          ? { value: fromConfig, from: "config" as const }
          : null;
  const url = pick(options.url, env.SERVICE_URL, stored.url);
  const apiKey = pick(options.apiKey, env.SERVICE_API_KEY, stored.api_key);
  if (!url) throw new UsageError("no service URL: pass --url, set SERVICE_URL, or run `jobs login`");
  checkServiceUrl(url.value);
  if (needsKey && !apiKey) throw new UsageError("no API key: pass --api-key, set SERVICE_API_KEY, or run `jobs login`");
  return { url: url.value, apiKey: apiKey?.value ?? null, source: { url: url.from, apiKey: apiKey?.from ?? null }, configFile };
}

/**
 * Refuses (a usage error saying why) a service URL that a password or API key must not be sent
 * to: anything but https://, except http:// to this machine (localhost, 127.x, [::1]), where
 * nothing crosses a network.
 *
 * @example
 * checkServiceUrl("http://train.example.com"); // throws: plain http:// to another machine
 */
export function checkServiceUrl(url: string): void {
  let parsed: URL | null = null;
  try {
    parsed = /^https?:\/\/[^/]/.test(url) ? new URL(url) : null;
  } catch {
    // reported below
  }
  if (!parsed) throw new UsageError(`the service URL must start with http:// or https://, not ${JSON.stringify(url)}`);
  if (parsed.protocol === "http:" && !isLoopbackHost(parsed.hostname))
    throw new UsageError(
      `the service URL ${url} is plain http:// to another machine: your password and API key would cross the network unencrypted. Use https:// (http:// is only for this machine: localhost, 127.0.0.1, [::1])`,
    );
}

/** A client for the resolved connection. */
export function clientOf(connection: Pick<Connection, "url" | "apiKey">): ServiceClient {
  return new ServiceClient({
    baseUrl: connection.url,
    ...(connection.apiKey ? { apiKey: connection.apiKey } : {}),
    headers: { "user-agent": `jobs-cli/${version}` },
  });
}

/**
 * The output, connection and client of a command, in one call at the top of its action. `csv`:
 * the command prints CSV with --format csv (else that is a usage error).
 *
 * @example
 * const { out, client } = cli(command);
 */
export function cli(command: Command, needsKey = true, csv = false): { out: Output; connection: Connection; client: ServiceClient } {
  const out = outputOf(command);
  if (out.format === "csv" && !csv) throw new UsageError(`jobs ${command.name()} prints a table or json; --format csv is for jobs cost`);
  const connection = connectionOf(command, needsKey);
  return { out, connection, client: clientOf(connection) };
}
