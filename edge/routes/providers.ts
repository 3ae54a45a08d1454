import { createRoute, z } from "@hono/zod-openapi";
import { PROVIDERS } from "../../shared/providers";
import {
  ProviderList,
  ProviderParam,
  ProviderSettings,
  ProviderSettingsUpdate,
  ReceivedWebhookList,
  WebhookReceipt,
} from "../../shared/schemas/providers";
import { auditLater, changedFields } from "../audit/trail";
import { ApiError } from "../errors";
import { readLimitedText } from "../limited-body";
import { principalOf } from "../middleware/authorize";
import {
  addressRefusal,
  listWebhooks,
  markWebhookProcessed,
  MAX_WEBHOOK_BYTES,
  parsePayload,
  recordWebhook,
  signatureRefusal,
} from "../cloud/webhook-intake";
import { getProviderSettings, publicSettings, requireProvider, updateProviderSettings } from "../cloud/provider-settings";
import { createRouter } from "../router";
import { checkProviders, forgetProviderCheck, publicMessage } from "../cloud/provider-checks";
import { jobOfProviderRun } from "../cloud/record";
import { webhookReader } from "../cloud/registry";
import { cloudJobOf } from "../jobs/objects";
import { error, json, jsonBody } from "./openapi";

/** Hosted providers: the public list, admins' settings, and webhook intake. */
export const providersRoutes = createRouter();

const tags = ["Providers"];
const errors = {
  401: error("No valid credential"),
  403: error("Not an admin"),
  404: error("No such provider"),
  422: error("Invalid body"),
};

providersRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/providers",
    tags,
    summary: "The providers this service knows, what each can do, and whether its credentials validate (public, no settings)",
    description:
      "The hosted provider, worker orchestration (your own GPU workers) and the managed service (coming soon, not usable). `credentials` says whether the provider accepts this service's credentials: checked against the provider at most every 5 minutes, the last answer shown in between. Public; never rate limited. The message is the service's wording, never the provider's answer: admins see why a check failed at `GET /api/cloud/providers/{provider}`.",
    responses: { 200: json(ProviderList, "Providers") },
  }),
  async (c) => {
    const checks = await checkProviders({ env: c.env, db: c.get("db"), log: c.get("log") }, PROVIDER_CHECK_MAX_AGE_S);
    return c.json(
      {
        providers: PROVIDERS.map((p) => {
          const check = checks.find((x) => x.name === p.name) ?? null;
          return {
            name: p.name,
            display_name: p.display_name,
            capabilities: [...p.capabilities],
            webhook_path: `/api/webhooks/${p.name}`,
            kind: p.kind,
            coming_soon: p.coming_soon,
            supports_cost_tracking: (p.capabilities as readonly string[]).includes("cost_tracking"),
            supports_live_logs: (p.capabilities as readonly string[]).includes("live_logs"),
            credentials: check && {
              valid: check.valid,
              message: publicMessage(check),
              latency_ms: check.latency_ms,
              checked_at: check.checked_at,
              breaker_state: check.breaker_state,
            },
          };
        }),
      },
      200,
    );
  },
);

/** How old a credential check the public providers list may show. */
const PROVIDER_CHECK_MAX_AGE_S = 300;

providersRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/providers/{provider}",
    tags,
    summary: "A provider's settings (admin; secrets never shown)",
    description:
      "The provider settings fields. Write-only secrets are shown as `webhook_secret_set` and `s3_secret_access_key_set`; a password in `proxy_url` as `***`. `credentials` is the last credential check in full (at most 5 minutes old), with the provider's own words where it failed: the public list and the health check say only whether it is valid.",
    request: { params: ProviderParam },
    responses: { 200: json(ProviderSettings, "Settings"), ...errors },
  }),
  async (c) => {
    const { provider } = c.req.valid("param");
    const known = requireProvider(provider);
    const settings = publicSettings(provider, await getProviderSettings(c.get("db"), provider));
    if (known.coming_soon) return c.json(settings, 200);
    const checks = await checkProviders({ env: c.env, db: c.get("db"), log: c.get("log") }, PROVIDER_CHECK_MAX_AGE_S);
    const check = checks.find((x) => x.name === provider);
    const credentials = check && {
      valid: check.valid,
      message: check.message,
      latency_ms: check.latency_ms,
      checked_at: check.checked_at,
      breaker_state: check.breaker_state,
    };
    return c.json({ ...settings, ...(credentials ? { credentials } : {}) }, 200);
  },
);

providersRoutes.openapi(
  createRoute({
    method: "put",
    path: "/api/cloud/providers/{provider}",
    tags,
    summary: "Change a provider's settings (admin)",
    description:
      "Any subset of the provider settings fields; omitted fields keep their values and null restores the default. Saved at once. `webhook_allowed_ips` entries are CIDR ranges or single addresses (IPv4 or IPv6), each checked: one bad entry refuses the whole update. Turning `ssl_verify` off needs `confirm_insecure: true`. `api_base_url` and `proxy_url` are refused (422, saying why) when their host is a local name or a loopback, private, link-local, metadata or reserved address, and `api_base_url` when it is not https, unless `allow_private_targets` is true (in the same request or before). `api_token_secret` names only a secret of this provider: starting with its name in capitals and _, with TOKEN in it (`REPLICATE_API_TOKEN`). A change forgets the last credential check.",
    request: { params: ProviderParam, ...jsonBody(ProviderSettingsUpdate) },
    responses: { 200: json(ProviderSettings, "The settings now in force"), ...errors },
  }),
  async (c) => {
    const { provider } = c.req.valid("param");
    requireProvider(provider);
    const { before, after } = await updateProviderSettings(c.get("db"), provider, c.req.valid("json"), principalOf(c).user.id);
    // The secret is audited as set or not, never by value.
    const redact = (s: typeof before) => ({
      ...s,
      webhook_secret: Boolean(s.webhook_secret),
      s3_secret_access_key: Boolean(s.s3_secret_access_key),
      proxy_url: publicSettings(provider, s).proxy_url,
      updated_at: undefined,
    });
    const changed = changedFields(redact(before), redact(after));
    // Another API root, proxy or token secret: the last check no longer says anything.
    if (Object.keys(changed).length) await forgetProviderCheck({ db: c.get("db") }, provider);
    auditLater(c, { event_type: "provider_settings_changed", target: provider, details: { changed } });
    c.get("log").info("provider settings changed", { provider, fields: Object.keys(changed) });
    return c.json(publicSettings(provider, after), 200);
  },
);

providersRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/cloud/providers/{provider}/webhooks",
    tags,
    summary: "The provider's most recent webhooks received (admin)",
    description:
      "Newest first, at most `limit`; kept 30 days. What arrived: the provider's run id, status and event, whether it was signed, its size, whether it was applied, and the body's small fields (id, status, timestamps, metrics, error). `input` (which carries a job's secrets), `urls`, `logs` and `output` are never stored: `omitted` lists them by size only.",
    request: { params: ProviderParam, query: z.object({ limit: z.coerce.number().int().min(1).max(500).default(50) }) },
    responses: { 200: json(ReceivedWebhookList, "Newest first"), ...errors },
  }),
  async (c) => {
    const { provider } = c.req.valid("param");
    requireProvider(provider);
    return c.json({ events: await listWebhooks(c.get("db"), provider, c.req.valid("query").limit) }, 200);
  },
);

providersRoutes.openapi(
  createRoute({
    method: "post",
    path: "/api/webhooks/{provider}",
    tags,
    summary: "A provider's status update (public: authenticated by address allowlist and signature)",
    description:
      "Refused with 403 `address_not_allowed` when `webhook_allowed_ips` is set and the sender is outside it; with 401 `webhook_secret_not_set` while the provider has no webhook secret (unless an admin set `webhook_allow_unsigned`); and with 401 `bad_signature` when the Standard Webhooks signature (webhook-id, webhook-timestamp, webhook-signature) does not verify; all are audited as `webhook_rejected`. Accepted deliveries are recorded (202), a signed one once per webhook-id (a repeat answers 202 with duplicate: true and changes nothing); unsigned ones are never deduplicated. Only a summary is kept, 30 days: never the body's `input`, `urls`, `logs` or `output` (see GET /api/cloud/providers/{provider}/webhooks).",
    request: { params: ProviderParam },
    responses: {
      202: json(WebhookReceipt, "Recorded"),
      400: error("Not a JSON object"),
      401: error("Bad signature, or no webhook secret set"),
      403: error("Sender outside the allowlist"),
      404: error("No such provider"),
      413: error("Body over 1 MiB"),
    },
  }),
  async (c) => {
    const { provider } = c.req.valid("param");
    requireProvider(provider);
    const db = c.get("db");
    const settings = await getProviderSettings(db, provider);
    const clientIp = c.get("clientIp");
    const refuse = (refusal: { status: 401 | 403; reason: string; detail: string }) => {
      auditLater(c, { event_type: "webhook_rejected", target: provider, details: { reason: refusal.reason, path: c.req.path } });
      c.get("log").warning("provider webhook refused", { provider, reason: refusal.reason, client_ip: clientIp });
      return new ApiError(refusal.status, refusal.reason, refusal.detail);
    };
    const byAddress = addressRefusal(settings, provider, clientIp);
    if (byAddress) throw refuse(byAddress);
    const tooLarge = () => new ApiError(413, "payload_too_large", `The webhook body is larger than ${MAX_WEBHOOK_BYTES} bytes`);
    if (Number(c.req.header("content-length") ?? 0) > MAX_WEBHOOK_BYTES) throw tooLarge();
    const body = await readLimitedText(c.req.raw.body, MAX_WEBHOOK_BYTES);
    if (body === null) throw tooLarge();
    const bySignature = signatureRefusal(settings, provider, c.req.raw.headers, body);
    if (bySignature) throw refuse(bySignature);
    const payload = parsePayload(body);
    const webhookId = c.req.header("webhook-id")?.slice(0, 256) || null;
    const receipt = await recordWebhook(db, {
      provider,
      webhookId,
      clientIp,
      signed: Boolean(settings.webhook_secret),
      payload: body,
      parsed: payload,
    });
    c.get("log").info("provider webhook received", { provider, id: receipt.id, duplicate: receipt.duplicate });
    // A status update about one of our cloud jobs moves it along now (polling would, later); a repeat changes nothing.
    const runId = webhookReader(provider)?.runId(payload) ?? null;
    const jobId = !receipt.duplicate && runId ? await jobOfProviderRun(db, provider, runId) : null;
    if (jobId)
      c.executionCtx.waitUntil(
        cloudJobOf(c.env, jobId)
          .update(jobId, payload)
          .then(() => markWebhookProcessed(db, receipt.id))
          .catch((error: unknown) =>
            c.get("log").warning("could not apply a provider webhook", { provider, job_id: jobId, error: String(error) }),
          ),
      );
    return c.json({ received: true as const, ...receipt }, 202);
  },
);
