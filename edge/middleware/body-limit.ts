import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { AppEnv } from "../app-env";
import { MAX_UPLOAD_BYTES } from "../datasets/datasets";
import { ApiError } from "../errors";
import { MAX_EVENT_BYTES } from "../../shared/schemas/events";
import { MAX_WEBHOOK_BYTES } from "../cloud/webhook-intake";

/** The cap on a request body where no route below says otherwise: JSON documents and forms. */
export const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024;

/**
 * Routes whose bodies may be larger than the default, by path. The storage endpoint is not
 * here: S3 requests carry their own caps (a single PUT's declared length, each part's, 1 MiB of
 * CompleteMultipartUpload XML), checked by the endpoint as the bytes stream into R2.
 */
const ROUTE_LIMITS: { path: RegExp; maxBytes: number }[] = [
  // Dataset files and zips (POST /api/datasets/upload and /upload/zip).
  { path: /^\/api\/datasets\/upload(\/zip)?$/, maxBytes: MAX_UPLOAD_BYTES },
  // A runner's event batch: up to 200 events (runner/agent/events.ts) of at most MAX_EVENT_BYTES each.
  { path: /^\/api\/workers\/jobs\/[^/]+\/events$/, maxBytes: 200 * MAX_EVENT_BYTES },
  // A provider's webhook: the whole training, its cumulative logs included (cloud/webhook-intake.ts).
  { path: /^\/api\/webhooks\/[^/]+$/, maxBytes: MAX_WEBHOOK_BYTES },
];
const OWN_LIMITS = /^\/api\/cloud\/storage(\/|$)/;

/** The body cap of a request path (null: the route checks its own). */
export function bodyLimitFor(path: string): number | null {
  if (OWN_LIMITS.test(path)) return null;
  return ROUTE_LIMITS.find((route) => route.path.test(path))?.maxBytes ?? DEFAULT_BODY_LIMIT_BYTES;
}

/** How far past its cap a declared body is read and discarded before the 413 (see drainDeclared). */
const DRAIN_BYTES = 8 * 1024 * 1024;

/**
 * Reads and discards a body refused from its Content-Length, when it is at most DRAIN_BYTES past
 * the cap: workerd resets a connection it closes with unread bytes, and a reset can destroy the
 * 413 before a client (or the local client front) reads it. A larger body is not worth reading:
 * its client may see the connection reset instead of the 413.
 */
async function drainDeclared(request: Request, maxSize: number): Promise<void> {
  const declared = Number(request.headers.get("content-length"));
  if (!request.body || request.body.locked || !Number.isFinite(declared) || declared > maxSize + DRAIN_BYTES) return;
  const reader = request.body.getReader();
  try {
    while (!(await reader.read()).done);
  } catch {
    // The client went away: nothing left to answer.
  }
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
        onError: async (c) => {
          await drainDeclared(c.req.raw, maxSize);
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
