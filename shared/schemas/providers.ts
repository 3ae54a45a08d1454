import { z } from "@hono/zod-openapi";
import { Timestamp } from "./common";

/** A CIDR range or a single address, IPv4 or IPv6 (checked on save: edge/cloud/provider-settings.ts). */
const AddressEntry = z.string().min(1).max(64).openapi({ example: "203.0.113.0/24" });

/** The `{provider}` of a provider's paths. */
export const ProviderParam = z.object({
  provider: z
    .string()
    .max(64)
    .openapi({ param: { name: "provider", in: "path" }, example: "replicate" }),
});

export const ProviderSummary = z
  .object({
    name: z.string().openapi({ example: "replicate" }),
    display_name: z.string().openapi({ example: "Replicate" }),
    capabilities: z.array(z.string()).openapi({ example: ["cloud_training", "webhooks"] }),
    webhook_path: z.string().openapi({ description: "Where the provider posts status updates", example: "/api/webhooks/replicate" }),
    kind: z.enum(["hosted", "workers", "managed"]),
    coming_soon: z.boolean().openapi({ description: "Listed but not usable yet (the managed service)" }),
    supports_cost_tracking: z.boolean(),
    supports_live_logs: z.boolean(),
    credentials: z
      .object({
        valid: z.boolean(),
        message: z.string().openapi({
          description:
            "Service wording only, never the provider's answer: why a check failed is shown to admins (GET /api/cloud/providers/{provider})",
        }),
        latency_ms: z.number().nullable(),
        checked_at: Timestamp,
        breaker_state: z.enum(["closed", "open", "half_open"]),
      })
      .nullable()
      .openapi({ description: "Whether its credentials validate (checked at most every 5 minutes); null for one coming soon" }),
  })
  .openapi("ProviderSummary");

export const ProviderList = z.object({ providers: z.array(ProviderSummary) }).openapi("ProviderList");

/** A credential check as admins see it: the message may quote the provider's answer. */
export const ProviderCredentials = z
  .object({
    valid: z.boolean(),
    message: z.string(),
    latency_ms: z.number().nullable(),
    checked_at: Timestamp,
    breaker_state: z.enum(["closed", "open", "half_open"]),
  })
  .openapi("ProviderCredentials");

export const ProviderSettings = z
  .object({
    provider: z.string(),
    webhook_allowed_ips: z
      .array(z.string())
      .openapi({ description: "CIDR ranges and single IPs allowed to post webhooks; empty: any address" }),
    ssl_verify: z.boolean().openapi({ description: "Verify certificates on outbound provider calls" }),
    ssl_ca_bundle: z.string().nullable().openapi({ description: "Path of a CA bundle for outbound calls" }),
    proxy_url: z.string().nullable().openapi({ description: "HTTP proxy for outbound calls (a password in it is shown as ***)" }),
    http_timeout: z.number().openapi({ description: "Seconds per outbound call" }),
    s3_endpoint_enabled: z.boolean().openapi({ description: "Cloud jobs of this provider may upload to the storage endpoint" }),
    s3_public_url: z.string().nullable().openapi({ description: "The URL jobs upload to; null: SERVICE_PUBLIC_URL" }),
    s3_output_path: z.string().openapi({ description: "Where uploads are stored (a folder in the storage bucket)" }),
    s3_access_key_id: z.string().nullable().openapi({
      description: "Storage credentials configured manually: this provider's jobs use them instead of fresh ones per job; null: fresh ones",
    }),
    s3_secret_access_key_set: z.boolean().openapi({ description: "Whether the manual credentials' secret is set (it is never shown)" }),
    webhook_secret_set: z
      .boolean()
      .openapi({ description: "Whether webhooks must carry a valid Standard Webhooks signature (the secret itself is never shown)" }),
    webhook_allow_unsigned: z.boolean().openapi({
      description:
        "Accept webhooks while no webhook_secret is set (off by default: without a secret, intake is refused with 401 webhook_secret_not_set)",
    }),
    api_base_url: z.string().openapi({
      description:
        "The provider's API root (default https://api.replicate.com): point it at a proxy or a test double. https, and not a loopback, private, link-local, metadata or local-name host, unless allow_private_targets",
    }),
    allow_private_targets: z.boolean().openapi({
      description:
        "Let api_base_url and proxy_url name loopback, private, link-local or local-name hosts, and api_base_url be plain http (a test double, an in-house proxy). Off by default: the SSRF guard",
    }),
    training_model: z
      .string()
      .nullable()
      .openapi({ description: 'The trainer the provider runs, "owner/name:version"; cloud submissions need it' }),
    training_destination: z.string().nullable().openapi({ description: 'The provider-side model the training writes to, "owner/name"' }),
    hardware: z.string().openapi({ description: "The hardware the training model runs on; its rate (GET /api/cloud/rates) prices jobs" }),
    api_token_secret: z.string().openapi({
      description:
        "The name of the secret holding the API token (environment, then secret files, then vault); the token is never shown. Only a secret of this provider: a name starting with the provider's name in capitals and _ that contains TOKEN (REPLICATE_API_TOKEN)",
    }),
    updated_at: Timestamp.nullable(),
    credentials: ProviderCredentials.optional().openapi({
      description:
        "GET only: the last credential check in full, the provider's own words included (the public list and the health check show only whether it is valid)",
    }),
  })
  .openapi("ProviderSettings");

export const ProviderSettingsUpdate = z
  .strictObject({
    webhook_allowed_ips: z.array(AddressEntry).max(256).nullable().optional(),
    ssl_verify: z.boolean().nullable().optional(),
    confirm_insecure: z.boolean().optional().openapi({ description: "Must be true to turn ssl_verify off" }),
    ssl_ca_bundle: z.string().min(1).max(1024).nullable().optional(),
    proxy_url: z.string().max(2048).nullable().optional(),
    http_timeout: z.number().min(1).max(600).nullable().optional(),
    s3_endpoint_enabled: z.boolean().nullable().optional(),
    s3_public_url: z.string().max(2048).nullable().optional(),
    s3_output_path: z.string().min(1).max(256).nullable().optional(),
    s3_access_key_id: z.string().max(128).nullable().optional().openapi({
      description: "Storage credentials configured manually (with s3_secret_access_key); null returns to fresh credentials per job",
    }),
    s3_secret_access_key: z.string().max(256).nullable().optional().openapi({ description: "The manual credentials' secret. Write-only." }),
    webhook_secret: z
      .string()
      .max(256)
      .nullable()
      .optional()
      .openapi({ description: "The provider's webhook signing secret (whsec_...); null removes it. Write-only." }),
    api_base_url: z.string().max(2048).nullable().optional(),
    allow_private_targets: z.boolean().nullable().optional().openapi({
      description:
        "Let api_base_url and proxy_url reach loopback, private and local-name hosts (a test double, an in-house proxy); set it in the same request as such a URL",
    }),
    training_model: z.string().max(256).nullable().optional(),
    training_destination: z.string().max(256).nullable().optional(),
    hardware: z.string().max(64).nullable().optional(),
    api_token_secret: z.string().max(128).nullable().optional(),
    webhook_allow_unsigned: z.boolean().nullable().optional().openapi({
      description:
        "Accept unsigned webhooks while no secret is set (not recommended: anyone who can reach the endpoint can post status updates). Unsigned deliveries are never deduplicated.",
    }),
  })
  .openapi("ProviderSettingsUpdate", {
    description: "Any subset; omitted fields keep their values, null restores the default.",
    example: { webhook_allowed_ips: ["203.0.113.0/24", "2001:db8::/32", "192.0.2.10"], http_timeout: 20 },
  });
export type ProviderSettingsUpdate = z.infer<typeof ProviderSettingsUpdate>;

export const WebhookReceipt = z
  .object({
    received: z.literal(true),
    id: z.number().int().openapi({ description: "The stored event's id" }),
    duplicate: z.boolean().openapi({ description: "True when this webhook-id was received before (a provider retry); stored once" }),
  })
  .openapi("WebhookReceipt");

export const ReceivedWebhook = z
  .object({
    id: z.number().int(),
    webhook_id: z.string().nullable(),
    received_at: Timestamp,
    client_ip: z.string().nullable(),
    signed: z.boolean(),
    signature: z.enum(["verified", "unsigned"]).openapi({
      description: "verified: the Standard Webhooks signature checked out; unsigned: accepted without one (webhook_allow_unsigned)",
    }),
    provider_job_id: z.string().nullable().openapi({ description: "The provider's id of the run (Replicate: the training id)" }),
    status: z.string().nullable(),
    event: z.enum(["start", "completed", "update"]),
    body_bytes: z.number().int().openapi({ description: "The body's size as received" }),
    payload: z.record(z.string(), z.unknown()).openapi({
      description:
        "What is kept of the body: id, model, version, status, timestamps, source, data_removed, metrics' numbers and error (shortened). Never input, urls, logs or output",
    }),
    omitted: z.record(z.string(), z.number()).openapi({
      description: "Every other field of the body, by size in bytes only (input, logs, output, urls, ...)",
      example: { input: 2048, logs: 180_000, urls: 210 },
    }),
    processed: z.boolean().openapi({ description: "Whether it was applied to its cloud job" }),
    processed_at: Timestamp.nullable(),
  })
  .openapi("ReceivedWebhook");

export const ReceivedWebhookList = z.object({ events: z.array(ReceivedWebhook) }).openapi("ReceivedWebhookList");
