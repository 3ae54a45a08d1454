// Issue 27 (items 2, 6 and 9) over real HTTP: what a provider's webhook body carries (a job's
// secrets in `input`, signed `urls`, megabytes of `logs`) is neither stored nor listed, only its
// sizes; an unsigned delivery while no secret is set is 401 (403 stays the allowlist's); the
// provider's outbound settings refuse loopback, private, link-local, metadata and local-name
// hosts unless an admin allows private targets, next to the allowed use; api_token_secret names
// only the provider's own token; and public answers carry none of the provider's words.
import { createClient } from "@libsql/client";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../edge/db/client";
import { listWebhooks, summariseStoredWebhooks } from "../../edge/cloud/webhook-intake";
import { openMigratedDb } from "../helpers/migrated-db";
import { setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

const TOKEN = "r8_provider-guards-token-0123456789";
const HF_TOKEN = "hf_NEVERSENTANYWHERE0123456789";
const SECRET = `whsec_${Buffer.from("provider guards webhook secret").toString("base64")}`;
// What a job puts in its training input: none of these may be stored or shown.
const SECRETS = {
  hf: "hf_JOBSECRETVALUE0123456789abcdef",
  awsKey: "AKIAJOBSECRET0000001",
  awsSecret: "aws/JOBSECRET+secretaccesskey0123456789",
  storage: "STU-storage-secret-0123456789",
  signedUrl: "sig=SIGNEDURLSECRET0123",
  stream: "STREAMTOKEN0123456789",
  output: "OUTPUTSIGNATURE0123456789",
  log: "LOG-LINE-WITH-hf_LEAKEDINLOGS0123",
};

let t: TestStack;
let admin: { key: string; cookie: string };
let provider: Server;
let providerUrl: string;
// What the stand-in provider answers on /v1/account, and the Authorization headers it saw.
let accountMode: "ok" | "fail" = "ok";
const authorizations: string[] = [];

const put = (body: Record<string, unknown>) => t.call("PUT", "/api/cloud/providers/replicate", { json: body, auth: { key: admin.key } });
const settings = async () => (await t.call("GET", "/api/cloud/providers/replicate", { auth: { key: admin.key } })).body;
const listing = () => t.call("GET", "/api/cloud/providers/replicate/webhooks?limit=500", { auth: { key: admin.key } });
const hook = (body: string, headers: Record<string, string> = {}) =>
  t.call("POST", "/api/webhooks/replicate", {
    body,
    headers: { "content-type": "application/json", "x-forwarded-for": "198.51.100.40", ...headers },
  });
const signed = (id: string, body: string) => {
  const now = new Date();
  return {
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
    "webhook-signature": new Webhook(SECRET).sign(id, now, body),
  };
};
const storedRows = async () => {
  const client = createClient({ url: `file:${join(t.dataDir, "service.db")}` });
  try {
    return (await client.execute("SELECT payload FROM provider_webhook_events")).rows.map((r) => String(r.payload));
  } finally {
    client.close();
  }
};
const expectNoSecret = (text: string) => {
  for (const value of Object.values(SECRETS)) expect(text).not.toContain(value);
};

/** A Replicate training as its webhooks carry it: the whole object, `input` included. */
function training(status: string, logs: string) {
  return {
    id: "tr-guards-1",
    model: "acme/trainer",
    version: "0123456789abcdef",
    status,
    input: {
      dataset_archive: `https://api.replicate.com/v1/files/abc?${SECRETS.signedUrl}`,
      env: { HF_TOKEN: SECRETS.hf, AWS_ACCESS_KEY_ID: SECRETS.awsKey, AWS_SECRET_ACCESS_KEY: SECRETS.awsSecret },
      storage_secret_access_key: SECRETS.storage,
    },
    logs,
    output:
      status === "succeeded" ? { version: "acme/faces:abc", weights: `https://replicate.delivery/w.tar?X-Sig=${SECRETS.output}` } : null,
    error: null,
    urls: {
      get: "https://api.replicate.com/v1/trainings/tr-guards-1",
      cancel: "https://api.replicate.com/v1/trainings/tr-guards-1/cancel",
      stream: `https://stream.replicate.com/v1/streams/x?token=${SECRETS.stream}`,
    },
    metrics: { predict_time: 12.5, note: "text is not kept" },
    created_at: "2026-11-27T10:00:00.000Z",
    started_at: "2026-11-27T10:00:05.000Z",
    completed_at: status === "succeeded" ? "2026-11-27T10:10:00.000Z" : null,
  };
}

beforeAll(async () => {
  provider = createServer((req, res) => {
    authorizations.push(String(req.headers.authorization ?? ""));
    if (req.url === "/v1/account" && accountMode === "ok") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ type: "organization", username: "acct-private-7f3", name: "Private Org" }));
      return;
    }
    res.writeHead(500, { "content-type": "text/plain" });
    res.end("PROVIDER-INTERNAL-DETAIL: upstream db-7.internal refused the connection");
  }).listen(0, "127.0.0.1");
  await new Promise((r) => provider.once("listening", r));
  providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
  t = await startTestStack(undefined, { REPLICATE_API_TOKEN: TOKEN, HF_TOKEN });
  admin = await setUpAdmin(t);
  expect((await put({ training_model: "acme/trainer:0123456789abcdef" })).status).toBe(200);
});
afterAll(async () => {
  await t?.stop();
  provider?.close();
});

describe("provider webhooks are stored and listed without what the job put in them", () => {
  it("refuses an unsigned delivery while no secret is set with 401 webhook_secret_not_set, storing nothing", async () => {
    const forged = JSON.stringify(training("succeeded", SECRETS.log));
    const refused = await hook(forged, { "webhook-id": "msg-unsigned" });
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe("webhook_secret_not_set");
    expect(refused.body.detail).toContain("cannot be authenticated until an admin sets its signing secret");
    expect((await listing()).body.events).toEqual([]);
    expect(await storedRows()).toEqual([]);
  });

  it("keeps id, status, event, signature verdict and sizes of a signed delivery; never input, urls, logs or output", async () => {
    expect((await put({ webhook_secret: SECRET })).status).toBe(200);
    // A running update, and a completed one with a cumulative log past a megabyte (taken, not
    // refused 413, so the job does not wait for a poll): kept by size only.
    const running = JSON.stringify(training("processing", `step 1\n${SECRETS.log}\n`));
    const bigLogs = `${SECRETS.log}\n${"step 2 loss 0.1234\n".repeat(80_000)}`;
    const completed = JSON.stringify(training("succeeded", bigLogs));
    expect(completed.length).toBeGreaterThan(1024 * 1024);
    const first = await hook(running, signed("msg-guards-1", running));
    expect(first.status).toBe(202);
    const second = await hook(completed, signed("msg-guards-2", completed));
    expect(second.status).toBe(202);

    const listed = await listing();
    expect(listed.status).toBe(200);
    const [last, earlier] = listed.body.events as any[];
    expect(last).toMatchObject({
      id: second.body.id,
      webhook_id: "msg-guards-2",
      signed: true,
      signature: "verified",
      provider_job_id: "tr-guards-1",
      status: "succeeded",
      event: "completed",
      body_bytes: Buffer.byteLength(completed),
      processed: false,
      payload: {
        id: "tr-guards-1",
        model: "acme/trainer",
        version: "0123456789abcdef",
        status: "succeeded",
        error: null,
        metrics: { predict_time: 12.5 },
        completed_at: "2026-11-27T10:10:00.000Z",
      },
      omitted: {
        input: Buffer.byteLength(JSON.stringify(training("succeeded", "").input)),
        logs: Buffer.byteLength(JSON.stringify(bigLogs)),
        output: expect.any(Number),
        urls: expect.any(Number),
      },
    });
    expect(Object.keys(last.payload)).not.toContain("input");
    expect(earlier).toMatchObject({ webhook_id: "msg-guards-1", status: "processing", event: "update", signature: "verified" });
    expectNoSecret(listed.text);
    expect(listed.text).not.toContain("loss 0.1234");

    // The database holds the same summaries: small, and none of the secrets.
    const rows = await storedRows();
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      expectNoSecret(row);
      expect(row.length).toBeLessThan(4096);
    }
    expect((await put({ webhook_secret: null })).status).toBe(200);
  });

  it("rewrites rows an earlier version stored whole, and lists them summarised meanwhile", async () => {
    const migrated = await openMigratedDb();
    try {
      const db = { $client: migrated.client } as unknown as Database;
      const raw = JSON.stringify(training("processing", SECRETS.log));
      await migrated.client.execute({
        sql: "INSERT INTO provider_webhook_events (provider, webhook_id, received_at, client_ip, signed, payload) VALUES ('replicate', 'old-1', ?, '198.51.100.1', 1, ?)",
        args: [new Date().toISOString(), raw],
      });
      const [listed] = await listWebhooks(db, "replicate", 10);
      expect(listed).toMatchObject({ provider_job_id: "tr-guards-1", status: "processing", body_bytes: Buffer.byteLength(raw) });
      expectNoSecret(JSON.stringify(listed));
      expect(await summariseStoredWebhooks(db)).toBe(1);
      expect(await summariseStoredWebhooks(db)).toBe(0);
      const stored = String((await migrated.client.execute("SELECT payload FROM provider_webhook_events")).rows[0]!.payload);
      expectNoSecret(stored);
      expect((await listWebhooks(db, "replicate", 10))[0]).toEqual(listed);
    } finally {
      migrated.close();
    }
  });
});

describe("outbound provider settings are guarded like webhook targets", () => {
  it("refuses loopback, private, link-local, metadata and local-name API roots and proxies (422 saying why), changing nothing", async () => {
    const before = await settings();
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ api_base_url: "https://127.0.0.1:8443" }, "api_base_url", /^127\.0\.0\.1 is a loopback, private or reserved address; /],
      [{ api_base_url: "https://10.1.2.3" }, "api_base_url", /^10\.1\.2\.3 is a loopback, private or reserved address; /],
      [{ api_base_url: "https://169.254.169.254/latest" }, "api_base_url", /^169\.254\.169\.254 is a loopback, private/],
      [{ api_base_url: "https://[::ffff:169.254.169.254]" }, "api_base_url", /is a loopback, private or reserved address/],
      [{ api_base_url: "https://[::1]" }, "api_base_url", /^::1 is a loopback, private or reserved address/],
      // Names that resolve to this machine or an inside network by definition.
      [{ api_base_url: "https://localhost:8443" }, "api_base_url", /^localhost is a local name; /],
      [{ api_base_url: "https://api.localhost" }, "api_base_url", /^api\.localhost is a local name; /],
      [{ api_base_url: "https://metadata.google.internal" }, "api_base_url", /^metadata\.google\.internal is a local name; /],
      [{ api_base_url: "https://2130706433" }, "api_base_url", /^127\.0\.0\.1 is a loopback/],
      [{ api_base_url: "http://api.example.com" }, "api_base_url", /^must be an https URL \(the API token is sent to it\)/],
      [{ proxy_url: "http://10.0.0.5:3128" }, "proxy_url", /^10\.0\.0\.5 is a loopback, private or reserved address; /],
      [{ proxy_url: "http://user:pw@127.0.0.1:3128" }, "proxy_url", /^127\.0\.0\.1 is a loopback/],
      [{ proxy_url: "http://169.254.169.254" }, "proxy_url", /^169\.254\.169\.254 is a loopback/],
    ];
    for (const [update, path, message] of cases) {
      const refused = await put(update);
      expect(refused.status, JSON.stringify(update)).toBe(422);
      expect(refused.body.errors, JSON.stringify(update)).toEqual([{ path, message: expect.stringMatching(message) }]);
      if (!/https URL/.test(String(message)))
        expect(refused.body.errors[0].message).toMatch(
          /an admin allows private targets for this provider with "allow_private_targets": true/,
        );
    }
    expect(await settings()).toEqual(before);
  });

  it("takes a public https API root, and a private one only with allow_private_targets (which cannot then be turned off under it)", async () => {
    expect((await put({ api_base_url: "https://replicate-proxy.example.com" })).body.api_base_url).toBe(
      "https://replicate-proxy.example.com",
    );
    const allowed = await put({ api_base_url: providerUrl, allow_private_targets: true, proxy_url: "http://10.0.0.5:3128" });
    expect(allowed.status).toBe(200);
    expect(allowed.body).toMatchObject({ api_base_url: providerUrl, allow_private_targets: true, proxy_url: "http://10.0.0.5:3128" });
    const off = await put({ allow_private_targets: false });
    expect(off.status).toBe(422);
    expect(off.body.errors.map((e: any) => e.path)).toEqual(["api_base_url", "proxy_url"]);
    expect((await settings()).allow_private_targets).toBe(true);
    expect((await put({ proxy_url: null })).status).toBe(200);
  });

  it("reads the API token only from a secret of the provider: HF_TOKEN and the like are refused and never sent", async () => {
    for (const name of [
      "HF_TOKEN",
      "AWS_SECRET_ACCESS_KEY",
      "LIBSQL_AUTH_TOKEN",
      "PUBLISH_S3_SECRET_ACCESS_KEY",
      "REPLICATE_WEBHOOK_SECRET",
    ]) {
      const refused = await put({ api_token_secret: name });
      expect(refused.status, name).toBe(422);
      expect(
        refused.body.errors.map((e: any) => e.path),
        name,
      ).toEqual(["api_token_secret"]);
    }
    expect((await put({ api_token_secret: "HF_TOKEN" })).body.detail).toContain(
      "must name a replicate token secret: a name starting with REPLICATE_ that contains TOKEN (like REPLICATE_API_TOKEN), not HF_TOKEN",
    );
    expect((await put({ api_token_secret: "REPLICATE_API_TOKEN_STAGING" })).body.api_token_secret).toBe("REPLICATE_API_TOKEN_STAGING");
    expect((await put({ api_token_secret: null })).body.api_token_secret).toBe("REPLICATE_API_TOKEN");
    // The provider is asked with its own token (the API root is the stand-in now), never with HF_TOKEN.
    await t.call("GET", "/api/cloud/health?include_providers=true");
    expect(authorizations).toContain(`Bearer ${TOKEN}`);
    expect(authorizations.some((a) => a.includes(HF_TOKEN))).toBe(false);
  });
});

describe("public answers carry none of the provider's words", () => {
  it("says valid or not and the latency in public; the provider's answer only to admins", async () => {
    accountMode = "ok";
    expect((await put({ api_base_url: providerUrl, allow_private_targets: true, http_timeout: 5 })).status).toBe(200);
    const health = await t.call("GET", "/api/cloud/health?include_providers=true");
    expect(health.body.providers.find((p: any) => p.name === "replicate")).toEqual({
      name: "replicate",
      status: "healthy",
      latency_ms: expect.any(Number),
      message: "credentials accepted",
    });
    const list = await t.call("GET", "/api/cloud/providers");
    expect(list.body.providers[0].credentials).toMatchObject({ valid: true, message: "credentials accepted" });
    for (const text of [health.text, list.text]) expect(text).not.toContain("acct-private-7f3");
    expect((await settings()).credentials).toMatchObject({ valid: true, message: expect.stringContaining("acct-private-7f3") });
    expect(authorizations.at(-1)).toBe(`Bearer ${TOKEN}`);

    // The provider fails: a settings change forgets the last check, and the next one asks again.
    accountMode = "fail";
    expect((await put({ http_timeout: 6 })).status).toBe(200);
    const failing = await t.call("GET", "/api/cloud/health?include_providers=true");
    expect(failing.body.providers.find((p: any) => p.name === "replicate")).toEqual({
      name: "replicate",
      status: "degraded",
      latency_ms: expect.any(Number),
      message: "credentials not valid; an admin sees why at GET /api/cloud/providers/replicate",
    });
    const publicList = await t.call("GET", "/api/cloud/providers");
    for (const text of [failing.text, publicList.text]) {
      expect(text).not.toContain("PROVIDER-INTERNAL-DETAIL");
      expect(text).not.toContain("db-7.internal");
    }
    const detail = (await settings()).credentials;
    expect(detail.valid).toBe(false);
    expect(detail.message).not.toBe("credentials not valid; an admin sees why at GET /api/cloud/providers/replicate");
  });
});
