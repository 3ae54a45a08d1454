import { eq } from "drizzle-orm";
import { findProvider } from "../../shared/providers";
import type { ProviderSettingsUpdate } from "../../shared/schemas/providers";
import { parseRange } from "../../shared/ip";
import type { Database } from "../db/client";
import { providerSettings } from "../db/schema";
import { ApiError, notFound } from "../errors";
import { UPLOAD_TOKEN_PREFIX } from "../storage/credentials";
import { secretNameProblem } from "./secrets";
import { PROVIDER_PRIVATE_HINT as PRIVATE_HINT, refusedHost } from "../webhooks/targets";

/** A provider's settings as stored (PUT /api/cloud/providers/{provider}), the write-only webhook secret included. */
export interface StoredProviderSettings {
  webhook_allowed_ips: string[];
  ssl_verify: boolean;
  ssl_ca_bundle: string | null;
  proxy_url: string | null;
  http_timeout: number;
  s3_endpoint_enabled: boolean;
  s3_public_url: string | null;
  s3_output_path: string;
  /** Credentials configured manually for the storage endpoint: then the provider's jobs use these instead of fresh ones. */
  s3_access_key_id: string | null;
  s3_secret_access_key: string | null;
  webhook_secret: string | null;
  /** Accept unsigned webhooks while no secret is set: an admin's explicit choice, off by default. */
  webhook_allow_unsigned: boolean;
  /** The provider's API root: the real one by default; a proxy or a test double otherwise. */
  api_base_url: string;
  /**
   * Let api_base_url and proxy_url name loopback, private, link-local or local-name hosts (a
   * test double, an in-house proxy): an admin's explicit choice, off by default (the SSRF guard).
   */
  allow_private_targets: boolean;
  /** The trainer the provider runs ("owner/name:version" on Replicate). */
  training_model: string | null;
  /** Where the provider keeps the trained model ("owner/name" on Replicate, which requires one). */
  training_destination: string | null;
  /** The hardware the training model runs on: its rate (PUT /api/cloud/rates) prices the job. */
  hardware: string;
  /** The name of the secret holding the provider's API token (resolved by edge/cloud/secrets.ts). */
  api_token_secret: string;
}

/** Replicate's API root. */
export const DEFAULT_API_BASE_URL = "https://api.replicate.com";

/** Outbound calls time out after 30 s unless SERVICE_HTTP_TIMEOUT says otherwise. */
export const DEFAULT_HTTP_TIMEOUT_S = 30;

export function providerDefaults(): StoredProviderSettings {
  return {
    webhook_allowed_ips: [],
    ssl_verify: true,
    ssl_ca_bundle: null,
    proxy_url: null,
    http_timeout: DEFAULT_HTTP_TIMEOUT_S,
    s3_endpoint_enabled: false,
    s3_public_url: null,
    s3_output_path: "outputs",
    s3_access_key_id: null,
    s3_secret_access_key: null,
    webhook_secret: null,
    webhook_allow_unsigned: false,
    api_base_url: DEFAULT_API_BASE_URL,
    allow_private_targets: false,
    training_model: null,
    training_destination: null,
    hardware: "gpu-a100-large",
    api_token_secret: "REPLICATE_API_TOKEN",
  };
}

/** The provider named, or a 404 that lists the known ones. */
export function requireProvider(name: string) {
  const provider = findProvider(name);
  if (!provider) throw notFound(`Provider "${name}"`);
  return provider;
}

export async function getProviderSettings(db: Database, provider: string): Promise<StoredProviderSettings & { updated_at: string | null }> {
  const [row] = await db.select().from(providerSettings).where(eq(providerSettings.provider, provider));
  if (!row) return { ...providerDefaults(), updated_at: null };
  return { ...providerDefaults(), ...(JSON.parse(row.settings) as Partial<StoredProviderSettings>), updated_at: row.updatedAt };
}

/** What admins see: no secret, a proxy password masked. */
export function publicSettings(provider: string, stored: StoredProviderSettings & { updated_at: string | null }) {
  const { webhook_secret, s3_secret_access_key, updated_at, ...rest } = stored;
  return {
    provider,
    ...rest,
    proxy_url: maskPassword(rest.proxy_url),
    s3_secret_access_key_set: Boolean(s3_secret_access_key),
    webhook_secret_set: Boolean(webhook_secret),
    updated_at,
  };
}

function maskPassword(url: string | null): string | null {
  if (!url) return url;
  const parsed = new URL(url);
  if (!parsed.password) return url;
  parsed.password = "***";
  return parsed.toString();
}

type Field = { path: string; message: string };

/**
 * Why a provider's API token may not be read from the secret `name`, or null. Only a secret of
 * this provider: its name starts with the provider's name in capitals and an underscore and has
 * TOKEN in it (REPLICATE_API_TOKEN, REPLICATE_API_TOKEN_STAGING), and it is none of the
 * service's own credentials. The token is sent as Bearer to api_base_url, so a setting naming
 * HF_TOKEN, AWS_SECRET_ACCESS_KEY or the database's token would hand that secret to whichever
 * host api_base_url names.
 *
 * @example
 * apiTokenSecretProblem("replicate", "HF_TOKEN"); // "must name a replicate token secret: ..."
 */
export function apiTokenSecretProblem(provider: string, name: string): string | null {
  const general = secretNameProblem(name);
  if (general) return general;
  const prefix = `${provider.toUpperCase().replace(/[^A-Z0-9]/g, "_")}_`;
  if (!name.startsWith(prefix) || !name.slice(prefix.length).includes("TOKEN"))
    return `must name a ${provider} token secret: a name starting with ${prefix} that contains TOKEN (like ${prefix}API_TOKEN), not ${name}; other secrets (HF_TOKEN, AWS_SECRET_ACCESS_KEY, ...) are never sent to the provider`;
  return null;
}

/**
 * Why a provider's outbound URL (api_base_url, proxy_url) may not be called, or null: its host
 * is a local name or a loopback, private, link-local, metadata or reserved address (the check
 * of webhook targets, edge/webhooks/targets.ts), unless `allowPrivate`. The API root must be
 * https (its token travels to it) unless private targets are allowed. Names are checked as
 * written: the Worker cannot resolve them (the local host's fetcher is where a resolved address
 * can be checked).
 *
 * @example
 * outboundUrlProblem("http://169.254.169.254/", "api_base_url", false); // "169.254.169.254 is a loopback, private or reserved address; ..."
 */
export function outboundUrlProblem(value: string, field: "api_base_url" | "proxy_url", allowPrivate: boolean): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `must be an http(s) URL, not "${value}"`;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return `must be an http(s) URL, not "${value}"`;
  if (allowPrivate) return null;
  if (field === "api_base_url" && url.protocol !== "https:")
    return `must be an https URL (the API token is sent to it), not "${url.origin}"; ${PRIVATE_HINT} (a local test double)`;
  return refusedHost(url.hostname, PRIVATE_HINT);
}

/**
 * The problems of stored settings' outbound fields (api_base_url, proxy_url, api_token_secret),
 * for callers that use settings saved before these checks existed: an empty list when they may
 * be used.
 *
 * @example
 * outboundSettingsProblems("replicate", await getProviderSettings(db, "replicate")); // []
 */
export function outboundSettingsProblems(provider: string, settings: StoredProviderSettings): Field[] {
  const fields: Field[] = [];
  const base = outboundUrlProblem(settings.api_base_url, "api_base_url", settings.allow_private_targets);
  if (base) fields.push({ path: "api_base_url", message: base });
  const proxy = settings.proxy_url ? outboundUrlProblem(settings.proxy_url, "proxy_url", settings.allow_private_targets) : null;
  if (proxy) fields.push({ path: "proxy_url", message: proxy });
  const secret = apiTokenSecretProblem(provider, settings.api_token_secret);
  if (secret) fields.push({ path: "api_token_secret", message: secret });
  return fields;
}

function httpUrl(value: string, path: string, fields: Field[]): void {
  let parsed: URL | null = null;
  try {
    parsed = new URL(value);
  } catch {}
  if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:"))
    fields.push({ path, message: `must be an http(s) URL, not "${value}"` });
}

// A folder inside the storage bucket: relative, no "." or ".." segments, no empty segments.
const SAFE_SEGMENT = /^[A-Za-z0-9._-]+$/;
function outputPath(value: string, fields: Field[]): void {
  const segments = value.replace(/\/+$/, "").split("/");
  if (value.startsWith("/") || segments.some((s) => !SAFE_SEGMENT.test(s) || s === "." || s === "..")) {
    fields.push({
      path: "s3_output_path",
      message: `must be a relative folder of letters, digits, ".", "_" and "-" separated by "/", without "." or ".." parts, not "${value}"`,
    });
  }
}

// The host reads the CA bundle whole: a path to a PEM file, never to a device or a kernel file
// (/dev/zero would never end), and with no "." or ".." parts that could lead there.
const NOT_FILES = /^\/(dev|proc|sys)(\/|$)/;
function caBundlePath(value: string, fields: Field[]): void {
  const segments = value.split(/[\\/]+/);
  const absolute = value.startsWith("/") || /^[A-Za-z]:[\\/]/.test(value);
  if (
    !absolute ||
    segments.includes(".") ||
    segments.includes("..") ||
    NOT_FILES.test(value.replace(/\/+/g, "/")) ||
    /[\x00-\x1f]/.test(value)
  )
    fields.push({
      path: "ssl_ca_bundle",
      message: `must be the absolute path of a PEM file of CA certificates, without "." or ".." parts and not under /dev, /proc or /sys, not ${JSON.stringify(value)}`,
    });
}

/**
 * Applies an update (any subset; null restores a field's default) after checking every field;
 * any problem is one 422 listing each field, and nothing is saved. Returns the settings before
 * and after.
 */
export async function updateProviderSettings(db: Database, provider: string, update: ProviderSettingsUpdate, userId: number) {
  const before = await getProviderSettings(db, provider);
  const defaults = providerDefaults();
  const fields: Field[] = [];
  update.webhook_allowed_ips?.forEach((entry, i) => {
    try {
      parseRange(entry);
    } catch (error) {
      fields.push({ path: `webhook_allowed_ips.${i}`, message: (error as Error).message });
    }
  });
  if (update.ssl_ca_bundle) caBundlePath(update.ssl_ca_bundle, fields);
  if (update.s3_public_url) httpUrl(update.s3_public_url, "s3_public_url", fields);
  if (update.s3_output_path) outputPath(update.s3_output_path, fields);
  // The outbound URLs are checked as they will be after the update, whenever one of them or the allowance changes.
  const allowPrivate =
    "allow_private_targets" in update ? (update.allow_private_targets ?? defaults.allow_private_targets) : before.allow_private_targets;
  const outboundChanged = "api_base_url" in update || "proxy_url" in update || "allow_private_targets" in update;
  for (const field of ["api_base_url", "proxy_url"] as const) {
    const value = field in update ? (update[field] ?? defaults[field]) : before[field];
    const problem = outboundChanged && value ? outboundUrlProblem(value, field, allowPrivate) : null;
    if (problem) fields.push({ path: field, message: problem });
  }
  if (update.training_model && !/^[a-z0-9][a-z0-9._-]*\/[a-z0-9][a-z0-9._-]*:[a-f0-9]{8,128}$/i.test(update.training_model))
    fields.push({
      path: "training_model",
      message: `must be "owner/name:version" (the version id in hex), not "${update.training_model}"`,
    });
  if (update.training_destination && !/^[a-z0-9][a-z0-9._-]*\/[a-z0-9][a-z0-9._-]*$/i.test(update.training_destination))
    fields.push({ path: "training_destination", message: `must be "owner/name", not "${update.training_destination}"` });
  if (update.hardware && !/^[a-z0-9][a-z0-9._-]{0,63}$/i.test(update.hardware))
    fields.push({ path: "hardware", message: `must be a hardware name like gpu-a100-large, not "${update.hardware}"` });
  const secretProblem = update.api_token_secret ? apiTokenSecretProblem(provider, update.api_token_secret) : null;
  if (secretProblem) fields.push({ path: "api_token_secret", message: secretProblem });
  if (update.ssl_verify === false && before.ssl_verify && update.confirm_insecure !== true) {
    fields.push({ path: "ssl_verify", message: "turning certificate verification off needs confirm_insecure: true in the same request" });
  }
  if (update.webhook_secret && !/^(whsec_)?[A-Za-z0-9+/=]{16,}$/.test(update.webhook_secret)) {
    fields.push({ path: "webhook_secret", message: "must be the provider's signing secret: whsec_ followed by base64" });
  }
  // A manual key id is never shaped like a job's upload token (STU...), so the two cannot collide.
  if (
    update.s3_access_key_id &&
    (!/^[A-Z0-9]{16,128}$/.test(update.s3_access_key_id) || update.s3_access_key_id.startsWith(UPLOAD_TOKEN_PREFIX))
  ) {
    fields.push({
      path: "s3_access_key_id",
      message: "must be 16 to 128 upper-case letters and digits, not starting with STU (the prefix of jobs' own upload tokens)",
    });
  }
  if (update.s3_secret_access_key && !/^[\x21-\x7e]{16,256}$/.test(update.s3_secret_access_key)) {
    fields.push({ path: "s3_secret_access_key", message: "must be 16 to 256 printable characters without spaces" });
  }
  const keyAfter = "s3_access_key_id" in update ? (update.s3_access_key_id ?? null) : before.s3_access_key_id;
  const secretAfter = "s3_secret_access_key" in update ? (update.s3_secret_access_key ?? null) : before.s3_secret_access_key;
  if ((keyAfter === null) !== (secretAfter === null))
    fields.push({
      path: "s3_secret_access_key",
      message: "s3_access_key_id and s3_secret_access_key are set (or cleared with null) together",
    });
  if (fields.length) throw new ApiError(422, "invalid_request", fields.map((f) => `${f.path}: ${f.message}`).join("; "), fields);

  const { updated_at: _updatedAt, ...current } = before;
  const next: StoredProviderSettings = { ...current };
  for (const key of Object.keys(defaults) as (keyof StoredProviderSettings)[]) {
    if (!(key in update)) continue;
    const value = update[key];
    (next as unknown as Record<string, unknown>)[key] = value === null ? defaults[key] : value;
  }
  if (next.webhook_allowed_ips.length) next.webhook_allowed_ips = next.webhook_allowed_ips.map((e) => e.trim());
  const now = new Date().toISOString();
  const row = { provider, settings: JSON.stringify(next), updatedAt: now, updatedBy: userId };
  await db
    .insert(providerSettings)
    .values(row)
    .onConflictDoUpdate({ target: providerSettings.provider, set: { settings: row.settings, updatedAt: now, updatedBy: userId } });
  return { before, after: { ...next, updated_at: now } };
}
