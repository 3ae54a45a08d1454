import type { Context, MiddlewareHandler } from "hono";
import { rateLimitKey } from "../../shared/ip";
import { isRateLimitExempt, rateRuleFor, uncountedRateLimitHeaders, type RateRule } from "../../shared/rate-rules";
import type { AppEnv } from "../app-env";
import { auditLater } from "../audit/trail";
import { ApiError } from "../errors";
import { clientAddress, fromGenuineLoopback } from "../ratelimit/client-ip";
import { RateLeases } from "../ratelimit/leases";
import { limiterOf, type RateVerdict } from "../ratelimit/limiter-types";

/** This isolate's leases on the clients' limiters. */
const leases = new RateLeases();

/** The three X-RateLimit headers and the IETF draft's two, for one verdict. */
export function rateLimitHeaders(rule: RateRule, verdict: RateVerdict): Record<string, string> {
  const seconds = Math.max(0, Math.ceil((verdict.resetAt - verdict.now) / 1000));
  return {
    "X-RateLimit-Limit": String(rule.calls),
    "X-RateLimit-Remaining": String(verdict.remaining),
    // Rounded up: a client that waits until then is admitted (when it was refused).
    "X-RateLimit-Reset": String(Math.ceil(verdict.resetAt / 1000)),
    "RateLimit-Policy": `"${rule.name}";q=${rule.calls};w=${rule.periodSeconds}`,
    RateLimit: `"${rule.name}";r=${verdict.remaining};t=${seconds}`,
  };
}

/**
 * Puts `headers` on the answer unless a limit further down already put its own there: a failure
 * limit's 429 (edge/middleware/failure-limits.ts) speaks for the window that refused it. A
 * WebSocket upgrade (101) is left alone: copying it would lose its socket.
 */
function putHeaders(c: Context<AppEnv>, headers: Record<string, string>): void {
  if (c.res.status === 101 || c.res.headers.has("X-RateLimit-Limit")) return;
  // In place: c.header() would copy the whole Response per header. A Response passed through
  // from a fetch has immutable headers, and only then is a copy needed.
  try {
    for (const [name, value] of Object.entries(headers)) c.res.headers.set(name, value);
  } catch {
    for (const [name, value] of Object.entries(headers)) c.header(name, value);
  }
}

/**
 * Per-client rate limiting (the API document's "Rate limiting"), before authorisation: resolves
 * the client's address (set as `clientIp` for everything after), picks the request's rule
 * (shared/rate-rules.ts) and asks that client's RateLimiter Durable Object for a verdict (a busy
 * client's next few admissions granted ahead as a lease: edge/ratelimit/leases.ts). A refusal is a 429 with `Retry-After`
 * before any credential is looked at, so no credential, valid or not, changes a limit. IPv6
 * clients are counted by their /64. Not counted: excluded paths, and genuine loopback peers in
 * development unless RATE_LIMIT_LOOPBACK is on (a loopback address named by a forwarding header
 * is counted: a proxy on this machine forwards everyone). When the limiter cannot be reached the
 * request is served uncounted and a warning logged: an outage of the limiter must not become an
 * outage of the service.
 *
 * Every answer but a WebSocket upgrade's carries X-RateLimit-Limit, -Remaining and -Reset,
 * errors and 404s included (Hono has turned them into `c.res` by the time `next()`
 * returns); an uncounted one
 * describes the rule that would apply (uncountedRateLimitHeaders), without a round trip. Counted
 * answers also carry the IETF draft's RateLimit-Policy and RateLimit. With limiting off
 * (RATE_LIMIT_CALLS=0) there is no limit to describe, and no header.
 *
 * @example
 * app.use("*", rateLimit());
 */
export function rateLimit(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const settings = c.get("config").rateLimit;
    const clientIp = clientAddress(c.req.raw.headers, settings.trustedProxies);
    c.set("clientIp", clientIp);
    if (!settings.enabled) return next();
    const method = c.req.method;
    const path = c.req.path;
    const rule = rateRuleFor(method, path, settings.defaultRule);
    const uncounted = async () => {
      await next();
      putHeaders(c, uncountedRateLimitHeaders(rule, Date.now()));
    };
    if (isRateLimitExempt(path) || (settings.exemptLoopback && fromGenuineLoopback(c.req.raw.headers, settings.trustedProxies)))
      return uncounted();

    let verdict: RateVerdict;
    try {
      const key = rateLimitKey(clientIp);
      verdict = await leases.verdict(() => limiterOf(c.env, key), key, rule);
    } catch (error) {
      c.get("log").warning("rate limiter unreachable: request served without limiting", {
        client_ip: clientIp,
        rule: rule.name,
        error: String(error),
      });
      return uncounted();
    }
    c.set("rateLimit", { rule: rule.name, limited: !verdict.allowed });
    const headers = rateLimitHeaders(rule, verdict);

    if (!verdict.allowed) {
      const retryAfter = Math.max(1, Math.ceil((verdict.resetAt - verdict.now) / 1000));
      if (verdict.audit > 0) {
        auditLater(c, {
          event_type: "rate_limited",
          target: path,
          details: { method, path, rule: rule.name, limit: rule.calls, window_seconds: rule.periodSeconds, refusals: verdict.audit },
        });
      }
      throw new ApiError(
        429,
        "rate_limited",
        `Rate limit exceeded: at most ${rule.calls} requests per ${rule.periodSeconds} s for ${method} ${path} (rule "${rule.name}"); retry in ${retryAfter} s`,
        undefined,
        { ...headers, "Retry-After": String(retryAfter) },
      );
    }

    await next();
    putHeaders(c, headers);
  };
}
