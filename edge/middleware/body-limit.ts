import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { AppEnv } from "../app-env";
import { MAX_UPLOAD_BYTES } from "../datasets/datasets";
import { ApiError } from "../errors";
import { MAX_EVENT_BYTES } from "../jobs/events";

/** The cap on a request body where no route below says otherwise: JSON documents and forms. */
export const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024;

/**
 * Routes whose bodies may be larger than the default, by path. The storage endpoint is not
 * here: S3 requests carry their own caps (a single PUT's declared length, each part's, 1 MiB of
 * CompleteMultipartUpload XML), checked by the endpoint as the bytes stream into R2.
 */
const ROUTE_LIMITS: { path: RegExp; maxBytes: number }[] = [
  // Dataset files and zips (spec 4.4).
  { path: /^\/api\/datasets\/upload(\/zip)?$/, maxBytes: MAX_UPLOAD_BYTES },
  // A runner's event batch: up to 200 events (runner/events.ts) of at most MAX_EVENT_BYTES each.
  { path: /^\/api\/workers\/jobs\/[^/]+\/events$/, maxBytes: 200 * MAX_EVENT_BYTES },
];
const OWN_LIMITS = /^\/api\/cloud\/storage(\/|$)/;

/** The body cap of a request path (null: the route checks its own). */
export function bodyLimitFor(path: string): number | null {
  if (OWN_LIMITS.test(path)) return null;
  return ROUTE_LIMITS.find((route) => route.path.test(path))?.maxBytes ?? DEFAULT_BODY_LIMIT_BYTES;
}

/**
 * Caps every request body (bodyLimitFor): counted as the bytes arrive, so a chunked body without
 * Content-Length is cut off too, and never held past the cap. Over it: 413 payload_too_large
 * naming the cap, before the handler reads anything.
 *
 * @example
 * app.use("*", requestBodyLimits());
 */
export function requestBodyLimits(): MiddlewareHandler<AppEnv> {
  const limiters = new Map<number, MiddlewareHandler<AppEnv>>();
  const limiter = (maxSize: number) => {
    let found = limiters.get(maxSize);
    if (!found) {
      found = bodyLimit({
        maxSize,
        onError: () => {
          throw new ApiError(413, "payload_too_large", `The request body is larger than ${maxSize} bytes, the most this route accepts`);
        },
      }) as MiddlewareHandler<AppEnv>;
      limiters.set(maxSize, found);
    }
    return found;
  };
  return async (c, next) => {
    const maxSize = bodyLimitFor(new URL(c.req.url).pathname);
    if (maxSize === null || !c.req.raw.body) return next();
    return limiter(maxSize)(c, next);
  };
}
