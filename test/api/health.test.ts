import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pkg from "../../package.json";
import { LATEST_SCHEMA_VERSION } from "../../edge/db/migrations/index";
import { startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
beforeAll(async () => {
  t = await startTestStack();
});
afterAll(async () => {
  await t?.stop();
});

describe("health", () => {
  it("reports status, version, uptime, an ISO timestamp and the database and secrets components", async () => {
    const reply = await t.call("GET", "/api/cloud/health");
    expect(reply.status).toBe(200);
    expect(reply.body.status).toBe("healthy");
    expect(reply.body.version).toBe(pkg.version);
    expect(reply.body.uptime_seconds).toBeGreaterThanOrEqual(0);
    expect(reply.body.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Math.abs(Date.parse(reply.body.timestamp) - Date.now())).toBeLessThan(60_000);
    const [database, secrets] = reply.body.components;
    expect(database).toMatchObject({
      name: "database",
      status: "healthy",
      schema_version: LATEST_SCHEMA_VERSION,
      latest_schema_version: LATEST_SCHEMA_VERSION,
    });
    expect(database.latency_ms).toBeGreaterThanOrEqual(0);
    expect(secrets).toMatchObject({ name: "secrets", status: "healthy" });
    expect(reply.body).not.toHaveProperty("providers");
  });

  it("counts uptime from start-up", async () => {
    const first = (await t.call("GET", "/api/cloud/health")).body.uptime_seconds;
    await new Promise((r) => setTimeout(r, 1100));
    const second = (await t.call("GET", "/api/cloud/health")).body.uptime_seconds;
    expect(second - first).toBeGreaterThanOrEqual(1);
  });

  it("adds the providers list with include_providers=true", async () => {
    const reply = await t.call("GET", "/api/cloud/health?include_providers=true");
    // No token is set here: the hosted provider is degraded (why is for admins only), the workers provider has no worker.
    expect(reply.body.providers).toEqual([
      { name: "replicate", status: "degraded", message: "credentials not valid; an admin sees why at GET /api/cloud/providers/replicate" },
      { name: "workers", status: "degraded", latency_ms: expect.any(Number), message: expect.stringContaining("no remote worker") },
    ]);
    expect((await t.call("GET", "/api/cloud/health?include_providers=maybe")).status).toBe(422);
  });

  it("answers live and ready without a credential", async () => {
    expect((await t.call("GET", "/api/cloud/health/live")).body).toEqual({ status: "ok" });
    const ready = await t.call("GET", "/api/cloud/health/ready");
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: "ready" });
  });
});
