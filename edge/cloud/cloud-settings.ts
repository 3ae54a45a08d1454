import type { CloudSettings, CloudSettingsUpdate, HardwareRates } from "../../shared/schemas/cloud";
import { DEFAULT_HARDWARE_RATES } from "../../shared/schemas/cloud";
import type { Database } from "../db/client";
import { ApiError } from "../errors";
import { getSetting, mergeSetting, setSetting } from "../settings-store";

/*
 * The Cloud tab's settings (consent, spending limit, public URL, polling, publishing: read with
 * getSetting(db, "cloud")) and the hardware rates, both service settings in libSQL.
 */

/**
 * Applies an update (any subset; nested publishing fields one by one) after checking what zod
 * cannot: an enabled S3 destination needs its endpoint and bucket. Nothing is saved on a refusal.
 * Returns the settings before and after.
 */
export async function updateCloudSettings(
  db: Database,
  update: CloudSettingsUpdate,
): Promise<{ before: CloudSettings; after: CloudSettings }> {
  const before = await getSetting(db, "cloud");
  const after = mergeSetting(before, update);
  const s3 = after.publishing.s3;
  if (s3.enabled && (!s3.endpoint_url || !s3.bucket))
    throw new ApiError(422, "invalid_request", "publishing.s3: an enabled S3 destination needs endpoint_url and bucket", [
      { path: "publishing.s3", message: "endpoint_url and bucket are required when enabled" },
    ]);
  for (const [path, url] of [
    ["public_url", after.public_url],
    ["publishing.s3.endpoint_url", s3.endpoint_url],
    ["publishing.hub.endpoint", after.publishing.hub.endpoint],
  ] as const) {
    if (url && !/^https?:\/\//.test(url))
      throw new ApiError(422, "invalid_request", `${path}: must be an http(s) URL, not "${url}"`, [
        { path, message: "not an http(s) URL" },
      ]);
  }
  await setSetting(db, "cloud", after);
  return { before, after };
}

/** The rates table as an admin left it (the defaults until one is saved): a saved table replaces the defaults whole. */
export async function getRates(db: Database): Promise<HardwareRates> {
  const result = await db.$client.execute({ sql: "SELECT value FROM settings WHERE key = 'cloud_rates'", args: [] });
  const row = result.rows[0];
  return row ? (JSON.parse(String(row.value)) as HardwareRates) : { ...DEFAULT_HARDWARE_RATES };
}

export async function setRates(db: Database, rates: HardwareRates): Promise<HardwareRates> {
  await setSetting(db, "cloud_rates", rates);
  return rates;
}

/**
 * The public address providers and cloud jobs reach this service at: the Public URL
 * setting, else SERVICE_PUBLIC_URL; null when neither is set (then webhooks are off and jobs poll).
 *
 * @example
 * publicBase(settings, config.publicUrl); // "https://train.example.com"
 */
export function publicBase(settings: Pick<CloudSettings, "public_url">, servicePublicUrl: URL | undefined): string | null {
  const url = settings.public_url ?? servicePublicUrl?.toString() ?? null;
  return url ? url.replace(/\/+$/, "") : null;
}
