// Standard security headers (hono/secure-headers) on every HTML and JSON answer, with a CSP that
// lets the API load nothing and the documentation pages load exactly what they need.
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestStack, type Reply, type TestStack } from "../helpers/stack";

let t: TestStack;
beforeAll(async () => {
  t = await startTestStack();
});
afterAll(async () => {
  await t?.stop();
});

const API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

function expectStandardHeaders(reply: Reply): void {
  expect(reply.headers.get("x-content-type-options")).toBe("nosniff");
  expect(reply.headers.get("x-frame-options")).toBe("SAMEORIGIN");
  expect(reply.headers.get("referrer-policy")).toBe("no-referrer");
  expect(reply.headers.get("cross-origin-opener-policy")).toBe("same-origin");
  expect(reply.headers.get("cross-origin-resource-policy")).toBe("same-origin");
  expect(reply.headers.get("strict-transport-security")).toBe("max-age=15552000; includeSubDomains");
}

describe("security headers", () => {
  it("are on JSON answers, errors and 404s included, with a CSP that loads nothing", async () => {
    for (const [path, status] of [
      ["/api/cloud/health/live", 200],
      ["/api/users/me", 401],
      ["/api/no-such-route", 404],
      ["/openapi.json", 200],
    ] as const) {
      const reply = await t.call("GET", path);
      expect(reply.status, path).toBe(status);
      expectStandardHeaders(reply);
      expect(reply.headers.get("content-security-policy"), path).toBe(API_CSP);
    }
    const invalid = await t.call("POST", "/api/cloud/auth/login", { json: { username: "" } });
    expect(invalid.status).toBe(422);
    expect(invalid.headers.get("content-security-policy")).toBe(API_CSP);
  });

  it("let Swagger UI run its one inline script by hash, never any inline script, and ReDoc its styles and search worker", async () => {
    const swagger = await t.call("GET", "/docs");
    expectStandardHeaders(swagger);
    const inline = [...swagger.text.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]!);
    expect(inline).toHaveLength(1);
    const hash = createHash("sha256").update(inline[0]!).digest("base64");
    const csp = swagger.headers.get("content-security-policy")!;
    const directives = Object.fromEntries(csp.split("; ").map((d) => [d.split(" ")[0], d.split(" ").slice(1)]));
    expect(directives["script-src"]).toEqual(["'self'", `'sha256-${hash}'`]);
    expect(directives["style-src"]).toEqual(["'self'", "'unsafe-inline'"]);
    expect(directives["default-src"]).toEqual(["'self'"]);
    expect(directives["frame-ancestors"]).toEqual(["'none'"]);
    const redoc = await t.call("GET", "/redoc");
    expect(redoc.headers.get("content-security-policy")).toBe(csp);
    expect(csp).toContain("worker-src 'self' blob:");
    expect(csp).toContain("img-src 'self' data:");
    // What the pages load is served from here, so 'self' covers it.
    for (const src of [...swagger.text.matchAll(/(?:src|href)="([^"]+)"/g), ...redoc.text.matchAll(/(?:src|href)="([^"]+)"/g)].map(
      (m) => m[1]!,
    ))
      expect(src.startsWith("/")).toBe(true);
  });

  it("leave the storage endpoint's S3 XML answers intact", async () => {
    const reply = await t.call("GET", "/api/cloud/storage/no-such-job/file.txt");
    expect(reply.status).toBe(403);
    expect(reply.headers.get("content-type")).toContain("xml");
    expect(reply.text).toContain("<Code>AccessDenied</Code>");
    expect(reply.headers.get("x-content-type-options")).toBe("nosniff");
  });
});
