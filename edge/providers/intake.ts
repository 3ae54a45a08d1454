import { Webhook } from "standardwebhooks";
import { ipInRanges, parseRange } from "../../shared/ip";
import type { Database } from "../db/client";
import { ApiError } from "../errors";
import type { StoredProviderSettings } from "./settings";

/*
 * Provider webhook intake (POST /api/webhooks/{provider}): authenticate the sender (address
 * allowlist, then the Standard Webhooks signature), and record the payload for the cloud job
 * tracker, once per webhook-id when signed. Without a secret nothing is accepted unless an admin
 * explicitly allowed unsigned webhooks for the provider; an unsigned delivery is never
 * deduplicated, so a forged one cannot claim the webhook-id of a genuine one still to come.
 * Deliveries are kept WEBHOOK_RETENTION_DAYS. Acting on the payload belongs to the cloud jobs;
 * this only accepts or refuses.
 */

/** Providers' status updates are small JSON documents; anything larger is refused unread. */
export const MAX_WEBHOOK_BYTES = 1024 * 1024;

/** How long received webhooks are kept (the Scheduler's sweep forgets older ones). */
export const WEBHOOK_RETENTION_DAYS = 30;

export type Refusal = { status: 403 | 401; reason: "address_not_allowed" | "bad_signature" | "webhook_secret_not_set"; detail: string };

/** Null when the address may post, else why not (spec 7: outside a configured allowlist is 403). */
export function addressRefusal(settings: StoredProviderSettings, provider: string, clientIp: string): Refusal | null {
  if (!settings.webhook_allowed_ips.length) return null;
  const ranges = settings.webhook_allowed_ips.map(parseRange);
  if (ipInRanges(clientIp, ranges)) return null;
  return {
    status: 403,
    reason: "address_not_allowed",
    detail: `Webhooks for ${provider} are not accepted from ${clientIp}: it is outside the provider's webhook_allowed_ips`,
  };
}

/**
 * Null when the signature verifies (the library also rejects stale timestamps: 5 min, which with
 * the dedupe makes a replay useless), or when no secret is set and the admin allowed unsigned
 * webhooks; else why not.
 */
export function signatureRefusal(settings: StoredProviderSettings, provider: string, headers: Headers, body: string): Refusal | null {
  if (!settings.webhook_secret) {
    if (settings.webhook_allow_unsigned) return null;
    return {
      status: 403,
      reason: "webhook_secret_not_set",
      detail: `Webhooks for ${provider} are refused until an admin sets its signing secret (PUT /api/cloud/providers/${provider} {"webhook_secret": "whsec_..."}) or explicitly allows unsigned ones ({"webhook_allow_unsigned": true})`,
    };
  }
  try {
    new Webhook(settings.webhook_secret).verify(body, {
      "webhook-id": headers.get("webhook-id") ?? "",
      "webhook-timestamp": headers.get("webhook-timestamp") ?? "",
      "webhook-signature": headers.get("webhook-signature") ?? "",
    });
    return null;
  } catch (error) {
    return { status: 401, reason: "bad_signature", detail: `Webhook signature not valid: ${(error as Error).message}` };
  }
}

/** The JSON payload, or a 400 saying why it is not one. */
export function parsePayload(body: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new ApiError(400, "invalid_json", "The webhook body is not valid JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw new ApiError(400, "invalid_payload", "The webhook body must be a JSON object");
  return parsed as Record<string, unknown>;
}

/**
 * Stores the event unless it is signed and its webhook-id was stored signed before (a retry).
 * One statement: the insert does nothing on the unique (provider, webhook_id) of signed rows,
 * and then the earlier row is returned. Unsigned events are always stored.
 */
export async function recordWebhook(
  db: Database,
  event: { provider: string; webhookId: string | null; clientIp: string; signed: boolean; payload: string },
): Promise<{ id: number; duplicate: boolean }> {
  const now = new Date().toISOString();
  const [inserted, existing] = await db.$client.batch(
    [
      {
        sql: "INSERT INTO provider_webhook_events (provider, webhook_id, received_at, client_ip, signed, payload) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (provider, webhook_id) WHERE webhook_id IS NOT NULL AND signed = 1 DO NOTHING RETURNING id",
        args: [event.provider, event.webhookId, now, event.clientIp, event.signed ? 1 : 0, event.payload],
      },
      {
        sql: "SELECT id FROM provider_webhook_events WHERE provider = ? AND webhook_id = ? AND signed = 1",
        args: [event.provider, event.webhookId],
      },
    ],
    "write",
  );
  const id = inserted!.rows[0]?.id;
  if (id !== undefined) return { id: Number(id), duplicate: false };
  return { id: Number(existing!.rows[0]!.id), duplicate: true };
}

export async function listWebhooks(db: Database, provider: string, limit: number) {
  const result = await db.$client.execute({
    sql: "SELECT * FROM provider_webhook_events WHERE provider = ? ORDER BY id DESC LIMIT ?",
    args: [provider, limit],
  });
  return (result.rows as unknown as Record<string, unknown>[]).map((r) => ({
    id: Number(r.id),
    webhook_id: (r.webhook_id as string | null) ?? null,
    received_at: String(r.received_at),
    client_ip: (r.client_ip as string | null) ?? null,
    signed: Number(r.signed) === 1,
    payload: JSON.parse(String(r.payload)) as unknown,
    processed_at: (r.processed_at as string | null) ?? null,
  }));
}

/**
 * Forgets received webhooks older than `days` (the Scheduler's alarm calls it). Returns how many.
 *
 * @example
 * await forgetOldWebhooks(db); // those received more than 30 days ago
 */
export async function forgetOldWebhooks(db: Database, days = WEBHOOK_RETENTION_DAYS, now = new Date()): Promise<number> {
  const before = new Date(now.getTime() - days * 86_400_000).toISOString();
  const result = await db.$client.execute({ sql: "DELETE FROM provider_webhook_events WHERE received_at < ?", args: [before] });
  return result.rowsAffected;
}

/** Marks a received webhook as applied to its cloud job. */
export async function markWebhookProcessed(db: Database, id: number): Promise<void> {
  await db.$client.execute({
    sql: "UPDATE provider_webhook_events SET processed_at = ? WHERE id = ?",
    args: [new Date().toISOString(), id],
  });
}
