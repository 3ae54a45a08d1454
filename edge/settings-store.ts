import { eq } from "drizzle-orm";
import type { Database } from "./db/client";
import { settings } from "./db/schema";
import {
  APPROVAL_DEFAULTS,
  CONCURRENCY_DEFAULTS,
  STALL_DEFAULTS,
  type ApprovalRules,
  type ConcurrencySettings,
  type StallRules,
} from "../shared/schemas/queue";
import { METRIC_TEMPLATES, type MetricsConfig } from "../shared/schemas/metrics";
import { STORAGE_QUOTA_DEFAULTS, type StorageQuota } from "../shared/schemas/storage";
import { EVENT_LIMITS_DEFAULTS, type EventLimits } from "../shared/schemas/events";
import { DATASET_QUOTA_DEFAULTS, type DatasetQuota } from "../shared/schemas/datasets";
import { BUDGET_DEFAULTS, GPU_PRICES_DEFAULTS, type Budgets, type GpuPrices } from "../shared/schemas/spend";
import { CLOUD_SETTINGS_DEFAULTS, DEFAULT_HARDWARE_RATES, type CloudSettings, type HardwareRates } from "../shared/schemas/cloud";

/** The SMTP server e-mail notifications go through. */
export interface SmtpConfig {
  host: string;
  port: number;
  tls: "none" | "starttls" | "tls";
  username: string;
  password: string;
  from: string;
}

/** Service settings stored in libSQL, JSON-encoded, with their defaults. */
export const SETTING_DEFAULTS = {
  registration_enabled: false,
  /** The queue's concurrency limits and the scheduler's settings (POST /api/queue/concurrency). */
  concurrency: CONCURRENCY_DEFAULTS as ConcurrencySettings,
  /** When a submission needs an admin's approval (PUT /api/queue/approval-rules). */
  approval_rules: APPROVAL_DEFAULTS as ApprovalRules,
  /**
   * Set when a running local job is cancelled: pending local jobs are then not started
   * automatically until POST /api/queue/process or a restart clears it.
   */
  local_queue_paused: false as boolean,
  /** Outbound webhooks: may they go to loopback and private addresses (SSRF guard off)? */
  webhooks: { allow_private_targets: false } as { allow_private_targets: boolean },
  /** The service's Standard Webhooks signing secret (whsec_...), made on first use. */
  webhook_signing_secret: "" as string,
  /** The key approval links are signed with (edge/notifications/approval-link.ts), made on first use. */
  approval_link_secret: "" as string,
  /** E-mail notifications: the SMTP server (PUT /api/admin/notifications/smtp); no host: e-mail is off. */
  smtp: { host: "", port: 587, tls: "starttls", username: "", password: "", from: "" } as SmtpConfig,
  /** Prometheus export: off by default; the standard template's categories. */
  metrics: { prometheus_enabled: false, prometheus_categories: [...METRIC_TEMPLATES.standard] } as MetricsConfig,
  /** What one job may keep on the storage endpoint (PUT /api/admin/storage-quota). */
  storage_quota: STORAGE_QUOTA_DEFAULTS as StorageQuota,
  /** What job event logs may hold, and how long an ended job's are kept (PUT /api/admin/event-limits). */
  event_limits: EVENT_LIMITS_DEFAULTS as EventLimits,
  /** What one user's dataset folders may hold (PUT /api/admin/dataset-quota). */
  dataset_quota: DATASET_QUOTA_DEFAULTS as DatasetQuota,
  /** When a running job counts as stalled, and the default policy (PUT /api/admin/stall-detection). */
  stall_detection: STALL_DEFAULTS as StallRules,
  /** Cloud training: consent, spending limit, public URL, polling, publishing (PUT /api/cloud/settings). */
  cloud: CLOUD_SETTINGS_DEFAULTS as CloudSettings,
  /** USD per second by hardware (PUT /api/cloud/rates). A table, not a record of fields: read whole by getRates (edge/cloud/settings.ts), never merged with the defaults. */
  cloud_rates: DEFAULT_HARDWARE_RATES as HardwareRates,
  /** $/GPU-hour of the service's own boxes, by box, by GPU model, and a default (PUT /api/admin/gpu-prices). */
  gpu_prices: GPU_PRICES_DEFAULTS as GpuPrices,
  /** Budgets per user and per team over every job, and what happens when one is used up (PUT /api/admin/budgets). */
  budgets: BUDGET_DEFAULTS as Budgets,
} satisfies Record<string, unknown>;
export type SettingKey = keyof typeof SETTING_DEFAULTS;
export type SettingValue<K extends SettingKey> = (typeof SETTING_DEFAULTS)[K];

export async function getSetting<K extends SettingKey>(db: Database, key: K): Promise<SettingValue<K>> {
  const [row] = await db.select({ value: settings.value }).from(settings).where(eq(settings.key, key));
  return parseSetting(key, row?.value ?? null);
}

/** A setting from its stored JSON (null when never set). */
export function parseSetting<K extends SettingKey>(key: K, value: string | null): SettingValue<K> {
  if (value === null) return SETTING_DEFAULTS[key];
  // Object settings gain fields over time, nested ones too: a stored value keeps the defaults of fields added since.
  return mergeSetting(SETTING_DEFAULTS[key], JSON.parse(value) as Partial<SettingValue<K>>);
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * `patch` over `base`, field by field into nested objects; arrays, null and other values replace
 * what they cover; fields the patch leaves out (or sets undefined) keep their value.
 *
 * @example
 * mergeSetting({ a: 1, n: { x: 1, y: 2 } }, { n: { y: 3 } }); // { a: 1, n: { x: 1, y: 3 } }
 */
export function mergeSetting<T>(base: T, patch: unknown): T {
  if (!isPlainObject(base) || !isPlainObject(patch)) return (patch === undefined ? base : patch) as T;
  const merged: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(patch)) if (value !== undefined) merged[key] = mergeSetting(base[key], value);
  return merged as T;
}

export async function setSetting<K extends SettingKey>(db: Database, key: K, value: SettingValue<K>): Promise<void> {
  const row = { key, value: JSON.stringify(value), updatedAt: new Date().toISOString() };
  await db
    .insert(settings)
    .values(row)
    .onConflictDoUpdate({ target: settings.key, set: { value: row.value, updatedAt: row.updatedAt } });
}
