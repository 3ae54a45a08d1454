import { readdirSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "@libsql/client";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOOPBACK_RANGES, parseRange, rateLimitKey } from "../../shared/ip";
import { defaultRateRule, isRateLimitExempt, matchRateRule, rateRuleFor, uncountedRateLimitHeaders } from "../../shared/rate-rules";
import type { AppEnv } from "../../edge/app-env";
import type { Config } from "../../edge/config";
import type { Logger } from "../../edge/log";
import { rateLimit } from "../../edge/middleware/rate-limit";
import { clientAddress, fromGenuineLoopback, resolveClient } from "../../edge/ratelimit/client-ip";
import { LEASE_RECORD_AHEAD_MS } from "../../edge/ratelimit/limiter-types";
import { readRateLimitSettings } from "../../edge/ratelimit/rate-limit-variables";
import { setUpAdmin, startTestStack, type Reply, type TestStack } from "../helpers/stack";

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const sleepUntil = (epochMs: number) => sleep(Math.max(0, epochMs - Date.now()));
const USER_AGENT = "rate-limit-test/1.0";
/** A client behind the loopback proxy (trusted by default). */
const from = (ip: string, headers: Record<string, string> = {}) => ({ "x-forwarded-for": ip, "user-agent": USER_AGENT, ...headers });
const policyOf = (reply: Reply) => reply.headers.get("ratelimit-policy");
const remainingOf = (reply: Reply) => reply.headers.get("x-ratelimit-remaining");

/**
 * Sends one request and checks the three X-RateLimit headers: Limit and Remaining as given, Reset a
 * whole Unix second `periodSeconds` after it was answered (an uncounted request's reset).
 */
async function uncountedCall(
  t: TestStack,
  method: string,
  path: string,
  expected: { limit: number; periodSeconds: number },
  headers: Record<string, string> = {},
) {
  const before = Math.floor(Date.now() / 1000);
  const reply = await t.call(method, path, { headers });
  const after = Math.ceil(Date.now() / 1000);
  const [limit, remaining, reset] = ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"].map((name) =>
    reply.headers.get(name),
  );
  expect([method, path, limit, remaining], reply.text).toEqual([method, path, String(expected.limit), String(expected.limit)]);
  expect(reset, `${method} ${path}`).toMatch(/^\d+$/);
  expect(Number(reset)).toBeGreaterThanOrEqual(before + expected.periodSeconds);
  expect(Number(reset)).toBeLessThanOrEqual(after + expected.periodSeconds);
  return reply;
}

describe("rate rules (shared/rate-rules.ts)", () => {
  const fallback = defaultRateRule(100, 60);
  const ruleOf = (method: string, path: string) => matchRateRule(method, path, fallback)?.name ?? null;

  it("picks the first rule whose pattern and method match, the specific cancel rule before job submission", () => {
    expect(ruleOf("POST", "/api/cloud/auth/login")).toBe("login");
    expect(ruleOf("POST", "/api/auth/login")).toBe("login");
    expect(ruleOf("POST", "/api/cloud/auth/register")).toBe("register");
    expect(ruleOf("POST", "/api/auth/api-keys")).toBe("api-keys");
    expect(ruleOf("POST", "/api/cloud/jobs/job-42/cancel")).toBe("job-cancel");
    expect(ruleOf("POST", "/api/cloud/jobs")).toBe("job-submit");
    expect(ruleOf("POST", "/api/cloud/jobs/job-42/retry")).toBe("job-submit");
    expect(ruleOf("PUT", "/api/webhooks/github")).toBe("webhooks");
    expect(ruleOf("GET", "/api/cloud/storage/bucket/key")).toBe("storage");
    expect(ruleOf("DELETE", "/api/quotas/7")).toBe("quotas");
  });

  it("falls through to the default rule for other methods and for paths that only share a prefix", () => {
    expect(ruleOf("GET", "/api/cloud/auth/login")).toBe("default");
    expect(ruleOf("GET", "/api/cloud/jobs")).toBe("default");
    expect(ruleOf("GET", "/api/cloud/auth/api-keys")).toBe("default");
    expect(ruleOf("POST", "/api/cloud/auth/loginx")).toBe("default");
    expect(ruleOf("POST", "/api/webhooksx")).toBe("default");
    expect(matchRateRule("GET", "/api/queue", fallback)).toBe(fallback);
  });

  it("names the rule an excluded path would fall under, for its headers, while not counting it", () => {
    expect(isRateLimitExempt("/api/cloud/health")).toBe(true);
    expect(isRateLimitExempt("//api/cloud//health")).toBe(true);
    expect(isRateLimitExempt("/api/cloud/healthy")).toBe(false);
    expect(rateRuleFor("GET", "/api/cloud/health", fallback)).toBe(fallback);
    expect(rateRuleFor("POST", "/api/cloud/auth/login", fallback).name).toBe("login");
    expect(uncountedRateLimitHeaders(defaultRateRule(100, 60), 1_700_000_000_500)).toEqual({
      "X-RateLimit-Limit": "100",
      "X-RateLimit-Remaining": "100",
      "X-RateLimit-Reset": "1700000061",
    });
  });

  it("sees through doubled slashes, so they do not escape a rule", () => {
    expect(ruleOf("POST", "//api/cloud/auth//login")).toBe("login");
  });

  it("excludes the probes, streams, static files, the listed endpoints and the runner protocol", () => {
    for (const path of [
      "/health",
      "/api/cloud/health",
      "/api/cloud/health/live",
      "/api/events/stream",
      "/api/training/events/stream",
      "/api/queue/changes",
      "/static/app.js",
      "/docs/assets/swagger-ui.css",
      "/ui/app.js",
      "/api/cloud/hints",
      "/api/users/me",
      "/api/cloud/providers/replicate",
      "/api/workers/heartbeat",
    ]) {
      expect(ruleOf("POST", path), path).toBeNull();
    }
    expect(ruleOf("GET", "/api/training/events")).toBe("default");
    expect(ruleOf("GET", "/api/queue/history")).toBe("default");
  });
});

describe("client address (edge/ratelimit/client-ip.ts)", () => {
  const headers = (values: Record<string, string>) => new Headers(values);

  it("honours the forwarding headers only from a trusted peer, X-Forwarded-For before X-Real-IP", () => {
    const forwarded = { "cf-connecting-ip": "127.0.0.1", "x-forwarded-for": "203.0.113.7, 10.0.0.1", "x-real-ip": "198.51.100.1" };
    expect(clientAddress(headers(forwarded), LOOPBACK_RANGES)).toBe("203.0.113.7");
    expect(clientAddress(headers({ "cf-connecting-ip": "::1", "x-real-ip": "198.51.100.1" }), LOOPBACK_RANGES)).toBe("198.51.100.1");
    expect(clientAddress(headers({ ...forwarded, "cf-connecting-ip": "192.0.2.9" }), LOOPBACK_RANGES)).toBe("192.0.2.9");
    expect(clientAddress(headers({ ...forwarded, "cf-connecting-ip": "10.1.2.3" }), [parseRange("10.0.0.0/8")])).toBe("203.0.113.7");
    expect(clientAddress(headers(forwarded), [])).toBe("127.0.0.1");
  });

  it("falls back to the peer when a forwarding header holds no address, and normalises addresses", () => {
    expect(clientAddress(headers({ "cf-connecting-ip": "127.0.0.1", "x-forwarded-for": "evil, 203.0.113.7" }), LOOPBACK_RANGES)).toBe(
      "127.0.0.1",
    );
    expect(clientAddress(headers({ "cf-connecting-ip": "127.0.0.1", "x-real-ip": "" }), LOOPBACK_RANGES)).toBe("127.0.0.1");
    expect(clientAddress(headers({ "cf-connecting-ip": "::ffff:192.0.2.9" }), LOOPBACK_RANGES)).toBe("192.0.2.9");
    expect(clientAddress(headers({ "cf-connecting-ip": "127.0.0.1", "x-forwarded-for": "2001:DB8:0::7" }), LOOPBACK_RANGES)).toBe(
      "2001:db8::7",
    );
    expect(clientAddress(headers({}), LOOPBACK_RANGES)).toBe("unknown");
  });

  it("tells a genuine loopback peer from a loopback address a proxy forwarded", () => {
    expect(fromGenuineLoopback(headers({ "cf-connecting-ip": "127.0.0.1" }), LOOPBACK_RANGES)).toBe(true);
    // A garbled header from a proxy that appends still means the request was forwarded.
    expect(fromGenuineLoopback(headers({ "cf-connecting-ip": "::1", "x-forwarded-for": "evil, 203.0.113.7" }), LOOPBACK_RANGES)).toBe(
      false,
    );
    expect(fromGenuineLoopback(headers({ "cf-connecting-ip": "127.0.0.1", "x-forwarded-for": "127.0.0.1" }), LOOPBACK_RANGES)).toBe(false);
    expect(fromGenuineLoopback(headers({ "cf-connecting-ip": "127.0.0.1", "x-real-ip": "::1" }), LOOPBACK_RANGES)).toBe(false);
    // Nobody trusted: the forwarding header is ignored and the peer is the client.
    expect(fromGenuineLoopback(headers({ "cf-connecting-ip": "127.0.0.1", "x-forwarded-for": "203.0.113.7" }), [])).toBe(true);
    expect(fromGenuineLoopback(headers({ "cf-connecting-ip": "203.0.113.7" }), LOOPBACK_RANGES)).toBe(false);
    expect(resolveClient(headers({ "cf-connecting-ip": "127.0.0.1", "x-forwarded-for": "203.0.113.7" }), LOOPBACK_RANGES)).toEqual({
      address: "203.0.113.7",
      forwarded: true,
    });
  });

  it("keys IPv4 clients by address and IPv6 clients by their /64", () => {
    expect(rateLimitKey("203.0.113.7")).toBe("203.0.113.7");
    expect(rateLimitKey("2001:db8:1:2:aaaa::5")).toBe("2001:db8:1:2::/64");
    expect(rateLimitKey("2001:DB8:1:2:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(rateLimitKey("::ffff:192.0.2.9")).toBe("192.0.2.9");
    expect(rateLimitKey("unknown")).toBe("unknown");
  });
});

describe("rate-limit settings (edge/ratelimit/rate-limit-variables.ts)", () => {
  it("defaults to 100 per 60 s, loopback trusted, loopback uncounted only in development", () => {
    const development = readRateLimitSettings({}, "development");
    expect(development).toMatchObject({
      enabled: true,
      defaultRule: { name: "default", calls: 100, periodSeconds: 60 },
      exemptLoopback: true,
      trustedProxies: LOOPBACK_RANGES,
    });
    expect(readRateLimitSettings({}, "production").exemptLoopback).toBe(false);
    expect(readRateLimitSettings({ RATE_LIMIT_LOOPBACK: "1" }, "development").exemptLoopback).toBe(false);
    expect(readRateLimitSettings({ RATE_LIMIT_LOOPBACK: "0" }, "production").exemptLoopback).toBe(false);
  });

  it("turns limiting off with RATE_LIMIT_CALLS=0 and trusts nobody with TRUSTED_PROXIES=none or empty", () => {
    expect(readRateLimitSettings({ RATE_LIMIT_CALLS: "0" }, "production").enabled).toBe(false);
    expect(readRateLimitSettings({ TRUSTED_PROXIES: "none" }, "production").trustedProxies).toEqual([]);
    expect(readRateLimitSettings({ TRUSTED_PROXIES: "" }, "production").trustedProxies).toEqual([]);
    expect(readRateLimitSettings({ TRUSTED_PROXIES: "loopback, 10.0.0.0/8" }, "production").trustedProxies).toHaveLength(3);
  });

  it("refuses a bad value with a 500 naming the variable", () => {
    const failure = (variables: Record<string, string>) => {
      try {
        readRateLimitSettings(variables, "production");
      } catch (error) {
        return { status: (error as { status: number }).status, detail: (error as Error).message };
      }
      return null;
    };
    expect(failure({ RATE_LIMIT_CALLS: "ten" })).toEqual({
      status: 500,
      detail: 'RATE_LIMIT_CALLS must be a whole number of at least 0, not "ten"',
    });
    expect(failure({ RATE_LIMIT_CALLS: "-1" })?.detail).toMatch(/^RATE_LIMIT_CALLS/);
    expect(failure({ RATE_LIMIT_PERIOD: "0" })).toEqual({
      status: 500,
      detail: 'RATE_LIMIT_PERIOD must be a whole number of at least 1, not "0"',
    });
    expect(failure({ RATE_LIMIT_PERIOD: "1.5" })?.detail).toMatch(/^RATE_LIMIT_PERIOD/);
    expect(failure({ RATE_LIMIT_LOOPBACK: "maybe" })).toEqual({ status: 500, detail: 'RATE_LIMIT_LOOPBACK must be 1 or 0, not "maybe"' });
    expect(failure({ TRUSTED_PROXIES: "10.0.0.0/8, 10.0.0.300" })?.detail).toMatch(/^TRUSTED_PROXIES: "10\.0\.0\.300"/);
  });
});

describe("an unreachable limiter, and limiting off", () => {
  const appWith = (variables: Record<string, string>, warnings: string[]) => {
    const app = new Hono<AppEnv>();
    app.use("*", async (c, next) => {
      c.set("config", { rateLimit: readRateLimitSettings(variables, "production") } as Config);
      c.set("log", { warning: (message: string) => warnings.push(message) } as unknown as Logger);
      c.set("rateLimit", null);
      await next();
    });
    app.use("*", rateLimit());
    app.get("/x", (c) => c.text(`served ${c.get("clientIp")} ${JSON.stringify(c.get("rateLimit"))}`));
    return app;
  };
  const env = {
    RATE_LIMITER: { idFromName: (name: string) => name, get: () => ({ hit: () => Promise.reject(new Error("limiter down")) }) },
  };

  it("serves the request uncounted, with the headers of an uncounted request, and logs a warning", async () => {
    const warnings: string[] = [];
    const before = Math.floor(Date.now() / 1000);
    const response = await appWith({}, warnings).request("/x", { headers: { "cf-connecting-ip": "203.0.113.9" } }, env);
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("served 203.0.113.9 null");
    expect([
      response.headers.get("x-ratelimit-limit"),
      response.headers.get("x-ratelimit-remaining"),
      response.headers.get("ratelimit-policy"),
    ]).toEqual(["100", "100", null]);
    expect(Number(response.headers.get("x-ratelimit-reset"))).toBeGreaterThanOrEqual(before + 60);
    expect(warnings).toEqual(["rate limiter unreachable: request served without limiting"]);
  });

  it("puts no rate-limit header on any answer when RATE_LIMIT_CALLS=0: there is no limit to describe", async () => {
    const warnings: string[] = [];
    const response = await appWith({ RATE_LIMIT_CALLS: "0" }, warnings).request(
      "/x",
      { headers: { "cf-connecting-ip": "203.0.113.9" } },
      env,
    );
    expect([response.status, response.headers.get("x-ratelimit-limit"), warnings]).toEqual([200, null, []]);
  });
});

describe("rate limiting over HTTP (development, 4 per 2 s by default, loopback the trusted proxy)", () => {
  let t: TestStack;
  let admin: { cookie: string; key: string };

  beforeAll(async () => {
    t = await startTestStack(undefined, { RATE_LIMIT_CALLS: "4", RATE_LIMIT_PERIOD: "2" });
    admin = await setUpAdmin(t);
  });
  afterAll(() => t?.stop());

  it("admits N in the window, refuses N+1, and admits again once the oldest request leaves it", async () => {
    const headers = from("203.0.113.10");
    const sentFirst = Date.now();
    expect(remainingOf(await t.call("GET", "/docs", { headers }))).toBe("3");
    await sleepUntil(sentFirst + 1400);
    for (const remaining of ["2", "1", "0"]) {
      const reply = await t.call("GET", "/docs", { headers });
      expect([reply.status, remainingOf(reply)]).toEqual([200, remaining]);
    }
    expect((await t.call("GET", "/docs", { headers })).status).toBe(429);
    // 300 ms before the first request leaves the window: still refused, told to retry within 1 s.
    await sleepUntil(sentFirst + 2000 - 300);
    const early = await t.call("GET", "/docs", { headers });
    expect([early.status, early.headers.get("retry-after")]).toEqual([429, "1"]);
    await sleepUntil(Number(early.headers.get("x-ratelimit-reset")) * 1000 + 5);
    const again = await t.call("GET", "/docs", { headers });
    expect([again.status, remainingOf(again)]).toEqual([200, "0"]);
    // A sliding window: the three later requests are still inside it (a fixed window would have reset).
    expect((await t.call("GET", "/docs", { headers })).status).toBe(429);
  });

  it("counts each request under the first matching rule, by method, with the short /api/auth/ and the service's /api/cloud/auth/ paths sharing one window", async () => {
    const headers = from("203.0.113.20");
    const login = { username: "nobody", password: "wrong-password" };
    for (const remaining of ["4", "3", "2", "1", "0"]) {
      const reply = await t.call("POST", "/api/cloud/auth/login", { json: login, headers });
      expect([reply.status, policyOf(reply), remainingOf(reply)]).toEqual([401, '"login";q=5;w=60', remaining]);
    }
    const specPath = await t.call("POST", "/api/auth/login", { json: login, headers });
    expect([specPath.status, policyOf(specPath)]).toEqual([429, '"login";q=5;w=60']);
    const otherMethod = await t.call("GET", "/api/cloud/auth/login", { headers });
    expect([otherMethod.status, policyOf(otherMethod)]).toEqual([404, '"default";q=4;w=2']);
    expect(policyOf(await t.call("POST", "/api/cloud/jobs/job-1/cancel", { headers }))).toBe('"job-cancel";q=30;w=60');
    expect(policyOf(await t.call("POST", "/api/cloud/jobs", { json: {}, headers }))).toBe('"job-submit";q=20;w=60');
    expect(policyOf(await t.call("POST", "/api/cloud/auth/register", { json: {}, headers }))).toBe('"register";q=3;w=60');
    const apiKeys = await t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "k" }, headers });
    expect([apiKeys.status, policyOf(apiKeys), remainingOf(apiKeys)]).toEqual([401, '"api-keys";q=10;w=60', "9"]);
  });

  it("keeps one window per client address", async () => {
    for (let i = 0; i < 4; i++) expect((await t.call("GET", "/docs", { headers: from("203.0.113.30") })).status).toBe(200);
    expect((await t.call("GET", "/docs", { headers: from("203.0.113.30") })).status).toBe(429);
    expect(remainingOf(await t.call("GET", "/docs", { headers: from("203.0.113.31") }))).toBe("3");
    expect(remainingOf(await t.call("GET", "/docs", { headers: from("2001:db8::30") }))).toBe("3");
    // The same IPv6 address written another way is the same client.
    expect(remainingOf(await t.call("GET", "/docs", { headers: from("2001:DB8:0:0::30") }))).toBe("2");
    // IPv6 clients are counted by their /64: another address of it is the same client, another /64 is not.
    expect(remainingOf(await t.call("GET", "/docs", { headers: from("2001:db8::ffff:1234:31") }))).toBe("1");
    expect(remainingOf(await t.call("GET", "/docs", { headers: from("2001:db8:0:1::30") }))).toBe("3");
  });

  it("takes the client from X-Forwarded-For, else X-Real-IP, when the peer is the trusted loopback proxy", async () => {
    expect(remainingOf(await t.call("GET", "/docs", { headers: from("198.51.100.7, 10.0.0.1") }))).toBe("3");
    expect(remainingOf(await t.call("GET", "/docs", { headers: from("198.51.100.7") }))).toBe("2");
    expect(remainingOf(await t.call("GET", "/docs", { headers: { "x-real-ip": "198.51.100.8" } }))).toBe("3");
    expect(remainingOf(await t.call("GET", "/docs", { headers: { "x-real-ip": "198.51.100.8" } }))).toBe("2");
    // No address in the header: counted under the peer's address, but as a forwarded client, so
    // development's loopback exemption does not apply.
    const invalid = await t.call("GET", "/docs", { headers: from("not-an-address") });
    expect([invalid.status, invalid.headers.get("x-ratelimit-limit")]).toEqual([200, "4"]);
  });

  it("does not count loopback clients in development, and tells them the rule that would apply with all of it remaining", async () => {
    for (let i = 0; i < 6; i++) expect((await uncountedCall(t, "GET", "/docs", { limit: 4, periodSeconds: 2 })).status).toBe(200);
  });

  it("puts the three headers on every answer to an uncounted loopback client: errors, 401s, 404s, OPTIONS, storage and exempt paths", async () => {
    const rule = { limit: 4, periodSeconds: 2 };
    expect((await uncountedCall(t, "GET", "/api/no-such-route", rule)).status).toBe(404);
    expect((await uncountedCall(t, "GET", "/api/queue", rule)).status).toBe(401);
    expect((await uncountedCall(t, "GET", "/api/queue", rule, { "x-api-key": "st_" + "z".repeat(40) })).status).toBe(401);
    expect((await uncountedCall(t, "OPTIONS", "/api/queue", rule)).status).toBeLessThan(500);
    expect(
      (await uncountedCall(t, "POST", "/api/cloud/auth/api-keys", { limit: 10, periodSeconds: 60 }, { "content-type": "application/json" }))
        .status,
    ).toBe(401);
    const noBody = await uncountedCall(
      t,
      "POST",
      "/api/cloud/auth/login",
      { limit: 5, periodSeconds: 60 },
      { "content-type": "application/json" },
    );
    expect([noBody.status, noBody.body.code]).toEqual([400, "bad_request"]);
    const s3 = await uncountedCall(t, "GET", "/api/cloud/storage/some-job/model.bin", { limit: 50, periodSeconds: 60 });
    expect([s3.status, s3.headers.get("content-type")]).toEqual([403, "application/xml"]);
    expect(s3.text).toContain("<Code>AccessDenied</Code>");
    const listing = await uncountedCall(t, "HEAD", "/api/cloud/storage/some-job", { limit: 50, periodSeconds: 60 });
    expect(listing.status).toBe(403);
    expect((await uncountedCall(t, "GET", "/api/cloud/health", rule)).status).toBe(200);
    // Uncounted answers claim no policy: none was applied.
    expect(policyOf(await t.call("GET", "/docs"))).toBeNull();
  });

  it("counts a loopback address named by a forwarding header: only a genuine loopback peer goes uncounted", async () => {
    await sleep(2100); // the earlier tests' requests under 127.0.0.1 have left the 2 s window
    for (const remaining of ["3", "2", "1", "0"])
      expect(remainingOf(await t.call("GET", "/docs", { headers: from("127.0.0.1") }))).toBe(remaining);
    const refused = await t.call("GET", "/docs", { headers: from("127.0.0.1") });
    expect([refused.status, refused.body.code]).toEqual([429, "rate_limited"]);
    expect(remainingOf(await t.call("GET", "/docs", { headers: { "x-real-ip": "::1" } }))).toBe("3");
    // The same machine without a forwarding header is still exempt.
    expect((await uncountedCall(t, "GET", "/docs", { limit: 4, periodSeconds: 2 })).status).toBe(200);
  });

  it("never counts the excluded paths, whose answers describe the rule that would apply, all of it remaining", async () => {
    const headers = from("203.0.113.50");
    for (const path of [
      "/api/cloud/health/live",
      "/api/cloud/health",
      "/api/users/me",
      "/docs/assets/swagger-ui.css",
      "/api/cloud/providers",
      "/health",
    ]) {
      for (let i = 0; i < 5; i++) {
        const reply = await uncountedCall(t, "GET", path, { limit: 4, periodSeconds: 2 }, headers);
        expect([path, reply.status === 429]).toEqual([path, false]);
      }
    }
    expect(remainingOf(await t.call("GET", "/docs", { headers }))).toBe("3");
  });

  it("leaves a failure limit's 429 its own headers, Remaining 0, not those of the request's rule", async () => {
    // From this machine itself, not forwarded: the per-address rule "login" leaves it uncounted in development.
    const login = () =>
      t.call("POST", "/api/cloud/auth/login", {
        json: { username: "failure-target", password: "wrong-password" },
        headers: { "user-agent": USER_AGENT },
      });
    for (let i = 1; i <= 10; i++) expect((await login()).status).toBe(401);
    const refused = await login();
    expect([refused.status, refused.body.detail]).toEqual([429, expect.stringContaining('(rule "login-failures")')]);
    expect([refused.headers.get("x-ratelimit-limit"), remainingOf(refused), policyOf(refused)]).toEqual([
      "10",
      "0",
      '"login-failures";q=10;w=900',
    ]);
    expect(Number(refused.headers.get("x-ratelimit-reset"))).toBeGreaterThan(Date.now() / 1000);
  });

  it("puts the headers on every answer of a counted request: 200, 404, 401 and 429", async () => {
    const headers = from("203.0.113.60");
    const replies = [
      await t.call("GET", "/docs", { headers }),
      await t.call("GET", "/api/no-such-route", { headers }),
      await t.call("GET", "/api/queue", { headers }),
      await t.call("GET", "/api/queue", { headers: { ...headers, "x-api-key": "st_" + "x".repeat(40) } }),
      await t.call("GET", "/docs", { headers }),
    ];
    const now = Date.now() / 1000;
    expect(replies.map((r) => r.status)).toEqual([200, 404, 401, 401, 429]);
    replies.forEach((reply, i) => {
      const remaining = String(Math.max(0, 3 - i));
      const reset = Number(reply.headers.get("x-ratelimit-reset"));
      expect(reply.headers.get("x-ratelimit-limit")).toBe("4");
      expect(remainingOf(reply)).toBe(remaining);
      expect(reset).toBeGreaterThanOrEqual(Math.floor(now));
      expect(reset).toBeLessThanOrEqual(Math.ceil(now) + 2);
      expect(policyOf(reply)).toBe('"default";q=4;w=2');
      expect(reply.headers.get("ratelimit")).toMatch(new RegExp(`^"default";r=${remaining};t=[0-2]$`));
    });
    const refused = replies[4]!;
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(Number(refused.headers.get("retry-after"))).toBeLessThanOrEqual(2);
    expect(refused.body).toEqual({
      detail: `Rate limit exceeded: at most 4 requests per 2 s for GET /docs (rule "default"); retry in ${refused.headers.get("retry-after")} s`,
      code: "rate_limited",
    });
  });

  it("refuses storage requests past the storage rule as S3's SlowDown, which S3 clients back off from and retry", async () => {
    const headers = from("203.0.113.60");
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => t.call("GET", "/api/cloud/storage/some-job?list-type=2", { headers })),
    );
    // Unsigned, so refused by the endpoint, but counted: 50 per 60 s is the storage rule.
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([403]));
    const refused = await t.call("GET", "/api/cloud/storage/some-job/model.bin", { headers });
    expect(refused.status).toBe(429);
    expect(refused.headers.get("content-type")).toBe("application/xml");
    expect(refused.text).toContain("<Code>SlowDown</Code>");
    expect(refused.text).toContain("at most 50 requests per 60 s for GET /api/cloud/storage/some-job/model.bin (rule &quot;storage&quot;)");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(policyOf(refused)).toBe('"storage";q=50;w=60');
  });

  it("refuses before looking at credentials: neither a bad nor a valid one changes the limit", async () => {
    const bad = { ...from("203.0.113.70"), "x-api-key": "st_" + "y".repeat(40) };
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await t.call("GET", "/api/queue", { headers: bad })).status);
    expect(statuses).toEqual([401, 401, 401, 401, 429]);
    const valid = [];
    for (let i = 0; i < 5; i++)
      valid.push((await t.call("GET", "/api/queue", { headers: from("203.0.113.71"), auth: { key: admin.key } })).status);
    expect(valid).toEqual([200, 200, 200, 200, 429]);
  });

  it("audits violations with client address, endpoint, method and User-Agent, at most one entry per rule and second", async () => {
    const ip = "203.0.113.80";
    const entries = async () => {
      const reply = await t.call("GET", "/api/audit?event_type=rate_limited&limit=1000", { auth: { key: admin.key } });
      return (reply.body.entries as { client_ip: string }[]).filter((e) => e.client_ip === ip);
    };
    // Entries are written after the response: wait for them.
    const entriesOnceThere = async (count: number) => {
      for (const deadline = Date.now() + 5000; ; await sleep(50)) {
        const found = await entries();
        if (found.length >= count || Date.now() > deadline) return found;
      }
    };
    for (let i = 0; i < 4; i++) expect((await t.call("GET", "/docs", { headers: from(ip) })).status).toBe(200);
    const firstRefusal = Date.now();
    for (let i = 0; i < 3; i++) expect((await t.call("GET", "/docs", { headers: from(ip) })).status).toBe(429);
    await entriesOnceThere(1);
    await sleep(300);
    const first = await entries();
    expect(first).toHaveLength(1);
    expect(first[0]).toMatchObject({
      event_type: "rate_limited",
      actor: null,
      client_ip: ip,
      user_agent: USER_AGENT,
      target: "/docs",
      details: { method: "GET", path: "/docs", rule: "default", limit: 4, window_seconds: 2, refusals: 1 },
    });
    await sleepUntil(firstRefusal + 1200);
    expect((await t.call("POST", "/docs", { headers: from(ip) })).status).toBe(429);
    const both = await entriesOnceThere(2);
    expect(both).toHaveLength(2);
    // Newest first: it stands for itself and the two refusals coalesced since the first entry.
    expect(both[0]).toMatchObject({ client_ip: ip, target: "/docs", details: { method: "POST", rule: "default", refusals: 3 } });
  });
});

describe("leases: a busy client's admissions granted ahead (development, 40 per 60 s)", () => {
  let t: TestStack;
  let admin: { cookie: string; key: string };

  beforeAll(async () => {
    t = await startTestStack(undefined, { RATE_LIMIT_CALLS: "40", RATE_LIMIT_PERIOD: "60" });
    admin = await setUpAdmin(t);
  });
  afterAll(() => t?.stop());

  /** `count` requests at once from `ip`, then, once every lease they left has expired, one at a time until refused. */
  async function burstThenPace(ip: string, count: number) {
    const headers = from(ip);
    const burst = await Promise.all(Array.from({ length: count }, () => t.call("GET", "/docs", { headers })));
    expect(burst.filter((r) => r.status !== 200 && r.status !== 429).map((r) => r.text)).toEqual([]);
    await sleep(LEASE_RECORD_AHEAD_MS + 100);
    const paced: string[] = [];
    for (let i = 0; i < 60; i++) {
      const reply = await t.call("GET", "/docs", { headers });
      if (reply.status === 429) break;
      expect(reply.status).toBe(200);
      paced.push(remainingOf(reply)!);
    }
    return { admitted: burst.filter((r) => r.status === 200).length, paced };
  }

  it("never admits more than the limit to a burst, and gives unspent slots back: the window admits exactly its limit in all", async () => {
    const flood = await burstThenPace("203.0.113.90", 120);
    expect(flood.admitted).toBeGreaterThan(0);
    expect(flood.admitted).toBeLessThanOrEqual(40);
    expect(flood.admitted + flood.paced.length).toBe(40);
    // A burst below the limit, then a client at its own pace (leases and all) gets exactly the rest.
    const partial = await burstThenPace("203.0.113.92", 25);
    expect(partial.admitted).toBeLessThanOrEqual(25);
    expect(partial.admitted + partial.paced.length).toBe(40);
    // Remaining counts down to 0, the slots this isolate holds included.
    expect(partial.paced.at(-1)).toBe("0");
    expect(partial.paced.map(Number)).toEqual([...partial.paced.map(Number)].sort((a, b) => b - a));
  });

  it("admits a burst of exactly the limit in full: a refusal while slots are held or on their way is admitted by one", async () => {
    const exact = await burstThenPace("203.0.113.93", 40);
    expect([exact.admitted, exact.paced.length]).toEqual([40, 0]);
  });

  it("runs no handler for a refused request: a burst of key creations creates exactly the keys it was answered 201 for", async () => {
    const headers = from("203.0.113.91");
    const listed = async () =>
      ((await t.call("GET", "/api/cloud/auth/api-keys", { auth: { cookie: admin.cookie } })).body.keys as { name: string }[]).filter((k) =>
        k.name.startsWith("burst-"),
      ).length;
    const replies = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        t.call("POST", "/api/cloud/auth/api-keys", { json: { name: `burst-${i}` }, headers, auth: { cookie: admin.cookie } }),
      ),
    );
    const created = replies.filter((r) => r.status === 201).length;
    expect(replies.filter((r) => r.status !== 201 && r.status !== 429).map((r) => r.text)).toEqual([]);
    expect(created).toBeGreaterThan(0);
    expect(created).toBeLessThanOrEqual(10); // the api-keys rule: 10 per 60 s
    expect(await listed()).toBe(created);
  });
});

describe("rate limiting over HTTP (production, trusting only 10.0.0.0/8, 3 per 60 s)", () => {
  const bindings = { SERVICE_ENV: "production", TRUSTED_PROXIES: "10.0.0.0/8", RATE_LIMIT_CALLS: "3", RATE_LIMIT_PERIOD: "60" };
  let t: TestStack;

  beforeAll(async () => {
    t = await startTestStack(undefined, bindings);
  });
  afterAll(() => t?.stop());

  it("counts loopback clients and ignores forwarding headers from a peer that is not a trusted proxy", async () => {
    const replies = [];
    for (const ip of ["203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4"])
      replies.push(await t.call("GET", "/docs", { headers: from(ip) }));
    expect(replies.map((r) => [r.status, remainingOf(r)])).toEqual([
      [200, "2"],
      [200, "1"],
      [200, "0"],
      [429, "0"],
    ]);
    expect((await t.call("GET", "/docs", { headers: { "x-real-ip": "198.51.100.1" } })).status).toBe(429);
  });

  it("remembers its windows across a restart, admissions it had no time to store included", async () => {
    const apiKeys = () => t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "k" } });
    const register = () => t.call("POST", "/api/cloud/auth/register", { json: {} });
    expect(remainingOf(await apiKeys())).toBe("9");
    await sleep(1200); // stored by now
    for (const remaining of ["2", "1"]) expect(remainingOf(await register())).toBe(remaining);
    // Stopped at once: of these two, the second is at best covered by a reservation, not stored.
    const dataDir = t.dataDir;
    await t.stop({ keepData: true });
    t = await startTestStack(dataDir, bindings);
    // Stored: restored exactly (a reservation left standing would count phantoms here).
    expect(remainingOf(await apiKeys())).toBe("8");
    // Not stored: counted as admitted at the restart, so one request fewer, never one more.
    const afterRestart = [await register(), await register()];
    expect(afterRestart.map((r) => [r.status === 429, remainingOf(r)])).toEqual([
      [false, "0"],
      [true, "0"],
    ]);
    // The default window the previous test filled is still full.
    expect((await t.call("GET", "/docs")).status).toBe(429);
  });

  it("keeps its windows when upgraded from the version that stored one row per admission", async () => {
    const apiKeys = () => t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "k" } });
    expect(remainingOf(await apiKeys())).toBe("7");
    await sleep(1200); // stored by now
    const dataDir = t.dataDir;
    await t.stop({ keepData: true });
    // Each limiter's storage rewritten as the earlier version left it: `hits` (one row per admission, with its
    // expiry) and `reservations`, no `windows`.
    const files = readdirSync(join(dataDir, "worker"), { recursive: true, encoding: "utf8" })
      .filter((f) => f.includes("RateLimiter") && f.endsWith(".sqlite"))
      .map((f) => join(dataDir, "worker", f));
    expect(files.length).toBeGreaterThan(0);
    let rewritten = 0;
    for (const file of files) {
      const db = createClient({ url: `file:${file}` });
      const tables = (await db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")).rows.map((r) => String(r.name));
      if (tables.includes("windows")) {
        await db.execute(
          "CREATE TABLE hits (rule TEXT NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL, expires INTEGER NOT NULL, PRIMARY KEY (rule, seq)) WITHOUT ROWID",
        );
        await db.execute("CREATE TABLE reservations (rule TEXT PRIMARY KEY, seq INTEGER NOT NULL)");
        for (const row of (await db.execute("SELECT rule, window_ms, times FROM windows")).rows) {
          const rule = String(row.rule);
          let seq = 0;
          for (const [at, count] of JSON.parse(String(row.times)) as [number, number][])
            for (let i = 0; i < count; i++)
              await db.execute({ sql: "INSERT INTO hits VALUES (?, ?, ?, ?)", args: [rule, ++seq, at, at + Number(row.window_ms)] });
          await db.execute({ sql: "INSERT INTO reservations VALUES (?, ?)", args: [rule, seq] });
          rewritten++;
        }
        await db.execute("DROP TABLE windows");
      }
      db.close();
    }
    expect(rewritten).toBeGreaterThanOrEqual(3); // api-keys, register, default
    t = await startTestStack(dataDir, bindings);
    // Each window as it was: three of ten api-keys calls made, the register and default windows full.
    expect(remainingOf(await apiKeys())).toBe("6");
    expect((await t.call("POST", "/api/cloud/auth/register", { json: {} })).status).toBe(429);
    expect((await t.call("GET", "/docs")).status).toBe(429);
  });
});
