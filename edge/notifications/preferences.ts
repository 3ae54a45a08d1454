import type { Database } from "../db/client";
import { ApiError } from "../errors";
import { getSetting } from "../settings-store";
import { refusedTarget } from "../webhooks/targets";
import { NOTIFICATION_KINDS, type NotificationPreferences, type NotificationPreferencesUpdate } from "../../shared/schemas/notifications";

/*
 * A user's notification preferences: the kinds they want and their channels. A user who never
 * saved theirs wants every kind and has no channel, so nothing is sent to them. Each user has a
 * webhook signing secret of their own, made when they first save.
 */

const DEFAULTS: NotificationPreferencesUpdate = {
  kinds: [...NOTIFICATION_KINDS],
  channels: { webhook: null, slack: null, email: null },
};

const newSecret = () => `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;

/** The stored preferences of one user, with their webhook secret (empty until first saved). */
export async function readPreferences(db: Database, userId: number): Promise<NotificationPreferences> {
  const { rows } = await db.$client.execute({
    sql: "SELECT preferences, webhook_secret, updated_at FROM notification_preferences WHERE user_id = ?",
    args: [userId],
  });
  const row = rows[0];
  if (!row) return { ...DEFAULTS, webhook_secret: "", updated_at: null };
  const stored = JSON.parse(String(row.preferences)) as NotificationPreferencesUpdate;
  return { ...DEFAULTS, ...stored, webhook_secret: String(row.webhook_secret), updated_at: String(row.updated_at) };
}

/**
 * Saves a user's preferences whole. A webhook or Slack URL on a loopback or private address (or a
 * local name) is refused with 422 unless an admin allows private targets (PUT /api/admin/webhooks),
 * the same guard as the job webhooks'.
 *
 * @example
 * await savePreferences(db, 7, { kinds: ["job.completed"], channels: { webhook: null, slack: null, email: { address: "a@b.c" } } });
 */
export async function savePreferences(
  db: Database,
  userId: number,
  update: NotificationPreferencesUpdate,
): Promise<NotificationPreferences> {
  const { allow_private_targets } = await getSetting(db, "webhooks");
  const fields: { path: string; message: string }[] = [];
  for (const channel of ["webhook", "slack"] as const) {
    const url = update.channels[channel]?.url;
    const refused = url ? refusedTarget(url, allow_private_targets) : null;
    if (refused) fields.push({ path: `body.channels.${channel}.url`, message: refused });
  }
  if (fields.length)
    throw new ApiError(422, "notification_target_refused", `Refused: ${fields.map((f) => `${f.path}: ${f.message}`).join("; ")}`, fields);
  const stored = JSON.stringify({ kinds: [...new Set(update.kinds)], channels: update.channels });
  await db.$client.execute({
    sql: `INSERT INTO notification_preferences (user_id, preferences, webhook_secret, updated_at) VALUES (?, ?, ?, ?)
          ON CONFLICT (user_id) DO UPDATE SET preferences = excluded.preferences, updated_at = excluded.updated_at`,
    args: [userId, stored, newSecret(), new Date().toISOString()],
  });
  return readPreferences(db, userId);
}
