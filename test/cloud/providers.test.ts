import { MAX_WEBHOOK_BYTES } from "../../edge/cloud/webhook-intake";
// Provider settings and provider webhook intake over real HTTP: the public list, admins'
// settings with every field checked, the address allowlist (IPv4 and IPv6 ranges) and Standard
// Webhooks signatures, both refusals audited, and each webhook recorded once per webhook-id.
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let viewer: { key: string };

const put = (body: Record<string, unknown>) => t.call("PUT", "/api/cloud/providers/replicate", { json: body, auth: { key: admin.key } });
const settings = async () => (await t.call("GET", "/api/cloud/providers/replicate", { auth: { key: admin.key } })).body;
/** A provider webhook as if sent from `ip` (the test talks through loopback, a trusted proxy by default). */
const hook = (ip: string, body: string, headers: Record<string, string> = {}) =>
  t.call("POST", "/api/webhooks/replicate", { body, headers: { "content-type": "application/json", "x-forwarded-for": ip, ...headers } });
const SECRET = `whsec_${Buffer.from("a provider's webhook secret!").toString("base64")}`;

async function auditEntries(type: string): Promise<any[]> {
  return (await t.call("GET", `/api/audit?event_type=${type}&limit=1000`, { auth: { key: admin.key } })).body.entries;
}
async function eventuallyAudited(type: string, match: (e: any) => boolean): Promise<any> {
  for (const deadline = Date.now() + 5_000; ; await new Promise((r) => setTimeout(r, 50))) {
    const found = (await auditEntries(type)).find(match);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no ${type} audit entry matching`);
  }
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  viewer = await createUserWithKey(t, { cookie: admin.cookie }, "viewer");
});
afterAll(async () => {
  await t?.stop();
});

describe("GET /api/cloud/providers", () => {
  it("lists names and capabilities to anyone, and no settings", async () => {
    const list = await t.call("GET", "/api/cloud/providers");
    expect(list.status).toBe(200);
    const providers = list.body.providers as any[];
    expect(providers.map((p) => [p.name, p.kind, p.coming_soon, p.webhook_path])).toEqual([
      ["replicate", "hosted", false, "/api/webhooks/replicate"],
      ["workers", "workers", false, "/api/webhooks/workers"],
      ["managed", "managed", true, "/api/webhooks/managed"],
    ]);
    expect(providers[0]).toMatchObject({
      display_name: "Replicate",
      capabilities: ["cloud_training", "webhooks", "cost_tracking", "live_logs", "storage_endpoint"],
      supports_cost_tracking: true,
      supports_live_logs: true,
      // No token is set here: the public list says only that it is not valid, in the service's words.
      credentials: { valid: false, message: "credentials not valid; an admin sees why at GET /api/cloud/providers/replicate" },
    });
    expect(providers[2].credentials).toBeNull();
    for (const p of providers) expect(Object.keys(p)).not.toContain("settings");
  });
});

describe("provider settings", () => {
  it("starts from the defaults and is for admins only", async () => {
    expect(await settings()).toEqual({
      provider: "replicate",
      webhook_allowed_ips: [],
      ssl_verify: true,
      ssl_ca_bundle: null,
      proxy_url: null,
      http_timeout: 30,
      s3_endpoint_enabled: false,
      s3_public_url: null,
      s3_output_path: "outputs",
      s3_access_key_id: null,
      s3_secret_access_key_set: false,
      webhook_secret_set: false,
      webhook_allow_unsigned: false,
      api_base_url: "https://api.replicate.com",
      allow_private_targets: false,
      training_model: null,
      training_destination: null,
      hardware: "gpu-a100-large",
      api_token_secret: "REPLICATE_API_TOKEN",
      updated_at: null,
      // Admins see why the check failed (here: no token is set, naming the secret, never a value).
      credentials: {
        valid: false,
        message: expect.stringContaining("REPLICATE_API_TOKEN"),
        latency_ms: null,
        checked_at: expect.any(String),
        breaker_state: "closed",
      },
    });
    expect((await t.call("GET", "/api/cloud/providers/replicate", { auth: { key: viewer.key } })).status).toBe(403);
    expect((await t.call("PUT", "/api/cloud/providers/replicate", { json: { http_timeout: 10 }, auth: { key: viewer.key } })).status).toBe(
      403,
    );
    expect((await t.call("PUT", "/api/cloud/providers/replicate", { json: { http_timeout: 10 } })).status).toBe(401);
    expect((await t.call("GET", "/api/cloud/providers/nosuch", { auth: { key: admin.key } })).status).toBe(404);
  });

  it("refuses every bad field in one 422 naming each, and saves nothing", async () => {
    const bad = await put({
      webhook_allowed_ips: ["10.0.0.0/8", "10.0.0.0/33", "not-an-ip"],
      proxy_url: "ftp://proxy",
      s3_output_path: "../etc",
      http_timeout: 5,
      api_base_url: "file:///etc/passwd",
      training_model: "acme/trainer",
      training_destination: "not a model",
      hardware: "../gpu",
      // The service's own credentials are never a provider's token (it would send them to api_base_url).
      api_token_secret: "LIBSQL_AUTH_TOKEN",
    });
    expect(bad.status).toBe(422);
    expect(bad.body.errors.map((e: any) => e.path)).toEqual([
      "webhook_allowed_ips.1",
      "webhook_allowed_ips.2",
      "s3_output_path",
      "api_base_url",
      "proxy_url",
      "training_model",
      "training_destination",
      "hardware",
      "api_token_secret",
    ]);
    expect(bad.body.detail).toContain('"10.0.0.0/33" is not a valid CIDR range');
    expect(bad.body.detail).toContain('"not-an-ip" is not a valid IP address or CIDR range');
    expect((await put({ http_timeout: 0 })).status).toBe(422);
    expect((await put({ surprise: true })).status).toBe(422);
    expect((await settings()).updated_at).toBeNull();
  });

  it("saves a partial update, keeps the other fields, and null restores a default", async () => {
    const saved = await put({
      http_timeout: 12,
      s3_endpoint_enabled: true,
      s3_output_path: "results/cloud",
      proxy_url: "http://user:hunter2@proxy.example.com:3128",
    });
    expect(saved.status).toBe(200);
    expect(saved.body).toMatchObject({
      http_timeout: 12,
      s3_endpoint_enabled: true,
      s3_output_path: "results/cloud",
      proxy_url: "http://user:***@proxy.example.com:3128/",
      ssl_verify: true,
    });
    expect(JSON.stringify(await settings())).not.toContain("hunter2");
    const again = await put({ http_timeout: null });
    expect(again.body).toMatchObject({ http_timeout: 30, s3_endpoint_enabled: true, s3_output_path: "results/cloud" });
    const entry = await eventuallyAudited(
      "provider_settings_changed",
      (e) => "http_timeout" in e.details.changed && e.details.changed.http_timeout.to === 12,
    );
    expect(entry.target).toBe("replicate");
    expect(JSON.stringify(await auditEntries("provider_settings_changed"))).not.toContain("hunter2");
  });

  it("keeps manually configured storage credentials: the key id shown, the secret never (not in answers, not in the audit trail)", async () => {
    const halfway = await put({ s3_access_key_id: "MANUALKEY0000000001" });
    expect(halfway.status).toBe(422);
    expect(halfway.body.detail).toContain("s3_access_key_id and s3_secret_access_key are set (or cleared with null) together");
    const tokenShaped = await put({ s3_access_key_id: "STU00000000000000000001", s3_secret_access_key: "manual-secret-0123456789" });
    expect(tokenShaped.body.errors.map((e: any) => e.path)).toEqual(["s3_access_key_id"]);
    const saved = await put({ s3_access_key_id: "MANUALKEY0000000001", s3_secret_access_key: "manual-secret-0123456789" });
    expect(saved.status).toBe(200);
    expect(saved.body).toMatchObject({ s3_access_key_id: "MANUALKEY0000000001", s3_secret_access_key_set: true });
    expect(JSON.stringify(await settings())).not.toContain("manual-secret");
    await eventuallyAudited("provider_settings_changed", (e) => "s3_access_key_id" in e.details.changed);
    expect(JSON.stringify(await auditEntries("provider_settings_changed"))).not.toContain("manual-secret");
    const cleared = await put({ s3_access_key_id: null, s3_secret_access_key: null });
    expect(cleared.body).toMatchObject({ s3_access_key_id: null, s3_secret_access_key_set: false });
  });

  it("takes a CA bundle's absolute path, and refuses a device, a kernel file, a relative path or a way around (422, nothing saved)", async () => {
    const saved = await put({ ssl_ca_bundle: "/etc/ssl/certs/internal-ca.pem" });
    expect(saved.status).toBe(200);
    expect(saved.body.ssl_ca_bundle).toBe("/etc/ssl/certs/internal-ca.pem");
    for (const path of [
      "/dev/zero",
      "/dev/stdin",
      "//dev//urandom",
      "/proc/self/environ",
      "/sys",
      "/etc/../dev/zero",
      "./ca.pem",
      "ca.pem",
    ]) {
      const refused = await put({ ssl_ca_bundle: path });
      expect(refused.status, path).toBe(422);
      expect(refused.body.errors).toEqual([
        {
          path: "ssl_ca_bundle",
          message: `must be the absolute path of a PEM file of CA certificates, without "." or ".." parts and not under /dev, /proc or /sys, not ${JSON.stringify(path)}`,
        },
      ]);
    }
    expect((await settings()).ssl_ca_bundle).toBe("/etc/ssl/certs/internal-ca.pem");
    expect((await put({ ssl_ca_bundle: null })).body.ssl_ca_bundle).toBeNull();
  });

  it("turns certificate verification off only with confirm_insecure", async () => {
    const unconfirmed = await put({ ssl_verify: false });
    expect(unconfirmed.status).toBe(422);
    expect(unconfirmed.body.detail).toContain("confirm_insecure: true");
    expect((await put({ ssl_verify: false, confirm_insecure: true })).body.ssl_verify).toBe(false);
    expect((await put({ ssl_verify: true })).body.ssl_verify).toBe(true);
  });
});

describe("POST /api/webhooks/{provider}", () => {
  it("refuses every webhook while the provider has no signing secret (401, audited), storing nothing", async () => {
    const before = (await t.call("GET", "/api/cloud/providers/replicate/webhooks?limit=500", { auth: { key: admin.key } })).body.events;
    const refused = await hook("198.51.100.70", JSON.stringify({ id: "pred-0", status: "succeeded" }), { "webhook-id": "msg-unset" });
    expect(refused.status).toBe(401);
    expect(refused.body).toEqual({
      code: "webhook_secret_not_set",
      detail:
        'Webhooks for replicate are refused: they cannot be authenticated until an admin sets its signing secret (PUT /api/cloud/providers/replicate {"webhook_secret": "whsec_..."}) or explicitly allows unsigned ones ({"webhook_allow_unsigned": true})',
    });
    await eventuallyAudited("webhook_rejected", (e) => e.client_ip === "198.51.100.70" && e.details.reason === "webhook_secret_not_set");
    expect((await t.call("GET", "/api/cloud/providers/replicate/webhooks?limit=500", { auth: { key: admin.key } })).body.events).toEqual(
      before,
    );
  });

  it("accepts from any address while the allowlist is empty once an admin allows unsigned webhooks, and records the payload", async () => {
    expect((await put({ webhook_allow_unsigned: true })).body.webhook_allow_unsigned).toBe(true);
    const body = JSON.stringify({ id: "pred-1", status: "processing" });
    const sent = await hook("198.51.100.7", body, { "webhook-id": "msg-open-1" });
    expect(sent.status).toBe(202);
    expect(sent.body).toMatchObject({ received: true, duplicate: false });
    const listed = await t.call("GET", "/api/cloud/providers/replicate/webhooks", { auth: { key: admin.key } });
    expect(listed.body.events[0]).toMatchObject({
      id: sent.body.id,
      webhook_id: "msg-open-1",
      client_ip: "198.51.100.7",
      signed: false,
      signature: "unsigned",
      provider_job_id: "pred-1",
      status: "processing",
      event: "update",
      body_bytes: body.length,
      payload: { id: "pred-1", status: "processing" },
      omitted: {},
      processed: false,
      processed_at: null,
    });
  });

  it("with an allowlist: accepts inside IPv4 and IPv6 ranges and single addresses, refuses (403, audited) outside", async () => {
    expect((await put({ webhook_allowed_ips: ["203.0.113.0/24", "2001:db8::/32", "192.0.2.10"] })).status).toBe(200);
    const body = JSON.stringify({ id: "pred-2", status: "succeeded" });
    expect((await hook("203.0.113.200", body)).status).toBe(202);
    expect((await hook("2001:db8:1::5", body)).status).toBe(202);
    expect((await hook("192.0.2.10", body)).status).toBe(202);
    for (const outside of ["203.0.114.1", "192.0.2.11", "2001:db9::1"]) {
      const refused = await hook(outside, body, { "user-agent": "replicate-webhooks/1" });
      expect(refused.status).toBe(403);
      expect(refused.body.detail).toBe(
        `Webhooks for replicate are not accepted from ${outside}: it is outside the provider's webhook_allowed_ips`,
      );
      const entry = await eventuallyAudited("webhook_rejected", (e) => e.client_ip === outside);
      expect(entry).toMatchObject({
        target: "replicate",
        user_agent: "replicate-webhooks/1",
        details: { reason: "address_not_allowed", path: "/api/webhooks/replicate" },
      });
    }
    expect((await put({ webhook_allowed_ips: null })).body.webhook_allowed_ips).toEqual([]);
  });

  it("with a secret: needs a valid Standard Webhooks signature (401, audited) and records a retry once", async () => {
    const saved = await put({ webhook_secret: SECRET });
    expect(saved.body.webhook_secret_set).toBe(true);
    expect(JSON.stringify(saved.body)).not.toContain(SECRET);
    const body = JSON.stringify({ id: "pred-3", status: "succeeded", metrics: { predict_time: 12.5 } });

    const unsigned = await hook("198.51.100.8", body, { "webhook-id": "msg-3" });
    expect(unsigned.status).toBe(401);
    await eventuallyAudited("webhook_rejected", (e) => e.client_ip === "198.51.100.8" && e.details.reason === "bad_signature");
    const forged = new Webhook(`whsec_${Buffer.from("some other secret value").toString("base64")}`).sign("msg-3", new Date(), body);
    expect(
      (
        await hook("198.51.100.8", body, {
          "webhook-id": "msg-3",
          "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
          "webhook-signature": forged,
        })
      ).status,
    ).toBe(401);

    const now = new Date();
    const headers = {
      "webhook-id": "msg-3",
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": new Webhook(SECRET).sign("msg-3", now, body),
    };
    const first = await hook("198.51.100.8", body, headers);
    expect(first.status).toBe(202);
    expect(first.body.duplicate).toBe(false);
    const retry = await hook("198.51.100.8", body, headers);
    expect(retry.body).toEqual({ received: true, id: first.body.id, duplicate: true });
    const tampered = await hook("198.51.100.8", body.replace("12.5", "0.1"), headers);
    expect(tampered.status).toBe(401);

    const listed = (await t.call("GET", "/api/cloud/providers/replicate/webhooks", { auth: { key: admin.key } })).body.events as any[];
    expect(listed.filter((e) => e.webhook_id === "msg-3")).toHaveLength(1);
    expect(listed[0]).toMatchObject({ webhook_id: "msg-3", signed: true });
    expect((await put({ webhook_secret: null })).body.webhook_secret_set).toBe(false);
  });

  it("never deduplicates unsigned deliveries, so one cannot claim the webhook-id of a genuine signed one", async () => {
    const body = JSON.stringify({ id: "pred-4", status: "succeeded" });
    const forged = await hook("198.51.100.12", JSON.stringify({ id: "pred-4", status: "failed" }), { "webhook-id": "msg-4" });
    expect(forged.status).toBe(202);
    const again = await hook("198.51.100.12", JSON.stringify({ id: "pred-4", status: "failed" }), { "webhook-id": "msg-4" });
    expect(again.body).toMatchObject({ received: true, duplicate: false });
    expect(again.body.id).not.toBe(forged.body.id);

    expect((await put({ webhook_secret: SECRET })).status).toBe(200);
    const now = new Date();
    const headers = {
      "webhook-id": "msg-4",
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": new Webhook(SECRET).sign("msg-4", now, body),
    };
    const genuine = await hook("198.51.100.8", body, headers);
    expect(genuine.status).toBe(202);
    expect(genuine.body.duplicate).toBe(false);
    const replayed = await hook("198.51.100.8", body, headers);
    expect(replayed.body).toEqual({ received: true, id: genuine.body.id, duplicate: true });
    const listed = (await t.call("GET", "/api/cloud/providers/replicate/webhooks", { auth: { key: admin.key } })).body.events as any[];
    expect(listed.filter((e) => e.webhook_id === "msg-4").map((e) => e.signed)).toEqual([true, false, false]);
    expect((await put({ webhook_secret: null })).body.webhook_secret_set).toBe(false);
  });

  it("answers an unknown provider 404, a non-object body 400 and an oversized body 413, storing nothing", async () => {
    const before = (await t.call("GET", "/api/cloud/providers/replicate/webhooks?limit=500", { auth: { key: admin.key } })).body.events
      .length;
    expect((await t.call("POST", "/api/webhooks/nosuch", { body: "{}", headers: { "content-type": "application/json" } })).status).toBe(
      404,
    );
    const notJson = await hook("198.51.100.9", "{not json");
    expect(notJson.status).toBe(400);
    expect(notJson.body.detail).toBe("The webhook body is not valid JSON");
    expect((await hook("198.51.100.9", "[1,2]")).status).toBe(400);
    const huge = await hook("198.51.100.9", JSON.stringify({ blob: "x".repeat(MAX_WEBHOOK_BYTES) }));
    expect(huge.status).toBe(413);
    expect(
      (await t.call("GET", "/api/cloud/providers/replicate/webhooks?limit=500", { auth: { key: admin.key } })).body.events.length,
    ).toBe(before);
  });
});
