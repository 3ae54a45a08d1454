import { Validator } from "@seriousme/openapi-schema-validator";
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findTargetHandler, isMiddleware } from "hono/utils/handler";
import { createApp } from "../../edge/app";
import { acceptsGzip } from "../../edge/docs-assets";
import { toOpenApiPath } from "../../edge/middleware/authorize";
import { accessLine, levelsTable, securityFor, SECURITY_SCHEMES, withAccess } from "../../edge/routes/openapi-access";
import { ROUTE_ACCESS } from "../../shared/permissions";
import { FirstAdminRequest, LoginRequest, RegisterRequest, RegistrationSetting } from "../../shared/schemas/auth";
import { EnvironmentCreate, EnvironmentUpdate } from "../../shared/schemas/environments";
import { MetricsConfigUpdate } from "../../shared/schemas/metrics";
import { ProviderSettingsUpdate } from "../../shared/schemas/providers";
import { ApprovalRulesUpdate, ConcurrencyUpdate, LocalSubmit, LocalSubmitResult, PriorityUpdate } from "../../shared/schemas/queue";
import { StorageQuotaUpdate } from "../../shared/schemas/storage";
import { EventLimitsUpdate } from "../../shared/schemas/events";
import { DatasetQuotaUpdate } from "../../shared/schemas/datasets";
import { UserCreate } from "../../shared/schemas/users";
import { WorkerRegister } from "../../shared/schemas/workers";
import { startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let doc: any;
beforeAll(async () => {
  t = await startTestStack();
  doc = (await t.call("GET", "/openapi.json")).body;
});
afterAll(async () => {
  await t?.stop();
});

/** Every `METHOD /path` the app really serves, from Hono's route table; `ALL /path` for `.all()` routes (middleware excluded). */
function servedRoutes(): string[] {
  const routes = createApp().routes.filter((r) => !isMiddleware(findTargetHandler(r.handler)));
  return [...new Set(routes.map((r) => `${r.method} ${toOpenApiPath(r.path)}`))].sort();
}

describe("the API description", () => {
  it("is a valid OpenAPI 3.1 document", async () => {
    expect(doc.openapi).toBe("3.1.0");
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it("lists every route the app serves, and the access table names each one", () => {
    const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
      .flatMap(([path, ops]) => Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`))
      .sort();
    // The S3-compatible storage endpoint (`.all()` routes) speaks S3, not JSON: its tag describes it instead.
    expect(documented).toEqual(servedRoutes().filter((route) => !route.startsWith("ALL ")));
    expect(servedRoutes()).toContain("ALL /api/cloud/storage/*");
    expect(Object.keys(ROUTE_ACCESS).sort()).toEqual(servedRoutes());
  });

  it("documents validation and auth errors with the shared error body", () => {
    const createUser = doc.paths["/api/users"].post;
    expect(createUser.responses["422"].content["application/json"].schema.$ref).toBe("#/components/schemas/Error");
    expect(createUser.requestBody.content["application/json"].schema.$ref).toBe("#/components/schemas/UserCreate");
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual([
      "apiKey",
      "bearer",
      "metricsScrapeToken",
      "session",
      "sigv4",
      "workerToken",
    ]);
  });

  it("gives every operation a summary, a description and the access its route declares", () => {
    const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => ({ route: `${method.toUpperCase()} ${path}`, op })),
    );
    expect(operations.length).toBeGreaterThan(80);
    for (const { route, op } of operations) {
      const access = ROUTE_ACCESS[route]!;
      expect(op.summary, route).toMatch(/\S/);
      expect(op.description.endsWith(`\n\n${accessLine(access)}`), `${route}: ${op.description}`).toBe(true);
      // The route's own words, before the generated access line.
      expect(op.description.slice(0, -accessLine(access).length).trim().length, route).toBeGreaterThan(20);
      expect(op["x-access"], route).toEqual(access);
      expect(op.security, route).toEqual(securityFor(access));
    }
    expect(doc.paths["/api/cloud/health"].get.security).toEqual([]);
    expect(doc.paths["/api/cloud/auth/api-keys"].post.security).toEqual([{ session: [] }]);
    expect(doc.paths["/api/workers/heartbeat"].post.security).toEqual([{ workerToken: [] }]);
    expect(doc.paths["/api/cloud/metrics/prometheus"].get.security).toContainEqual({ metricsScrapeToken: [] });
    expect(doc.paths["/api/queue/submit"].post.description).toContain("Access: researcher or above (session or API key).");
  });

  it("describes every area its operations belong to, and carries the generated table of levels", () => {
    const used = new Set(
      Object.values(doc.paths as Record<string, Record<string, any>>).flatMap((ops) => Object.values(ops).flatMap((op) => op.tags)),
    );
    const described = new Map((doc.tags as { name: string; description: string }[]).map((tag) => [tag.name, tag.description]));
    for (const tag of used) expect(described.get(tag)?.length ?? 0, tag).toBeGreaterThan(100);
    expect(doc.info.description).toContain(levelsTable(ROUTE_ACCESS));
    for (const section of ["## Levels and what each may call", "## Errors", "## Rate limiting", "## Security headers"])
      expect(doc.info.description).toContain(section);
    // Storage's .all() routes are not operations; the Storage area says how the endpoint is reached.
    expect(described.get("Storage")).toContain("sigv4");
  });

  it("shows examples that the API itself accepts", () => {
    const schemas = {
      FirstAdminRequest,
      LoginRequest,
      RegisterRequest,
      RegistrationSetting,
      EnvironmentCreate,
      EnvironmentUpdate,
      MetricsConfigUpdate,
      ProviderSettingsUpdate,
      ApprovalRulesUpdate,
      ConcurrencyUpdate,
      LocalSubmit,
      LocalSubmitResult,
      PriorityUpdate,
      StorageQuotaUpdate,
      EventLimitsUpdate,
      DatasetQuotaUpdate,
      UserCreate,
      WorkerRegister,
    };
    for (const [name, schema] of Object.entries(schemas)) {
      const example = doc.components.schemas[name]?.example;
      expect(example, name).toBeDefined();
      expect(schema.safeParse(example).error?.issues ?? [], name).toEqual([]);
    }
  });
});

describe("the access written into the document", () => {
  it("says who may call a route in one line per kind of access", () => {
    expect(accessLine("public")).toBe("Access: public (no credential).");
    expect(accessLine({ level: "researcher" })).toBe("Access: researcher or above (session or API key).");
    expect(accessLine({ level: "viewer" })).toBe("Access: any user, viewer or above (session or API key).");
    expect(accessLine({ level: "admin" })).toBe("Access: admin (session or API key).");
    expect(accessLine({ level: "viewer", session: true })).toContain("session cookie only");
    expect(accessLine({ level: "admin", scrapeToken: true })).toBe("Access: admin (session or API key), or the metrics scrape token.");
    expect(accessLine("worker")).toContain("worker token");
    expect(accessLine("storage")).toContain("SigV4");
  });

  it("asks only for credentials the route accepts, and for none on a public route", () => {
    const user = [{ apiKey: [] }, { bearer: [] }, { session: [] }];
    expect(securityFor("public")).toEqual([]);
    expect(securityFor({ level: "lead" })).toEqual(user);
    expect(securityFor({ level: "viewer", session: true })).toEqual([{ session: [] }]);
    expect(securityFor({ level: "admin", scrapeToken: true })).toEqual([...user, { metricsScrapeToken: [] }]);
    expect(securityFor("worker")).toEqual([{ workerToken: [] }]);
    expect(securityFor("storage")).toEqual([{ sigv4: [] }, ...user]);
    for (const requirement of Object.values(ROUTE_ACCESS).flatMap(securityFor))
      for (const name of Object.keys(requirement)) expect(SECURITY_SCHEMES).toHaveProperty(name);
  });

  it("names every declared route once in the table of levels, under the level it needs", () => {
    const table = levelsTable(ROUTE_ACCESS);
    for (const route of Object.keys(ROUTE_ACCESS))
      expect(table.split(`\`${route}\``).length - 1, route).toBe(route === "GET /api/cloud/metrics/prometheus" ? 2 : 1);
    const row = (who: string) => table.split("\n").find((line) => line.startsWith(`| ${who} |`))!;
    expect(row("researcher")).toContain("`POST /api/queue/submit`");
    expect(row("researcher")).not.toContain("`GET /api/queue`");
    expect(row("admin")).toContain("`GET /api/audit`");
    expect(row("viewer")).toContain("`POST /api/cloud/auth/api-keys` (session cookie only)");
    expect(row("public (no credential)")).toContain("`POST /api/cloud/auth/login`");
  });

  it("refuses to document a route that declares no access, rather than showing it as public", () => {
    const doc = { paths: { "/api/secret": { get: { summary: "x" } } } };
    expect(() => withAccess(doc, ROUTE_ACCESS)).toThrow("GET /api/secret is documented but declares no access");
    const inherited = { paths: { "/toString": { get: { summary: "x" } } } };
    expect(() => withAccess(inherited, ROUTE_ACCESS)).toThrow("declares no access");
  });

  it("serves Swagger UI and ReDoc from this service, not a CDN", async () => {
    const swagger = await t.call("GET", "/docs");
    expect(swagger.headers.get("content-type")).toContain("text/html");
    expect(swagger.text).toContain('src="/docs/assets/swagger-ui-bundle.js"');
    expect(swagger.text).not.toMatch(/https?:\/\//);
    const redoc = await t.call("GET", "/redoc");
    expect(redoc.text).toContain('<redoc spec-url="/openapi.json">');
    expect(redoc.text).not.toMatch(/https?:\/\//);
    for (const [file, type] of [
      ["swagger-ui-bundle.js", "text/javascript"],
      ["swagger-ui.css", "text/css"],
      ["redoc.standalone.js", "text/javascript"],
    ]) {
      const asset = await t.call("GET", `/docs/assets/${file}`);
      expect(asset.status, file).toBe(200);
      expect(asset.headers.get("content-type")).toContain(type);
      expect(asset.text.length).toBeGreaterThan(100_000);
    }
    expect((await t.call("GET", "/docs/assets/..%2Fpackage.json")).status).toBe(404);
  });

  /** GET over node:http, which leaves a gzip body as it came (fetch would decode it). */
  function rawGet(
    path: string,
    headers: Record<string, string>,
  ): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }> {
    return new Promise((done, fail) => {
      const req = httpRequest(new URL(path, t.base), { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => done({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on("error", fail);
      });
      req.on("error", fail);
      req.end();
    });
  }

  /** The body as the client reads it: decoded by the Content-Encoding it came with. */
  function decoded(answer: { headers: Record<string, unknown>; body: Buffer }): Buffer {
    const coding = answer.headers["content-encoding"];
    if (coding === undefined) return answer.body;
    if (coding === "gzip") return gunzipSync(answer.body);
    if (coding === "br") return brotliDecompressSync(answer.body);
    throw new Error(`unexpected Content-Encoding ${String(coding)}`);
  }

  it("sends each asset gzip-encoded to a browser and as it is to a client that does not ask for gzip, byte for byte the npm package's file", async () => {
    for (const [file, pkgFile] of [
      ["swagger-ui-bundle.js", "swagger-ui-dist/swagger-ui-bundle.js"],
      ["swagger-ui.css", "swagger-ui-dist/swagger-ui.css"],
      ["redoc.standalone.js", "redoc/bundles/redoc.standalone.js"],
    ] as const) {
      const original = readFileSync(`node_modules/${pkgFile}`);
      const browser = await rawGet(`/docs/assets/${file}`, { "Accept-Encoding": "gzip, deflate, zstd" });
      expect(browser.status, file).toBe(200);
      expect(browser.headers["content-encoding"], file).toBe("gzip");
      expect(browser.headers["vary"], file).toBe("Accept-Encoding");
      // The service's security headers, as on every answer: a script is never sniffed as anything else.
      expect(browser.headers["x-content-type-options"], file).toBe("nosniff");
      expect(browser.body.length, file).toBeLessThan(original.length / 2);
      expect(gunzipSync(browser.body).equals(original), file).toBe(true);
      // No header (curl without --compressed), identity, or only codings other than gzip and br: the file as it is.
      for (const acceptEncoding of [undefined, "identity", "gzip;q=0, identity", "deflate"]) {
        const plain = await rawGet(`/docs/assets/${file}`, acceptEncoding === undefined ? {} : { "Accept-Encoding": acceptEncoding });
        expect(plain.status, `${file} ${acceptEncoding}`).toBe(200);
        expect(plain.headers["content-encoding"], `${file} ${acceptEncoding}`).toBeUndefined();
        expect(plain.body.equals(original), `${file} ${acceptEncoding}`).toBe(true);
      }
      // Brotli only: re-encoded for the client in front of the Worker, as Cloudflare's edge does.
      const brotli = await rawGet(`/docs/assets/${file}`, { "Accept-Encoding": "br, gzip;q=0" });
      expect(brotli.headers["content-encoding"], file).toBe("br");
      expect(decoded(brotli).equals(original), file).toBe(true);
    }
  });

  it("has no asset under an object's inherited names, and a malformed Accept-Encoding is not an error", async () => {
    for (const name of ["__proto__", "constructor", "hasOwnProperty", "toString", "swagger-ui.css.gz", "SWAGGER-UI.CSS"]) {
      const answer = await rawGet(`/docs/assets/${name}`, { "Accept-Encoding": "identity" });
      expect(answer.status, name).toBe(404);
      expect(JSON.parse(answer.body.toString()).detail, name).toMatch(/not found/i);
    }
    const original = readFileSync("node_modules/swagger-ui-dist/swagger-ui.css");
    for (const odd of [";;, gzip;q=abc, *;q=", "gzip;q=-1", ",,,", "x".repeat(4000)]) {
      const answer = await rawGet("/docs/assets/swagger-ui.css", { "Accept-Encoding": odd });
      expect(answer.status, odd.slice(0, 40)).toBe(200);
      expect(decoded(answer).equals(original), odd.slice(0, 40)).toBe(true);
    }
  });

  it("reads Accept-Encoding as RFC 9110 says: gzip or * with a quality above zero", () => {
    expect(acceptsGzip("gzip")).toBe(true);
    expect(acceptsGzip("gzip, deflate, br")).toBe(true);
    expect(acceptsGzip("GZIP;Q=0.5")).toBe(true);
    expect(acceptsGzip("x-gzip")).toBe(true);
    expect(acceptsGzip("*")).toBe(true);
    expect(acceptsGzip("br, *;q=0.1")).toBe(true);
    expect(acceptsGzip("gzip;q=0, *")).toBe(false);
    expect(acceptsGzip("*;q=0")).toBe(false);
    expect(acceptsGzip("br, deflate")).toBe(false);
    expect(acceptsGzip("identity")).toBe(false);
    expect(acceptsGzip("")).toBe(false);
    expect(acceptsGzip(null)).toBe(false);
    expect(acceptsGzip("gzip;q=abc")).toBe(false);
  });
});
