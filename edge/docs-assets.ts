// The API documentation pages' scripts and styles (Swagger UI, ReDoc), embedded in the Worker
// gzip-compressed and base64-encoded by the bundler (edge/local/bundle.ts, `gzip-asset:`).
// Embedded as they are, they were 2.6 MB of the 5.4 MB bundle, and every start paid for them:
// Miniflare encodes the bundle into workerd's configuration and workerd parses it (issue 31).
// Compressed they are 1.0 MB, and a browser gets them as the gzip it asks for anyway.
import redocJs from "gzip-asset:redoc/bundles/redoc.standalone.js";
import swaggerCss from "gzip-asset:swagger-ui-dist/swagger-ui.css";
import swaggerJs from "gzip-asset:swagger-ui-dist/swagger-ui-bundle.js";

const EMBEDDED: Record<string, { gzipBase64: string; type: string }> = {
  "swagger-ui.css": { gzipBase64: swaggerCss, type: "text/css; charset=utf-8" },
  "swagger-ui-bundle.js": { gzipBase64: swaggerJs, type: "text/javascript; charset=utf-8" },
  "redoc.standalone.js": { gzipBase64: redocJs, type: "text/javascript; charset=utf-8" },
};

const decoded = new Map<string, Uint8Array<ArrayBuffer>>();

/**
 * Whether an Accept-Encoding header admits gzip (RFC 9110 §12.5.3): `gzip` or `*` with a quality
 * above zero, unless gzip itself is given q=0. No header means any coding is acceptable, but a
 * client that sends none (curl, scripts) reads the body as it comes, so it gets it decoded.
 */
export function acceptsGzip(acceptEncoding: string | null): boolean {
  if (!acceptEncoding) return false;
  let gzip: number | undefined;
  let any: number | undefined;
  for (const item of acceptEncoding.split(",")) {
    const [name = "", ...params] = item.split(";").map((part) => part.trim().toLowerCase());
    const qParam = params.find((param) => param.startsWith("q="));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    const quality = Number.isFinite(q) ? q : 0;
    if (name === "gzip" || name === "x-gzip") gzip = quality;
    else if (name === "*") any = quality;
  }
  return (gzip ?? any ?? 0) > 0;
}

/**
 * The client's own Accept-Encoding. Cloudflare's edge, and Miniflare in front of workerd, hand the
 * Worker `Accept-Encoding: br, gzip` whatever the client sent, keep the client's header in
 * `request.cf.clientAcceptEncoding` ("" when it sent none), and re-encode the Worker's answer
 * for the client; without `cf` (a plain fetch) the request's own header is the client's.
 */
export function clientAcceptEncoding(request: Request): string | null {
  const cf = (request as { cf?: { clientAcceptEncoding?: unknown } }).cf;
  return typeof cf?.clientAcceptEncoding === "string" ? cf.clientAcceptEncoding : request.headers.get("Accept-Encoding");
}

/**
 * The named file's answer: its gzip bytes as they are (Content-Encoding: gzip) to a client that
 * accepts gzip, else the file decoded; undefined for a name that is not one of the files.
 */
export function docsAssetResponse(name: string, acceptEncoding: string | null): Response | undefined {
  if (!Object.hasOwn(EMBEDDED, name)) return undefined;
  const { gzipBase64, type } = EMBEDDED[name]!;
  let gzip = decoded.get(name);
  if (!gzip) {
    gzip = Uint8Array.from(atob(gzipBase64), (char) => char.charCodeAt(0));
    decoded.set(name, gzip);
  }
  const headers = { "Content-Type": type, "Cache-Control": "public, max-age=86400", Vary: "Accept-Encoding" };
  if (acceptsGzip(acceptEncoding)) {
    // "manual": the body is already encoded, so workerd sends it as it is rather than gzipping it
    // again (workers-types has the field; Node's ResponseInit, for the tests that import this, has not).
    const init: ResponseInit & { encodeBody: "manual" } = {
      status: 200,
      headers: { ...headers, "Content-Encoding": "gzip" },
      encodeBody: "manual",
    };
    return new Response(gzip, init);
  }
  return new Response(new Blob([gzip]).stream().pipeThrough(new DecompressionStream("gzip")), { status: 200, headers });
}
