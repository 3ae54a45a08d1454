import { createRoute, z } from "@hono/zod-openapi";
import dashboard from "ui-build:dashboard";
import { ErrorBody } from "../../shared/schemas/common";
import { notFound } from "../errors";
import { createRouter } from "../router";

/*
 * The dashboard (edge/ui): one HTML page at `/` that loads one script and one stylesheet, both
 * embedded in the Worker at build time (edge/local/ui-build.ts). The page has no inline script or
 * style, so its Content-Security-Policy (edge/middleware/security-headers.ts) allows only this
 * origin's files. The app routes in the URL's fragment (`/#/jobs/<id>`), so `/` is its only page.
 */

const FILES: Record<string, { body: string; type: string }> = {
  "app.js": { body: dashboard.js, type: "text/javascript; charset=utf-8" },
  "app.css": { body: dashboard.css, type: "text/css; charset=utf-8" },
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Training service</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/ui/app.css?v=${dashboard.version}">
<script type="module" src="/ui/app.js?v=${dashboard.version}"></script>
</head>
<body>
<div id="app"><noscript>The training service's dashboard needs JavaScript. The API is at <a href="/docs">/docs</a>.</noscript></div>
</body>
</html>`;

const tags = ["Dashboard"];
const ETAG = `"${dashboard.version}"`;

export const uiRoutes = createRouter();

uiRoutes.openapi(
  createRoute({
    method: "get",
    path: "/",
    tags,
    summary: "The dashboard",
    description: "The web dashboard: the queue, live training and administration. It logs in with a session cookie.",
    responses: { 200: { description: "HTML page", content: { "text/html": { schema: z.string() } } } },
  }),
  (c) => c.html(PAGE, 200, { "Cache-Control": "no-cache" }),
);

uiRoutes.openapi(
  createRoute({
    method: "get",
    path: "/ui/{file}",
    tags,
    summary: "The dashboard's script and stylesheet",
    description:
      "`app.js` and `app.css`, built into the Worker. Answers carry an ETag (the build's version): a browser revalidates and gets 304 until the service is updated. Another name is 404.",
    request: {
      params: z.object({
        file: z
          .string()
          .max(100)
          .openapi({ param: { name: "file", in: "path" }, example: "app.js" }),
      }),
    },
    responses: {
      200: { description: "The file", content: { "text/plain": { schema: z.string() } } },
      304: { description: "Not modified since the version the browser holds" },
      404: { description: "No such file", content: { "application/json": { schema: ErrorBody } } },
    },
  }),
  (c) => {
    const file = FILES[c.req.valid("param").file];
    if (!file) throw notFound("Dashboard file");
    const headers = { "Content-Type": file.type, "Cache-Control": "no-cache", ETag: ETAG };
    if (c.req.header("if-none-match") === ETAG) return c.body(null, 304, headers);
    return c.body(file.body, 200, headers);
  },
);
