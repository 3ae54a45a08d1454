import type { MiddlewareHandler } from "hono";
import { secureHeaders } from "hono/secure-headers";
import type { AppEnv } from "../app-env";
import { SWAGGER_INIT_SCRIPT } from "../docs-pages";

/*
 * Standard security headers (hono/secure-headers: nosniff, frame and opener isolation,
 * no-referrer, HSTS, ...) on every answer, with a Content-Security-Policy. The API answers JSON,
 * which never needs to load anything: `default-src 'none'`. The two documentation pages need
 * their own scripts and styles: Swagger UI one inline script (allowed by its hash, not by
 * 'unsafe-inline'), and both set inline styles at run time (styled-components, style
 * attributes), ReDoc a search worker from a blob: URL, and images as data: URIs.
 * The dashboard (`/`) loads only its own script and stylesheet: no inline script or style at all.
 * Its images are this origin's or data: URIs (validation previews), its calls go to this origin.
 * Headers a route set itself are kept (the storage endpoint's object reads carry their own
 * sandboxing CSP), and WebSocket upgrades (101) are left alone.
 */

const DOCS_PAGES = new Set(["/docs", "/redoc"]);

const common = { overwrite: false, crossOriginResourcePolicy: "same-origin", referrerPolicy: "no-referrer" } as const;

const apiHeaders = secureHeaders({
  ...common,
  contentSecurityPolicy: { defaultSrc: ["'none'"], frameAncestors: ["'none'"], baseUri: ["'none'"], formAction: ["'none'"] },
});

async function sha256Base64(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return btoa(String.fromCharCode(...digest));
}

const dashboardHeaders = secureHeaders({
  ...common,
  contentSecurityPolicy: {
    defaultSrc: ["'none'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'"],
    imgSrc: ["'self'", "data:"],
    connectSrc: ["'self'"],
    manifestSrc: ["'self'"],
    baseUri: ["'none'"],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
  },
});

let docsHeaders: Promise<MiddlewareHandler> | undefined;
const docsPageHeaders = () =>
  (docsHeaders ??= sha256Base64(SWAGGER_INIT_SCRIPT).then((hash) =>
    secureHeaders({
      ...common,
      contentSecurityPolicy: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'", `'sha256-${hash}'`],
        styleSrc: ["'self'", "'unsafe-inline'"],
        imgSrc: ["'self'", "data:"],
        fontSrc: ["'self'", "data:"],
        workerSrc: ["'self'", "blob:"],
        connectSrc: ["'self'"],
        objectSrc: ["'none'"],
        baseUri: ["'none'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
      },
    }),
  ));

/**
 * Puts the security headers on every answer once the route has made it: errors, 404s and
 * streams included.
 *
 * @example
 * app.use("*", securityHeaders());
 */
export function securityHeaders(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    if (c.res.status === 101) return;
    // A Response passed through from a fetch (a Durable Object's stream) has immutable headers.
    try {
      c.res.headers.set("X-Content-Type-Options", c.res.headers.get("X-Content-Type-Options") ?? "nosniff");
    } catch {
      c.res = new Response(c.res.body, c.res);
    }
    const apply = c.req.path === "/" ? dashboardHeaders : DOCS_PAGES.has(c.req.path) ? await docsPageHeaders() : apiHeaders;
    await apply(c, async () => {});
  };
}
