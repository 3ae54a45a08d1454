/**
 * The documentation pages' HTML (Swagger UI at /docs, ReDoc at /redoc), apart from their routes (edge/routes/docs.ts)
 * so that the security headers (edge/middleware/security-headers.ts) can take the Swagger page's inline script, whose
 * hash its Content-Security-Policy allows, without middleware importing routes.
 */

/** The Swagger page's one inline script: its hash is what the page's CSP allows (edge/middleware/security-headers.ts). */
export const SWAGGER_INIT_SCRIPT = `window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", withCredentials: true });`;

/** Swagger UI, its files served from /docs/assets. */
export const SWAGGER_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Training service API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div><script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>${SWAGGER_INIT_SCRIPT}</script>
</body></html>`;

/** ReDoc, its script served from /docs/assets. */
export const REDOC_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Training service API</title></head>
<body><redoc spec-url="/openapi.json"></redoc><script src="/docs/assets/redoc.standalone.js"></script></body></html>`;
