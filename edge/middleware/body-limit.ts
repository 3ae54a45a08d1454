import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { AppEnv } from "../app-env";
import { MAX_UPLOAD_BYTES } from "../datasets/datasets";
import { ApiError } from "../errors";
import { UNREAD_BODY_DRAIN_BYTES } from "../../shared/body-drain";
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

/**
 * Reads and discards a request body nobody read, up to `limit` bytes: workerd closes a connection
 * whose request body it did not read, with a reset when bytes are left unread, and a reset can
 * destroy the answer before a client (or the local client front) reads it. A body declared larger
 * than `limit` is not read at all, and one without a declared length is read until `limit` and
 * then left: its client may see the connection reset instead of the answer.
 */
async function drainBody(request: Request, limit: number): Promise<void> {
  if (!request.body || request.bodyUsed || request.body.locked) return;
  const header = request.headers.get("content-length");
  if (header !== null && !(Number(header) <= limit)) return;
  const reader = request.body.getReader();
  let read = 0;
  try {
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      read += chunk.value.byteLength;
      if (read > limit) return void (await reader.cancel());
    }
  } catch {
    // The client went away: nothing left to answer.
  }
}

/**
 * Reads and discards what an answer left unread of its request's body, up to
 * UNREAD_BODY_DRAIN_BYTES (a 401, 403 or 404 answered before the body was read; drainBody says
 * why). Runs first: it sees every answer, refusals of the middleware after it included.
 *
 * @example
 * app.use("*", drainUnreadBodies());
 */
export function drainUnreadBodies(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    await drainBody(c.req.raw, UNREAD_BODY_DRAIN_BYTES);
  };
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
          await drainBody(c.req.raw, maxSize + UNREAD_BODY_DRAIN_BYTES);
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
