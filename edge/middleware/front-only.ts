import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env";
import { ApiError } from "../errors";

/** The header the local front adds (edge/local/client-front.ts FRONT_TOKEN_HEADER). */
const FRONT_TOKEN_HEADER = "x-service-front";

/** Constant-time equality of two strings (the token's length is no secret). */
function same(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * Locally (`npm start`), workerd listens on a private loopback port, and only the client front -
 * which sets the client's address (CF-Connecting-IP) from its socket and refuses foreign host
 * names - may talk to it: every request must carry this start's SERVICE_FRONT_TOKEN, else 403
 * `front_only`, so a process on the box cannot choose its own address (audit, webhook allowlists,
 * the loopback proof of the first admin). Deployed, the binding is unset and this does nothing.
 *
 * @example
 * app.use("*", frontOnly());
 */
export function frontOnly(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const token = c.env.SERVICE_FRONT_TOKEN;
    if (token && !same(c.req.header(FRONT_TOKEN_HEADER) ?? "", token))
      throw new ApiError(
        403,
        "front_only",
        "This port takes requests only from the service's own front; use the address npm start printed",
      );
    await next();
  };
}
