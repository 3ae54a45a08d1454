import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findTargetHandler, isMiddleware } from "hono/utils/handler";
import { createApp } from "../edge/app";
import { toOpenApiPath } from "../edge/middleware/authorize";
import { ROUTE_ACCESS } from "../shared/permissions";
import { startTestStack, type TestStack } from "./helpers/stack";

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
    // The S3-compatible storage endpoint (`.all()` routes) is described in the README, not here.
    expect(documented).toEqual(servedRoutes().filter((route) => !route.startsWith("ALL ")));
    expect(servedRoutes()).toContain("ALL /api/cloud/storage/*");
    expect(Object.keys(ROUTE_ACCESS).sort()).toEqual(servedRoutes());
  });

  it("documents validation and auth errors with the shared error body", () => {
    const createUser = doc.paths["/api/users"].post;
    expect(createUser.responses["422"].content["application/json"].schema.$ref).toBe("#/components/schemas/Error");
    expect(createUser.requestBody.content["application/json"].schema.$ref).toBe("#/components/schemas/UserCreate");
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(["apiKey", "bearer", "session", "workerToken"]);
  });

  it("serves Swagger UI and ReDoc from this service, not a CDN", async () => {
    const swagger = await t.call("GET", "/docs");
    expect(swagger.headers.get("content-type")).toContain("text/html");
    expect(swagger.text).toContain('src="/docs/assets/swagger-ui-bundle.js"');
    expect(swagger.text).not.toMatch(/https?:\/\//);
    const redoc = await t.call("GET", "/redoc");
    expect(redoc.text).toContain('<redoc spec-url="/openapi.json">');
    expect(redoc.text).not.toMatch(/https?:\/\//);
    for (const [file, type] of [["swagger-ui-bundle.js", "text/javascript"], ["swagger-ui.css", "text/css"], ["redoc.standalone.js", "text/javascript"]]) {
      const asset = await t.call("GET", `/docs/assets/${file}`);
      expect(asset.status, file).toBe(200);
      expect(asset.headers.get("content-type")).toContain(type);
      expect(asset.text.length).toBeGreaterThan(100_000);
    }
    expect((await t.call("GET", "/docs/assets/..%2Fpackage.json")).status).toBe(404);
  });
});
