import { Webhook } from "standardwebhooks";
import { ipInRanges, parseRange } from "../../shared/ip";
import type { Database } from "../db/client";
import { ApiError } from "../errors";
import type { StoredProviderSettings } from "./settings";

/*
 * Provider webhook intake (POST /api/webhooks/{provider}): authenticate the sender (address
 * allowlist, then the Standard Webhooks signature when the provider's secret is set), and record
 * the payload once per webhook-id for the cloud job tracker. Acting on the payload belongs to the
 * cloud jobs; this only accepts or refuses.
 */

/** Providers' status updates are small JSON documents; anything larger is refused unread. */
export const MAX_WEBHOOK_BYTES = 1024 * 1024;

export type Refusal = { status: 403 | 401; reason: "address_not_allowed" | "bad_signature"; detail: string };

/** Null when the address may post, else why not (spec 7: outside a configured allowlist is 403). */
export function addressRefusal(settings: StoredProviderSettings, provider: string, clientIp: string): Refusal | null {
  if (!settings.webhook_allowed_ips.length) return null;
  const ranges = settings.webhook_allowed_ips.map(parseRange);
  if (ipInRanges(clientIp, ranges)) return null;
  return { status: 403, reason: "address_not_allowed", detail: `Webhooks for ${provider} are not accepted from ${clientIp}: it is outside the provider's webhook_allowed_ips` };
}

/** Null when no secret is set or the signature verifies (the library also rejects stale timestamps: 5 min). */
export function signatureRefusal(settings: StoredProviderSettings, headers: Headers, body: string): Refusal | null {
  if (!settings.webhook_secret) return null;
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
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new ApiError(400, "invalid_payload", "The webhook body must be a JSON object");
  return parsed as Record<string, unknown>;
}

/**
 * Stores the event unless its webhook-id was stored before (a retry). One statement: the insert
 * does nothing on the unique (provider, webhook_id), and then the earlier row is returned.
 */
export async function recordWebhook(db: Database, event: { provider: string; webhookId: string | null; clientIp: string; signed: boolean; payload: string }): Promise<{ id: number; duplicate: boolean }> {
  const now = new Date().toISOString();
  const [inserted, existing] = await db.$client.batch(
    [
      {
        sql: "INSERT INTO provider_webhook_events (provider, webhook_id, received_at, client_ip, signed, payload) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (provider, webhook_id) WHERE webhook_id IS NOT NULL DO NOTHING RETURNING id",
        args: [event.provider, event.webhookId, now, event.clientIp, event.signed ? 1 : 0, event.payload],
      },
      { sql: "SELECT id FROM provider_webhook_events WHERE provider = ? AND webhook_id = ?", args: [event.provider, event.webhookId] },
    ],
    "write",
  );
  const id = inserted!.rows[0]?.id;
  if (id !== undefined) return { id: Number(id), duplicate: false };
  return { id: Number(existing!.rows[0]!.id), duplicate: true };
}

export async function listWebhooks(db: Database, provider: string, limit: number) {
  const result = await db.$client.execute({ sql: "SELECT * FROM provider_webhook_events WHERE provider = ? ORDER BY id DESC LIMIT ?", args: [provider, limit] });
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
