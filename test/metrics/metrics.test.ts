// Prometheus metrics over real HTTP: configuration, templates, preview, the
// scrape's access rules, figures read from where they live, and promtool's verdict.
import { spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUserWithKey, setUpAdmin, startTestStack, type Credentials, type TestStack } from "../helpers/stack";
import { prerequisite } from "../helpers/prerequisites";

const SCRAPE_TOKEN = "scrape-token-for-tests-0123456789abcdef";
// Counted loopback clients (development exempts them otherwise) and a default rule too high to
// refuse this file's own polling: only the login rule (5 a minute) refuses anything here.
const BINDINGS = { METRICS_SCRAPE_TOKEN: SCRAPE_TOKEN, RATE_LIMIT_LOOPBACK: "1", RATE_LIMIT_CALLS: "100000" };

// The published families by category (the API document's "Metrics" table), written out here
// rather than imported: the test checks the code against it.
const SPEC_FAMILIES: Record<string, string[]> = {
  jobs: [
    "service_jobs_total",
    "service_jobs_by_status",
    "service_jobs_active",
    "service_cost_usd_total",
    "service_job_duration_seconds_avg",
  ],
  http: ["service_http_requests_total", "service_http_errors_total", "service_http_request_latency_ms_avg"],
  rate_limits: ["service_rate_limit_violations_total", "service_rate_limit_tracked_clients"],
  approvals: ["service_approval_requests_pending", "service_approval_requests_by_status"],
  audit: ["service_audit_log_entries_total", "service_audit_log_entries_24h"],
  health: ["service_uptime_seconds", "service_health_database_latency_ms"],
  circuit_breakers: ["service_circuit_breaker_state", "service_circuit_breaker_failures_total"],
  provider: ["service_cost_limit_percent_used", "service_credit_balance_usd"],
};
const TEMPLATES: Record<string, string[]> = {
  minimal: ["jobs"],
  standard: ["jobs", "http", "health"],
  security: ["jobs", "http", "rate_limits", "approvals", "audit"],
  full: Object.keys(SPEC_FAMILIES),
};
const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

let t: TestStack;
let admin: { key: string; cookie: string };
let viewer: { key: string };
const asAdmin: Credentials = {};

/** The families a text exposition announces (its `# TYPE` lines), sorted. */
const familiesOf = (text: string) => [...text.matchAll(/^# TYPE (\S+) (counter|gauge)$/gm)].map((m) => m[1]!).sort();
const familiesFor = (categories: string[]) => categories.flatMap((c) => SPEC_FAMILIES[c]!).sort();

/** One sample's value: `name` or `name{label="value"}` exactly as written, undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const scrape = (auth: Credentials = asAdmin) => t.call("GET", "/api/cloud/metrics/prometheus", { auth });
const configure = (json: unknown) => t.call("PUT", "/api/cloud/metrics/config", { json, auth: asAdmin });
const preview = (query: string) => t.call("GET", `/api/cloud/metrics/config/preview${query}`, { auth: asAdmin });

/** Scrapes (preview of `categories`) until `check` holds; HTTP figures reach the collector within about a second. */
async function eventually(categories: string, check: (text: string) => boolean): Promise<string> {
  const deadline = Date.now() + 8_000;
  for (;;) {
    const reply = await preview(`?categories=${categories}`);
    expect(reply.status).toBe(200);
    if (check(reply.text)) return reply.text;
    if (Date.now() > deadline) throw new Error(`metrics never matched; last scrape:\n${reply.text}`);
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
}

beforeAll(async () => {
  t = await startTestStack(undefined, BINDINGS);
  admin = await setUpAdmin(t);
  asAdmin.key = admin.key;
  viewer = await createUserWithKey(t, { cookie: admin.cookie }, "viewer");
});
afterAll(async () => {
  await t?.stop();
});

describe("configuration", () => {
  it("starts disabled with the standard template's categories, and the disabled scrape answers 404 metrics_disabled", async () => {
    expect((await t.call("GET", "/api/cloud/metrics/config", { auth: asAdmin })).body).toEqual({
      prometheus_enabled: false,
      prometheus_categories: ["jobs", "http", "health"],
    });
    const disabled = await scrape();
    expect(disabled.status).toBe(404);
    expect(disabled.body).toEqual({
      code: "metrics_disabled",
      detail: 'Prometheus export is disabled: enable it with PUT /api/cloud/metrics/config {"prometheus_enabled": true}',
    });
  });

  it("previews any categories while disabled, in the scrape's format, without changing the configuration", async () => {
    const before = (await t.call("GET", "/api/cloud/metrics/config", { auth: asAdmin })).body;
    const reply = await preview("?categories=audit&categories=approvals");
    expect(reply.status).toBe(200);
    expect(reply.headers.get("content-type")).toBe(CONTENT_TYPE);
    expect(familiesOf(reply.text)).toEqual(familiesFor(["audit", "approvals"]));
    expect(familiesOf((await preview("?categories=provider,health")).text)).toEqual(familiesFor(["provider", "health"]));
    // No categories: the configured ones.
    expect(familiesOf((await preview("")).text)).toEqual(familiesFor(["jobs", "http", "health"]));
    expect((await t.call("GET", "/api/cloud/metrics/config", { auth: asAdmin })).body).toEqual(before);
    expect((await scrape()).status).toBe(404);
  });

  it("refuses an unknown category in a preview with 422 naming it", async () => {
    const reply = await preview("?categories=jobs&categories=gpus");
    expect(reply.status).toBe(422);
    expect(reply.body.errors).toEqual([
      {
        path: "query.categories.1",
        message:
          'unknown metrics category "gpus": use one of jobs, http, rate_limits, approvals, audit, health, circuit_breakers, provider',
      },
    ]);
  });

  it("saves a configuration, dropping duplicates into exposition order, and keeps a field left out", async () => {
    const saved = await configure({ prometheus_categories: ["health", "jobs", "health"] });
    expect(saved.status).toBe(200);
    expect(saved.body).toEqual({ prometheus_enabled: false, prometheus_categories: ["jobs", "health"] });
    expect((await configure({ prometheus_enabled: true })).body).toEqual({
      prometheus_enabled: true,
      prometheus_categories: ["jobs", "health"],
    });
    const scraped = await scrape();
    expect(scraped.status).toBe(200);
    expect(scraped.headers.get("content-type")).toBe(CONTENT_TYPE);
    expect(familiesOf(scraped.text)).toEqual(familiesFor(["jobs", "health"]));
    expect(scraped.text.endsWith("\n")).toBe(true);
  });

  it("changes nothing on bad input: an unknown category is a 422 naming it, an unknown field too", async () => {
    const before = (await t.call("GET", "/api/cloud/metrics/config", { auth: asAdmin })).body;
    const unknown = await configure({ prometheus_enabled: false, prometheus_categories: ["jobs", "bogus"] });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail).toContain('unknown metrics category "bogus"');
    expect(unknown.body.errors[0].path).toBe("body.prometheus_categories.1");
    const extra = await configure({ prometheus_enabled: false, interval: 5 });
    expect(extra.status).toBe(422);
    expect((await configure({ prometheus_enabled: "yes" })).status).toBe(422);
    expect((await t.call("GET", "/api/cloud/metrics/config", { auth: asAdmin })).body).toEqual(before);
  });

  it.each(Object.entries(TEMPLATES))(
    "applies the %s template: exactly its categories' families are scraped",
    async (template, categories) => {
      const applied = await t.call("POST", `/api/cloud/metrics/config/templates/${template}`, { auth: asAdmin });
      expect(applied.status).toBe(200);
      expect(applied.body).toEqual({
        prometheus_enabled: true,
        prometheus_categories: Object.keys(SPEC_FAMILIES).filter((c) => categories.includes(c)),
      });
      const scraped = await scrape();
      expect(scraped.status).toBe(200);
      expect(familiesOf(scraped.text)).toEqual(familiesFor(categories));
    },
  );

  it("refuses an unknown template with 422 naming the four", async () => {
    const reply = await t.call("POST", "/api/cloud/metrics/config/templates/everything", { auth: asAdmin });
    expect(reply.status).toBe(422);
    expect(reply.body.errors).toEqual([
      { path: "param.template", message: 'unknown metrics template "everything": use one of minimal, standard, security, full' },
    ]);
  });

  it("records each change in the audit trail as metrics_config_changed", async () => {
    await t.call("POST", "/api/cloud/metrics/config/templates/minimal", { auth: asAdmin });
    // Entries are written after each answer, each on the chain's tail: waited for until all seven are there, and
    // found by what they say rather than by their order (two written at once may take the tail either way).
    const deadline = Date.now() + 10_000;
    let entries: any[] = [];
    while (Date.now() < deadline) {
      entries = (await t.call("GET", "/api/audit?event_type=metrics_config_changed&limit=100", { auth: asAdmin })).body.entries;
      if (entries.length >= 7) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // Two PUTs and five template applications above (the refused ones record nothing).
    expect(entries).toHaveLength(7);
    expect(entries.find((e) => e.details.template === "minimal")).toMatchObject({
      actor: "admin",
      target: "metrics",
      details: { template: "minimal", changed: { prometheus_categories: { from: TEMPLATES.full, to: ["jobs"] } } },
    });
    expect(entries.filter((e) => e.details.template === undefined)).toContainEqual(
      expect.objectContaining({
        details: expect.objectContaining({
          changed: { prometheus_categories: { from: ["jobs", "http", "health"], to: ["jobs", "health"] } },
        }),
      }),
    );
  });
});

describe("access", () => {
  it("refuses the scrape and the configuration without a credential (401) and to a viewer (403)", async () => {
    expect((await scrape({})).status).toBe(401);
    expect((await scrape({ key: viewer.key })).body.code).toBe("forbidden");
    expect(
      (await t.call("PUT", "/api/cloud/metrics/config", { json: { prometheus_enabled: false }, auth: { key: viewer.key } })).status,
    ).toBe(403);
    expect((await t.call("GET", "/api/cloud/metrics/config/preview", { auth: { key: viewer.key } })).status).toBe(403);
  });

  it("lets the scrape token scrape, and nothing else; a wrong token is refused", async () => {
    const scraped = await scrape({ bearer: SCRAPE_TOKEN });
    expect(scraped.status).toBe(200);
    expect(familiesOf(scraped.text)).toEqual(familiesFor(["jobs"]));
    const wrong = await scrape({ bearer: `${SCRAPE_TOKEN}x` });
    expect(wrong.status).toBe(401);
    expect(wrong.body.code).toBe("invalid_api_key");
    expect((await t.call("GET", "/api/cloud/metrics/config", { auth: { bearer: SCRAPE_TOKEN } })).status).toBe(401);
    expect(
      (await t.call("PUT", "/api/cloud/metrics/config", { json: { prometheus_enabled: false }, auth: { bearer: SCRAPE_TOKEN } })).status,
    ).toBe(401);
  });

  it("also lets an admin's session scrape", async () => {
    expect((await scrape({ cookie: admin.cookie })).status).toBe(200);
  });
});

describe("figures", () => {
  let blockedJob: string;
  let cancelledJob: string;

  beforeAll(async () => {
    for (const [name, gpus] of [
      ["one-gpu", 1],
      ["two-gpu", 2],
    ] as const) {
      expect(
        (await t.call("POST", "/api/configs/environments", { json: { name, model_family: "flux", model_type: "lora" }, auth: asAdmin }))
          .status,
      ).toBe(201);
      expect(
        (
          await t.call("PUT", `/api/configs/${name}`, {
            json: { config: { "--model_family": "flux", "--num_processes": gpus } },
            auth: asAdmin,
          })
        ).status,
      ).toBe(200);
    }
    expect((await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 1 }, auth: asAdmin })).status).toBe(200);
    const blocked = await t.call("POST", "/api/queue/submit", { json: { config_name: "two-gpu", target: "local" }, auth: asAdmin });
    expect(blocked.body.status).toBe("blocked");
    blockedJob = blocked.body.job_id;
    const queued = await t.call("POST", "/api/queue/submit", { json: { config_name: "one-gpu", target: "local" }, auth: asAdmin });
    expect(queued.body.status).toBe("queued");
    cancelledJob = queued.body.job_id;
    expect((await t.call("POST", `/api/queue/${cancelledJob}/cancel`, { auth: asAdmin })).status).toBe(200);
  });

  it("counts jobs and approvals from the queue", async () => {
    const text = (await preview("?categories=jobs&categories=approvals")).text;
    expect(sample(text, "service_jobs_total")).toBe(2);
    expect(sample(text, "service_jobs_active")).toBe(1);
    expect(sample(text, 'service_jobs_by_status{status="blocked"}')).toBe(1);
    expect(sample(text, 'service_jobs_by_status{status="cancelled"}')).toBe(1);
    expect(sample(text, 'service_jobs_by_status{status="pending"}')).toBe(0);
    expect(sample(text, "service_cost_usd_total")).toBe(0);
    expect(sample(text, "service_job_duration_seconds_avg")).toBe(0);
    expect(sample(text, "service_approval_requests_pending")).toBe(1);
    expect(sample(text, 'service_approval_requests_by_status{status="pending"}')).toBe(1);
    expect(sample(text, 'service_approval_requests_by_status{status="approved"}')).toBe(0);
  });

  it("counts HTTP requests by route pattern, never by raw id, with the error label METHOD_path_status", async () => {
    for (let i = 0; i < 3; i++) expect((await t.call("GET", `/api/queue/position/${blockedJob}`, { auth: asAdmin })).status).toBe(200);
    expect((await t.call("GET", "/api/queue/position/no-such-job", { auth: asAdmin })).status).toBe(404);
    expect((await t.call("GET", "/api/no/such/route", { auth: asAdmin })).status).toBe(404);
    const text = await eventually(
      "http",
      (x) =>
        sample(x, 'service_http_requests_total{endpoint="GET_/api/queue/position/{job_id}"}') === 4 &&
        sample(x, 'service_http_requests_total{endpoint="GET_unmatched"}') !== undefined,
    );
    expect(sample(text, 'service_http_requests_total{endpoint="POST_/api/queue/{job_id}/cancel"}')).toBe(1);
    expect(sample(text, 'service_http_errors_total{endpoint_status="GET_/api/queue/position/{job_id}_404"}')).toBe(1);
    expect(sample(text, 'service_http_errors_total{endpoint_status="GET_unmatched_404"}')).toBe(1);
    expect(sample(text, 'service_http_requests_total{endpoint="GET_unmatched"}')).toBe(1);
    // Errors thrown by the authorisation middleware are counted with their status too.
    expect(sample(text, 'service_http_errors_total{endpoint_status="GET_/api/cloud/metrics/prometheus_401"}')).toBe(2);
    expect(sample(text, 'service_http_errors_total{endpoint_status="GET_/api/cloud/metrics/prometheus_403"}')).toBe(1);
    const latency = sample(text, 'service_http_request_latency_ms_avg{endpoint="GET_/api/queue/position/{job_id}"}');
    expect(latency).toBeGreaterThanOrEqual(0);
    expect(latency).toBeLessThan(10_000);
    expect(text).not.toContain(blockedJob);
    expect(text).not.toContain(cancelledJob);
  });

  it("counts storage endpoint requests by the endpoint's own bounded patterns, never by bucket or key", async () => {
    const reply = await t.call("GET", "/api/cloud/storage/metrics-bucket-7/deep/key.bin");
    expect([reply.status, reply.headers.get("content-type")]).toEqual([403, "application/xml"]);
    const series = 'service_http_errors_total{endpoint_status="GET_/api/cloud/storage/{bucket}/{key}_403"}';
    const text = await eventually("http", (x) => sample(x, series) !== undefined);
    expect(sample(text, series)).toBe(1);
    expect(text).not.toContain("metrics-bucket-7");
  });

  it("counts rate-limit refusals and the clients the limiter tracked", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++)
      statuses.push((await t.call("POST", "/api/cloud/auth/login", { json: { username: "nobody", password: "wrong-password" } })).status);
    const refused = statuses.filter((s) => s === 429).length;
    expect(refused).toBeGreaterThan(0);
    const text = await eventually("rate_limits&categories=http", (x) => sample(x, "service_rate_limit_violations_total") === refused);
    expect(sample(text, 'service_http_errors_total{endpoint_status="POST_/api/cloud/auth/login_429"}')).toBe(refused);
    // Every request of this file comes from 127.0.0.1.
    expect(sample(text, "service_rate_limit_tracked_clients")).toBe(1);
  });

  it("reports audit counts, uptime and the database's latency", async () => {
    const text = (await preview("?categories=audit&categories=health")).text;
    const audit = (await t.call("GET", "/api/audit?limit=1", { auth: asAdmin })).body.entries[0].id;
    expect(sample(text, "service_audit_log_entries_total")).toBeGreaterThanOrEqual(audit);
    expect(sample(text, "service_audit_log_entries_24h")).toBe(sample(text, "service_audit_log_entries_total"));
    expect(sample(text, "service_uptime_seconds")).toBeGreaterThan(0);
    expect(sample(text, "service_health_database_latency_ms")).toBeGreaterThanOrEqual(0);
  });

  it("reports each hosted provider's circuit breaker (closed, no failures yet), and spending figures only once a limit is set", async () => {
    const text = (await preview("?categories=circuit_breakers&categories=provider")).text;
    expect(text.split("\n").filter((line) => line && !line.startsWith("#"))).toEqual([
      'service_circuit_breaker_state{provider="replicate"} 0',
      'service_circuit_breaker_failures_total{provider="replicate"} 0',
    ]);
    expect(familiesOf(text)).toEqual(familiesFor(["circuit_breakers", "provider"]));
  });

  const promtool = prerequisite("promtool (Debian package prometheus)", spawnSync("promtool", ["--version"]).status === 0);
  it.skipIf(!promtool)("passes promtool check metrics with only the two findings the published names cause", async () => {
    expect((await t.call("POST", "/api/cloud/metrics/config/templates/full", { auth: asAdmin })).status).toBe(200);
    const scraped = await scrape();
    expect(scraped.status).toBe(200);
    const result = spawnSync("promtool", ["check", "metrics"], { input: scraped.text, encoding: "utf8" });
    const findings = `${result.stdout}${result.stderr}`.trim().split("\n").sort();
    console.log(`promtool check metrics (exit ${result.status}):\n${findings.join("\n")}`);
    expect(findings).toEqual([
      'service_cost_usd_total non-counter metrics should not have "_total" suffix',
      "service_health_database_latency_ms metric names should not contain abbreviated units",
      "service_http_request_latency_ms_avg metric names should not contain abbreviated units",
      'service_jobs_total non-counter metrics should not have "_total" suffix',
    ]);
    expect(result.status).toBe(3);
  });
});

describe("after a restart", () => {
  it("keeps the HTTP counters (they live in the collector's storage)", async () => {
    const series = 'service_http_requests_total{endpoint="GET_/api/queue/position/{job_id}"}';
    const before = sample((await preview("?categories=http")).text, series);
    expect(before).toBe(4);
    await t.stop({ keepData: true });
    t = await startTestStack(t.dataDir, BINDINGS);
    expect(sample((await preview("?categories=http")).text, series)).toBe(4);
  });
});
