import type { Context } from "hono";
import type { AppEnv } from "../app-env";
import { auditLater, type AuditEventType } from "../audit/trail";
import { principalOf } from "../middleware/authorize";
import { getSetting, mergeSetting, setSetting, type SettingKey, type SettingValue } from "../settings-store";

/**
 * An admin's change to one flat setting (a quota, the event limits): the fields sent replace
 * theirs, the others keep their value; audited with the value before and after, and logged.
 * Returns the value now in force. `tidy`: what the merged value becomes before it is stored (say,
 * a table's entries patched to null removed).
 *
 * @example
 * return c.json(await patchSetting(c, "storage_quota", c.req.valid("json"), "storage_quota_changed", "storage quota"), 200);
 */
export async function patchSetting<K extends SettingKey>(
  c: Context<AppEnv>,
  key: K,
  patch: Partial<SettingValue<K>>,
  eventType: AuditEventType,
  what: string,
  tidy: (merged: SettingValue<K>) => SettingValue<K> = (merged) => merged,
): Promise<SettingValue<K>> {
  const db = c.get("db");
  const before = await getSetting(db, key);
  const next = tidy(mergeSetting(before, patch));
  await setSetting(db, key, next);
  auditLater(c, { event_type: eventType, target: key, details: { before, after: next } });
  c.get("log").info(`${what} changed`, { ...(next as Record<string, unknown>), by: principalOf(c).user.id });
  return next;
}
