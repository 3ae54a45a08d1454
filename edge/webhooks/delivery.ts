import { Webhook } from "standardwebhooks";
import type { Database } from "../db/client";
import { getSetting } from "../settings-store";
import { refusedTarget } from "./targets";

/*
 * Sending one outbound webhook: Standard Webhooks headers (webhook-id, webhook-timestamp,
 * webhook-signature "v1,<base64 HMAC-SHA256>") over the exact body, a 10 s timeout, and the
 * retry decision. The events hub keeps the queue and the backoff.
 */

/** Seconds to wait before each retry; after the last, the delivery is given up. */
export const RETRY_DELAYS_SECONDS = [5, 30, 120, 600, 1800];

/** The service's signing secret, made (32 random bytes) and stored the first time it is needed. */
export async function signingSecret(db: Database): Promise<string> {
  const existing = await getSetting(db, "webhook_signing_secret");
  if (existing) return existing;
  const made = `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;
  await db.$client.execute({
    sql: "INSERT INTO settings (key, value, updated_at) VALUES ('webhook_signing_secret', ?, ?) ON CONFLICT (key) DO NOTHING",
    args: [JSON.stringify(made), new Date().toISOString()],
  });
  return getSetting(db, "webhook_signing_secret");
}

export type SendResult = { ok: true; status: number } | { ok: false; retry: boolean; error: string };

/** A fetch that resolves and checks names before connecting (the local host's WEBHOOK_OUTBOUND binding). */
export interface GuardedFetcher {
  fetch(request: Request): Promise<Response>;
}

/**
 * Sends one webhook. The URL is checked here (targets.ts); with `outbound` (the local host) the
 * request goes through it, which also resolves the name and refuses a private address, and
 * connects to the address it checked. Without it (deployed on Cloudflare) the runtime's fetch
 * cannot reach private networks.
 */
export async function sendWebhook(
  url: string,
  messageId: string,
  body: string,
  secret: string,
  allowPrivate: boolean,
  outbound?: GuardedFetcher,
): Promise<SendResult> {
  const refused = refusedTarget(url, allowPrivate);
  if (refused) return { ok: false, retry: false, error: `refused: ${refused}` };
  const timestamp = new Date();
  const signature = new Webhook(secret).sign(messageId, timestamp, body);
  try {
    const init: RequestInit = {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": "training-service-webhooks/1",
        "webhook-id": messageId,
        "webhook-timestamp": String(Math.floor(timestamp.getTime() / 1000)),
        "webhook-signature": signature,
        ...(outbound ? { "x-outbound-allow-private": allowPrivate ? "1" : "0" } : {}),
      },
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(outbound ? 15_000 : 10_000),
    };
    const response = outbound ? await outbound.fetch(new Request(url, init)) : await fetch(url, init);
    await response.body?.cancel();
    const refusedThere = response.headers.get("x-outbound-refused");
    if (refusedThere !== null) return { ok: false, retry: false, error: `refused: ${decodeURIComponent(refusedThere)}` };
    const failedThere = response.headers.get("x-outbound-failed");
    if (failedThere !== null) return { ok: false, retry: true, error: decodeURIComponent(failedThere) };
    if (response.status >= 200 && response.status < 300) return { ok: true, status: response.status };
    // A receiver's 4xx will not change by retrying, except "too early" and "too many".
    const retry = response.status >= 500 || response.status === 408 || response.status === 429;
    return { ok: false, retry, error: `HTTP ${response.status}` };
  } catch (error) {
    return { ok: false, retry: true, error: (error as Error).name === "TimeoutError" ? "timed out after 10 s" : (error as Error).message };
  }
}
