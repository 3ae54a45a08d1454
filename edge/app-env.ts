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
    /** The worker whose token authenticated a runner's request ("worker" routes). */
    worker: typeof workers.$inferSelect | null;
  };
}
