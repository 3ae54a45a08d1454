import { createRoute, z, type OpenAPIHono } from "@hono/zod-openapi";
import pkg from "../../package.json";
import { ROUTE_ACCESS } from "../../shared/permissions";
import { ErrorBody } from "../../shared/schemas/common";
import type { AppEnv } from "../app-env";
import { clientAcceptEncoding, docsAssetResponse } from "../docs-assets";
import { REDOC_PAGE, SWAGGER_PAGE } from "../docs-pages";
import { notFound } from "../errors";
import { createRouter } from "../router";
import { levelsTable, withAccess, type OpenApiDocument } from "./openapi-access";
import { apiDescription, TAGS } from "./openapi-tags";

const OPENAPI_CONFIG = {
  openapi: "3.1.0",
  info: { title: "Training service API", version: pkg.version, description: apiDescription(levelsTable(ROUTE_ACCESS)) },
  tags: TAGS,
};

const html = { description: "HTML page", content: { "text/html": { schema: z.string() } } };
const tags = ["Documentation"];

/** The API description routes; they document the app they are mounted on, themselves included. */
export function docsRoutes(app: OpenAPIHono<AppEnv>) {
  const docs = createRouter();
  let document: OpenApiDocument | undefined;
  docs.openapi(
    createRoute({
      method: "get",
      path: "/openapi.json",
      tags,
      summary: "This OpenAPI 3.1 document",
      description: "OpenAPI 3.1, generated from the routes and their zod schemas; each operation's access from shared/permissions.ts.",
      responses: { 200: { description: "OpenAPI 3.1", content: { "application/json": { schema: z.record(z.string(), z.unknown()) } } } },
    }),
    (c) => {
      // The routes are fixed once the app is built, so the document is generated once per isolate.
      document ??= withAccess(app.getOpenAPI31Document(OPENAPI_CONFIG) as unknown as OpenApiDocument, ROUTE_ACCESS);
      return c.json(document, 200);
    },
  );
  docs.openapi(
    createRoute({
      method: "get",
      path: "/docs",
      tags,
      summary: "Swagger UI",
      description: "Swagger UI, served from this service (no CDN): try operations with your session cookie or an API key.",
      responses: { 200: html },
    }),
    (c) => c.html(SWAGGER_PAGE),
  );
  docs.openapi(
    createRoute({
      method: "get",
      path: "/redoc",
      tags,
      summary: "ReDoc",
      description: "ReDoc, served from this service (no CDN).",
      responses: { 200: html },
    }),
    (c) => c.html(REDOC_PAGE),
  );
  docs.openapi(
    createRoute({
      method: "get",
      path: "/docs/assets/{file}",
      tags,
      summary: "Static files of the documentation pages",
      description:
        "The pages' scripts and styles, embedded in the Worker from the npm packages. Sent gzip-encoded to a client whose Accept-Encoding admits gzip (as browsers' does), else decoded. Another name is 404.",
      request: { params: z.object({ file: z.string().openapi({ param: { name: "file", in: "path" }, example: "swagger-ui.css" }) }) },
      responses: {
        200: { description: "The file", content: { "text/plain": { schema: z.string() } } },
        404: { description: "No such file", content: { "application/json": { schema: ErrorBody } } },
      },
    }),
    (c) => {
      // Served from the npm packages embedded in the bundle: the machines that run this have no CDN.
      const answer = docsAssetResponse(c.req.valid("param").file, clientAcceptEncoding(c.req.raw));
      if (!answer) throw notFound("Documentation asset");
      return answer as never;
    },
  );
  return docs;
}
