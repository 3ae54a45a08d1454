import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ErrorBody } from "../shared/schemas/common";
import type { User } from "../shared/schemas/users";
import type { Config } from "./config";
import type { Database } from "./db/client";
import type { workers } from "./db/schema";
import type { Env } from "./env";
import type { Logger } from "./log";

/** Who is calling, once the authorisation middleware has identified them. */
export interface Principal {
  user: User;
  via: "session" | "api_key";
  /** For sessions: the stored hash of the cookie's token (to log out). */
  sessionTokenHash?: string;
  apiKeyId?: number;
}

/** An error as the API answers it, before it is rendered: its status, `{ detail, code }` body and extra headers. */
export interface ErrorAnswer {
  status: ContentfulStatusCode;
  body: ErrorBody;
  headers?: Record<string, string>;
}

/** What every handler can rely on: typed bindings and the per-request context. */
export interface AppEnv {
  Bindings: Env;
  Variables: {
    config: Config;
    db: Database;
    log: Logger;
    requestId: string;
    principal: Principal | null;
    /**
     * The client's address: the direct peer, or the forwarding headers' client when the peer is a
     * trusted proxy (edge/ratelimit/client-ip.ts). Set before authorisation on every request.
     */
    clientIp: string;
    /**
     * The rate limiter's verdict on this request (null: not counted: excluded path, limiting off,
     * or loopback in development). `limited`: it was refused with 429. Read by the HTTP metrics.
     */
    rateLimit: { rule: string; limited: boolean } | null;
    /**
     * Renders this request's errors and 404s when its area answers in another format than
     * `{ detail, code }` (the storage endpoint: S3's XML); unset: JSON. Set by the area's own
     * middleware, before rate limiting, so a refusal from any middleware is rendered by it too.
     */
    renderError?: (answer: ErrorAnswer) => Response;
    /**
     * The metrics label of a request no typed route matched (an area's `.all()` routes): bounded,
     * never a path's variable parts. Set by the area's own middleware; unset: `unmatched`.
     */
    routeLabel?: string;
    /**
     * The Idempotency-Key this request claimed (edge/middleware/idempotency.ts), unset without one.
     * `answered`: the route stored the answer itself, with what it did; the middleware then leaves it.
     */
    idempotencyClaim?: { userId: number; key: string; answered: boolean };
    /** The worker whose token authenticated a runner's request ("worker" routes). */
    worker: typeof workers.$inferSelect | null;
  };
}
