import type { HonoRequest, MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env";
import { ApiError } from "../errors";
import { answerKey, claimKey, releaseKey } from "../queue/idempotency-keys";

/** The submit routes that take an `Idempotency-Key` (every route that queues a job). */
const SUBMIT_ROUTES = [
  /^\/api\/queue\/submit$/,
  /^\/api\/cloud\/jobs\/submit$/,
  /^\/api\/training\/start$/,
  /^\/api\/queue\/[^/]+\/retry$/,
];

/** The header of a replayed answer, as Stripe names it. */
export const REPLAYED_HEADER = "Idempotent-Replayed";

/** 1 to 255 visible ASCII characters (a UUID fits; so does any client's own scheme). */
const KEY = /^[\x21-\x7e]{1,255}$/;

// The body through Hono's request, which keeps it for the route's validator to parse (a clone of
// the raw request would tee its stream and read it twice).
async function requestHash(request: HonoRequest, route: string): Promise<string> {
  const body = new Uint8Array(await request.arrayBuffer());
  const head = new TextEncoder().encode(`${route}\n${request.header("content-type") ?? ""}\n`);
  const all = new Uint8Array(head.length + body.length);
  all.set(head);
  all.set(body, head.length);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", all));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The `Idempotency-Key` header of the submit routes: the first answer to a key (per user, for
 * 24 h) is stored and replayed to the same request with `Idempotent-Replayed: true`, queueing
 * nothing; the key with another request is 422 `idempotency_key_reused`; while the first is still
 * being handled, 409 `idempotency_key_in_use`. A 5xx answer is not kept (the client may try
 * again). Without the header nothing changes. A route may store the answer itself, in the batch
 * that stores what it did, and say so (`idempotencyClaim.answered`): POST /api/queue/submit's
 * Scheduler does, so its answer and its job are stored together, in one round trip.
 *
 * @example
 * app.use("*", idempotentSubmits());
 */
export function idempotentSubmits(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const key = c.req.header("idempotency-key");
    const path = new URL(c.req.url).pathname;
    const principal = c.get("principal");
    if (key === undefined || c.req.method !== "POST" || !principal || !SUBMIT_ROUTES.some((r) => r.test(path))) return next();
    if (!KEY.test(key))
      throw new ApiError(
        400,
        "invalid_idempotency_key",
        "Idempotency-Key must be 1 to 255 visible ASCII characters (no spaces or control characters), e.g. a UUID",
      );
    const db = c.get("db");
    const userId = principal.user.id;
    const route = `POST ${path}`;
    const hash = await requestHash(c.req, route);
    const held = await claimKey(db, userId, key, route, hash, new Date());
    if (held !== null) {
      if (held.route !== route || held.requestHash !== hash)
        throw new ApiError(
          422,
          "idempotency_key_reused",
          `This Idempotency-Key was first sent with another request (${held.route}, another body) in the last 24 h; use a new key for a new request`,
        );
      if (held.answer === null)
        throw new ApiError(
          409,
          "idempotency_key_in_use",
          "A request with this Idempotency-Key is still being handled; send it again once that one has answered",
        );
      return new Response(held.answer.body, {
        status: held.answer.status,
        headers: { "content-type": "application/json", [REPLAYED_HEADER]: "true" },
      });
    }
    const claim = { userId, key, answered: false };
    c.set("idempotencyClaim", claim);
    try {
      await next();
    } catch (error) {
      await releaseKey(db, userId, key); // keeps an answer the route stored (only an unanswered key goes)
      throw error;
    }
    // Stored by the route in the same batch as its job (POST /api/queue/submit): nothing left to write.
    if (claim.answered) return;
    if (c.res.status >= 500) await releaseKey(db, userId, key);
    else await answerKey(db, userId, key, { status: c.res.status, body: await c.res.clone().text() });
  };
}
