import { eq } from "drizzle-orm";
import type { Database } from "./db/client";
import { settings } from "./db/schema";

/** Service settings stored in libSQL, JSON-encoded, with their defaults. */
export const SETTING_DEFAULTS = {
  registration_enabled: false,
} satisfies Record<string, unknown>;
export type SettingKey = keyof typeof SETTING_DEFAULTS;
type SettingValue<K extends SettingKey> = (typeof SETTING_DEFAULTS)[K];

export async function getSetting<K extends SettingKey>(db: Database, key: K): Promise<SettingValue<K>> {
  const [row] = await db.select({ value: settings.value }).from(settings).where(eq(settings.key, key));
  return row ? (JSON.parse(row.value) as SettingValue<K>) : SETTING_DEFAULTS[key];
}

export async function setSetting<K extends SettingKey>(db: Database, key: K, value: SettingValue<K>): Promise<void> {
  const row = { key, value: JSON.stringify(value), updatedAt: new Date().toISOString() };
  await db.insert(settings).values(row).onConflictDoUpdate({ target: settings.key, set: { value: row.value, updatedAt: row.updatedAt } });
}
