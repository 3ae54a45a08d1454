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
    /** The worker whose token authenticated a runner's request ("worker" routes). */
    worker: typeof workers.$inferSelect | null;
  };
}
