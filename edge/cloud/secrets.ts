import type { Env } from "../env";
import { ApiError } from "../errors";

/*
 * Secrets by name, from the first source that has them, in this order (README "Cloud training"):
 * environment variables, file-based secrets, a cloud secrets manager, a vault. Deployed, the
 * environment is the Worker's own bindings (`wrangler secret put`); locally, the host process's
 * environment and secret files follow them (the SECRETS_HOST binding, edge/local/secret-host.ts),
 * so secrets are never copied into the Worker's bindings. A value is never logged, listed or
 * returned by the API: only the caller that asked for it by name gets it.
 */

/** One place secrets come from. `get` answers one secret by name, or null when this source has none. */
export interface SecretSource {
  readonly name: "environment" | "file" | "secrets_manager" | "vault";
  get(secret: string): Promise<string | null>;
}

/** Upper-case letters, digits and `_`, starting with a letter: a name can never be a path (`_FILE`, SERVICE_SECRETS_DIR). */
export const SECRET_NAME = /^[A-Z][A-Z0-9_]{0,127}$/;

/**
 * The service's own credentials: never handed out under another role (a provider token is sent
 * to the provider's api_base_url, which an admin chooses).
 */
export const RESERVED_SECRETS: ReadonlySet<string> = new Set([
  "LIBSQL_AUTH_TOKEN",
  "SETUP_TOKEN",
  "METRICS_SCRAPE_TOKEN",
  "VAULT_TOKEN",
  "RUNNER_TOKEN",
]);

/** A source that could not be read (the vault refused or was unreachable): the secret may be there, so this is not "not found". */
export class SecretSourceError extends Error {
  constructor(
    readonly source: SecretSource["name"],
    message: string,
  ) {
    super(message);
    this.name = "SecretSourceError";
  }
}

/** The reason a name is refused, or null when it may be looked up. */
export function secretNameProblem(name: string): string | null {
  if (!SECRET_NAME.test(name))
    return `a secret's name is upper-case letters, digits and _, starting with a letter (like REPLICATE_API_TOKEN), not ${JSON.stringify(name.slice(0, 140))}`;
  if (RESERVED_SECRETS.has(name)) return `${name} is one of the service's own credentials and is not handed out as a secret`;
  return null;
}

type SecretsManagerFactory = (env: Env) => SecretSource | null;
const secretsManagers: SecretsManagerFactory[] = [];

/**
 * The cloud secrets manager slot (third in order): none ships. A deployment that keeps
 * secrets in one (AWS Secrets Manager, GCP Secret Manager, ...) registers a factory at module
 * load, in the Worker's entry; it gets the Worker's bindings and returns a source named
 * "secrets_manager" (or null where it is not configured). Consulted after the environment and
 * files, before the vault.
 *
 * @example
 * registerSecretsManager((env) => (env.AWS_REGION ? { name: "secrets_manager", get: (n) => readFromAws(env, n) } : null));
 */
export function registerSecretsManager(factory: SecretsManagerFactory): void {
  secretsManagers.push(factory);
}

/** The Worker's own bindings: a string binding of that name (`wrangler secret put`, or [vars]). */
function workerEnvironment(env: Env): SecretSource {
  return {
    name: "environment",
    async get(secret) {
      const value = (env as unknown as Record<string, unknown>)[secret];
      return typeof value === "string" && value !== "" ? value : null;
    },
  };
}

/** The local host's environment or files, through its SECRETS_HOST binding. */
function hostSource(env: Env, name: "environment" | "file"): SecretSource | null {
  const host = env.SECRETS_HOST;
  if (!host) return null;
  return {
    name,
    async get(secret) {
      const response = await host.fetch(new Request(`http://secrets.host/${secret}?source=${name}`));
      if (response.status === 404) return null;
      if (!response.ok) throw new SecretSourceError(name, `the host's secrets answered ${response.status} for ${secret}`);
      return response.text();
    },
  };
}

/** The default KV v2 path of the service's secrets in Vault. */
export const DEFAULT_VAULT_SECRET_PATH = "secret/data/training-service";

/**
 * HashiCorp Vault, KV version 2: one read of VAULT_SECRET_PATH per lookup, the secret at
 * `data.data[NAME]`. Only when VAULT_ADDR and VAULT_TOKEN are set.
 */
function vaultSource(env: Env): SecretSource | null {
  if (!env.VAULT_ADDR || !env.VAULT_TOKEN) return null;
  const address = env.VAULT_ADDR.replace(/\/+$/, "");
  const path = (env.VAULT_SECRET_PATH || DEFAULT_VAULT_SECRET_PATH).replace(/^\/+|\/+$/g, "");
  const token = env.VAULT_TOKEN;
  return {
    name: "vault",
    async get(secret) {
      if (!/^https?:\/\//.test(address)) throw new SecretSourceError("vault", `VAULT_ADDR must be an http(s) URL, not "${address}"`);
      if (!/^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/.test(path) || path.split("/").some((s) => s === "." || s === ".."))
        throw new SecretSourceError("vault", `VAULT_SECRET_PATH must be a path like ${DEFAULT_VAULT_SECRET_PATH}, not "${path}"`);
      let response: Response;
      try {
        response = await fetch(`${address}/v1/${path}`, { headers: { "X-Vault-Token": token }, signal: AbortSignal.timeout(10_000) });
      } catch (error) {
        throw new SecretSourceError("vault", `Vault at ${address} could not be reached: ${(error as Error).message}`);
      }
      // Vault answers 404 for a path with nothing written at it.
      if (response.status === 404) return null;
      if (!response.ok) throw new SecretSourceError("vault", `Vault at ${address} answered ${response.status} for ${path}`);
      const body = (await response.json().catch(() => null)) as { data?: { data?: Record<string, unknown> } } | null;
      const value = body?.data?.data?.[secret];
      return typeof value === "string" && value !== "" ? value : null;
    },
  };
}

/**
 * The sources this deployment has, in order: the Worker's environment, the host's
 * environment and files (local only), registered secrets managers, Vault (when configured).
 *
 * @example
 * secretSources(env).map((s) => s.name); // ["environment", "environment", "file", "vault"] locally with Vault
 */
export function secretSources(env: Env): SecretSource[] {
  const sources: (SecretSource | null)[] = [
    workerEnvironment(env),
    hostSource(env, "environment"),
    hostSource(env, "file"),
    ...secretsManagers.map((factory) => factory(env)),
    vaultSource(env),
  ];
  return sources.filter((s): s is SecretSource => s !== null);
}

/**
 * Resolves a secret from the first source that has it: its value and where it came from, or
 * null when none has it. A bad or reserved name is a 422; a source that fails (Vault down)
 * throws SecretSourceError rather than falling through, since a later source must not silently
 * stand in for an earlier one.
 *
 * @example
 * const token = await resolveSecret(env, settings.api_token_secret); // { value: "r8_...", source: "file" }
 */
export async function resolveSecret(
  env: Env,
  name: string,
  sources: SecretSource[] = secretSources(env),
): Promise<{ value: string; source: SecretSource["name"] } | null> {
  const problem = secretNameProblem(name);
  if (problem) throw new ApiError(422, "invalid_secret_name", problem);
  for (const source of sources) {
    const value = await source.get(name);
    if (value !== null) return { value, source: source.name };
  }
  return null;
}
