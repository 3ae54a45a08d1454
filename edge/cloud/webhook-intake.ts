import { Webhook } from "standardwebhooks";
import { ipInRanges, parseRange } from "../../shared/ip";
import type { Database } from "../db/client";
import { ApiError } from "../errors";
import type { StoredProviderSettings } from "./provider-settings";

/*
 * Provider webhook intake (POST /api/webhooks/{provider}): authenticate the sender (address
 * allowlist, then the Standard Webhooks signature), and record the payload for the cloud job
 * tracker, once per webhook-id when signed. Without a secret nothing is accepted unless an admin
 * explicitly allowed unsigned webhooks for the provider (refused 401; 403 is only the address
 * allowlist's); an unsigned delivery is never deduplicated, so a forged one cannot claim the
 * webhook-id of a genuine one still to come. Deliveries are kept WEBHOOK_RETENTION_DAYS, and
 * only as a summary (webhookSummary): a provider's body is the whole training, `input` (which
 * may carry the job's secrets), its signed `urls` and its cumulative `logs` included, and none of
 * those is stored, only their sizes. Acting on the payload belongs to the cloud jobs; this only
 * accepts or refuses.
 */

/**
 * The largest body read (edge/middleware/body-limit.ts gives the route the same cap); only a
 * summary of it is stored. Replicate's body is the whole training with its cumulative `logs`, so
 * a long run's `completed` can pass a megabyte: refusing it would leave the job to polling.
 */
export const MAX_WEBHOOK_BYTES = 16 * 1024 * 1024;

/** How long received webhooks are kept (the Scheduler's sweep forgets older ones). */
export const WEBHOOK_RETENTION_DAYS = 30;

export type Refusal = { status: 403 | 401; reason: "address_not_allowed" | "bad_signature" | "webhook_secret_not_set"; detail: string };

/** Null when the address may post, else why not (outside a configured allowlist: 403). */
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
    // 401: the delivery cannot be authenticated (403 is kept for the address allowlist).
    return {
      status: 401,
      reason: "webhook_secret_not_set",
      detail: `Webhooks for ${provider} are refused: they cannot be authenticated until an admin sets its signing secret (PUT /api/cloud/providers/${provider} {"webhook_secret": "whsec_..."}) or explicitly allows unsigned ones ({"webhook_allow_unsigned": true})`,
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

/** The fields of a provider's training kept as they came: small, and nothing a job put in. */
const KEPT_FIELDS = ["id", "model", "version", "status", "created_at", "started_at", "completed_at", "source", "data_removed"] as const;
/** The most characters of a kept string (an id, a status, a timestamp) and of the provider's `error`. */
const MAX_KEPT_CHARS = 256;
const MAX_ERROR_CHARS = 1000;
/** The most other fields whose sizes are listed (a body with thousands of keys keeps the first ones). */
const MAX_SIZED_FIELDS = 32;

/** Statuses that end a training at Replicate. */
const TERMINAL = new Set(["succeeded", "failed", "canceled", "aborted"]);

/** What is stored of one delivery, and listed to admins. */
export interface WebhookSummary {
  /** The provider's id of the run (Replicate: the training id), or null when the body has none. */
  provider_job_id: string | null;
  status: string | null;
  /** "start" (starting), "completed" (a terminal status) or "update" (logs or output while it runs). */
  event: "start" | "completed" | "update";
  /** The body's size in bytes, as received. */
  body_bytes: number;
  /** The fields kept as they came (id, model, version, status, timestamps, source), `metrics`' numbers and `error` (shortened). */
  payload: Record<string, unknown>;
  /** Every other field, by size in bytes only: `input`, `logs`, `output`, `urls`, ... never their values. */
  omitted: Record<string, number>;
}

const byteLength = (text: string) => new TextEncoder().encode(text).length;
const shorten = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}… (${text.length} characters)` : text);

/**
 * What is kept of a provider's webhook body: an allowlist of small fields, never `input` (a
 * job's secrets travel in it), `urls` (signed links), `logs` or `output`, which are listed by
 * size only, as is any field the provider adds later.
 *
 * @example
 * webhookSummary({ id: "t1", status: "processing", input: { env: "HF_TOKEN=hf_x" }, logs: "step 1" }, 90).omitted; // { input: 25, logs: 8 }
 */
export function webhookSummary(body: Record<string, unknown>, bodyBytes: number): WebhookSummary {
  const payload: Record<string, unknown> = {};
  const omitted: Record<string, number> = {};
  for (const [key, value] of Object.entries(body)) {
    if ((KEPT_FIELDS as readonly string[]).includes(key) && (value === null || ["string", "number", "boolean"].includes(typeof value))) {
      payload[key] = typeof value === "string" ? shorten(value, MAX_KEPT_CHARS) : value;
    } else if (key === "metrics" && typeof value === "object" && value !== null && !Array.isArray(value)) {
      // Numbers only (predict_time, ...): what billing is read from.
      payload.metrics = Object.fromEntries(
        Object.entries(value as Record<string, unknown>)
          .filter(([, v]) => typeof v === "number")
          .slice(0, MAX_SIZED_FIELDS)
          .map(([k, v]) => [shorten(k, 64), v]),
      );
    } else if (key === "error" && (value === null || typeof value === "string")) {
      payload.error = value === null ? null : shorten(value, MAX_ERROR_CHARS);
    } else if (Object.keys(omitted).length < MAX_SIZED_FIELDS) {
      omitted[shorten(key, 64)] = value === undefined ? 0 : byteLength(JSON.stringify(value));
    }
  }
  const status = typeof payload.status === "string" ? payload.status : null;
  return {
    provider_job_id: typeof payload.id === "string" ? payload.id : null,
    status,
    event: status === "starting" ? "start" : status && TERMINAL.has(status) ? "completed" : "update",
    body_bytes: bodyBytes,
    payload,
    omitted,
  };
}

// Rows stored before summaries carry the raw body: they are summarised when listed and rewritten by the sweep.
const isSummary = (stored: unknown): stored is WebhookSummary =>
  typeof stored === "object" &&
  stored !== null &&
  "body_bytes" in stored &&
  "omitted" in stored &&
  typeof (stored as { payload?: unknown }).payload === "object";

/** A body as received, summarised (whatever it claims to be). */
function bodySummary(text: string, parsed: unknown = undefined): WebhookSummary {
  if (parsed === undefined) {
    try {
      parsed = JSON.parse(text);
    } catch {}
  }
  const body = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  return webhookSummary(body, byteLength(text));
}

/** A stored row's summary: as stored, or summarised from a body stored whole. */
function storedSummary(text: string): WebhookSummary {
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return isSummary(parsed) ? parsed : bodySummary(text, parsed);
}

/**
 * Stores the summary of the event's body (`payload`, already `parsed` where it was: webhookSummary,
 * never the body itself) unless it is signed and its
 * webhook-id was stored signed before (a retry). One statement: the insert does nothing on the
 * unique (provider, webhook_id) of signed rows, and then the earlier row is returned. Unsigned
 * events are always stored.
 */
export async function recordWebhook(
  db: Database,
  event: {
    provider: string;
    webhookId: string | null;
    clientIp: string;
    signed: boolean;
    payload: string;
    parsed?: Record<string, unknown>;
  },
): Promise<{ id: number; duplicate: boolean }> {
  const now = new Date().toISOString();
  const summary = bodySummary(event.payload, event.parsed);
  const [inserted, existing] = await db.$client.batch(
    [
      {
        sql: "INSERT INTO provider_webhook_events (provider, webhook_id, received_at, client_ip, signed, payload) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (provider, webhook_id) WHERE webhook_id IS NOT NULL AND signed = 1 DO NOTHING RETURNING id",
        args: [event.provider, event.webhookId, now, event.clientIp, event.signed ? 1 : 0, JSON.stringify(summary)],
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

/** The most recent deliveries, newest first: what arrived, its signature verdict and sizes, never a body. */
export async function listWebhooks(db: Database, provider: string, limit: number) {
  const result = await db.$client.execute({
    sql: "SELECT * FROM provider_webhook_events WHERE provider = ? ORDER BY id DESC LIMIT ?",
    args: [provider, limit],
  });
  return (result.rows as unknown as Record<string, unknown>[]).map((r) => {
    const summary = storedSummary(String(r.payload));
    const signed = Number(r.signed) === 1;
    return {
      id: Number(r.id),
      webhook_id: (r.webhook_id as string | null) ?? null,
      received_at: String(r.received_at),
      client_ip: (r.client_ip as string | null) ?? null,
      signed,
      signature: signed ? ("verified" as const) : ("unsigned" as const),
      provider_job_id: summary.provider_job_id,
      status: summary.status,
      event: summary.event,
      body_bytes: summary.body_bytes,
      payload: summary.payload,
      omitted: summary.omitted,
      processed: r.processed_at !== null && r.processed_at !== undefined,
      processed_at: (r.processed_at as string | null) ?? null,
    };
  });
}

/** How many rows stored before summaries one sweep rewrites. */
const REWRITE_BATCH = 500;

/**
 * Rewrites rows stored whole (before summaries) as their summary, REWRITE_BATCH at a time; the
 * Scheduler's sweep calls it with forgetOldWebhooks. Returns how many it rewrote.
 */
export async function summariseStoredWebhooks(db: Database): Promise<number> {
  const result = await db.$client.execute({
    sql: `SELECT id, payload FROM provider_webhook_events WHERE payload NOT LIKE '{"provider_job_id":%' ORDER BY id LIMIT ?`,
    args: [REWRITE_BATCH],
  });
  const rows = result.rows.map((r) => ({ id: Number(r.id), summary: storedSummary(String(r.payload)) }));
  if (!rows.length) return 0;
  await db.$client.batch(
    rows.map((r) => ({ sql: "UPDATE provider_webhook_events SET payload = ? WHERE id = ?", args: [JSON.stringify(r.summary), r.id] })),
    "write",
  );
  return rows.length;
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
  // Rows kept whole by an earlier version lose their bodies on the same sweep.
  await summariseStoredWebhooks(db);
  return result.rowsAffected;
}

/** Marks a received webhook as applied to its cloud job. */
export async function markWebhookProcessed(db: Database, id: number): Promise<void> {
  await db.$client.execute({
    sql: "UPDATE provider_webhook_events SET processed_at = ? WHERE id = ?",
    args: [new Date().toISOString(), id],
  });
}
