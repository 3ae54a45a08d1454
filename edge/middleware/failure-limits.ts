import type { Context } from "hono";
import { rateLimitHeaders } from "./rate-limit";
import { rateLimitKey } from "../../shared/ip";
import { LOGIN_FAILURE_RULE, WORKER_TOKEN_FAILURE_RULE, type RateRule } from "../../shared/rate-rules";
import type { AppEnv } from "../app-env";
import { auditLater } from "../audit/trail";
import { sha256Hex } from "../auth/crypto";
import { ApiError } from "../errors";
import { fromGenuineLoopback } from "../ratelimit/client-ip";
import { limiterOf, type RateLimiterApi, type RateVerdict } from "../ratelimit/limiter-types";

/*
 * Limits on failures rather than on requests (README "Rate limiting"): failed logins per
 * username and client address, and failed worker-token authentications per address. Both use
 * the RateLimiter Durable Object, keyed by something other than a request's rule. An unreachable
 * limiter is logged and the request served, as for the per-request limits.
 */

/**
 * A short hash of a typed username (lower-cased), for logs and audit entries: attempts against
 * one name can be correlated without keeping what was typed (people type their password into
 * the username field).
 *
 * @example
 * await usernameDigest("Admin"); // "8c6976e5b5410415"
 */
export async function usernameDigest(username: string): Promise<string> {
  return (await sha256Hex(username.trim().toLowerCase())).slice(0, 16);
}

function refusal(c: Context<AppEnv>, rule: RateRule, verdict: RateVerdict, what: string): ApiError {
  const retryAfter = Math.max(1, Math.ceil((verdict.resetAt - verdict.now) / 1000));
  if (verdict.audit > 0) {
    auditLater(c, {
      event_type: "rate_limited",
      target: c.req.path,
      details: {
        method: c.req.method,
        path: c.req.path,
        rule: rule.name,
        limit: rule.calls,
        window_seconds: rule.periodSeconds,
        refusals: verdict.audit,
      },
    });
  }
  return new ApiError(
    429,
    "rate_limited",
    `Rate limit exceeded: at most ${rule.calls} ${what} per ${rule.periodSeconds} s (rule "${rule.name}"); retry in ${retryAfter} s`,
    undefined,
    {
      ...rateLimitHeaders(rule, verdict),
      "Retry-After": String(retryAfter),
    },
  );
}

async function ask<T>(c: Context<AppEnv>, rule: RateRule, call: () => Promise<T>): Promise<T | null> {
  try {
    return await call();
  } catch (error) {
    c.get("log").warning("rate limiter unreachable: failure limit not applied", { rule: rule.name, error: String(error) });
    return null;
  }
}

/**
 * The failed-login limit of one typed username from the client's address (an IPv6 client by its
 * /64, as the per-request limits). `admit` counts the attempt and throws 429 once the name has
 * had 10 attempts in 15 minutes from that address; `succeeded` forgives them all, so only
 * failures stay counted. Counted per address, so a guesser elsewhere never locks the user out:
 * the right password from an address that has not been failing logs in. Unknown and known names
 * are treated alike, so the answer reveals nothing.
 *
 * @example
 * const limit = await loginFailureLimit(c, username);
 * await limit.admit();
 * if (await checkPassword(db, username, password)) await limit.succeeded();
 */
export async function loginFailureLimit(
  c: Context<AppEnv>,
  username: string,
): Promise<{ admit(): Promise<void>; succeeded(): Promise<void> }> {
  const rule = LOGIN_FAILURE_RULE;
  const enabled = c.get("config").rateLimit.enabled;
  const limiter: RateLimiterApi = limiterOf(c.env, `login-user:${await usernameDigest(username)}@${rateLimitKey(c.get("clientIp"))}`);
  return {
    async admit() {
      if (!enabled) return;
      const verdict = await ask(c, rule, () => limiter.hit(rule.name, rule.calls, rule.periodSeconds * 1000));
      if (verdict && !verdict.allowed) throw refusal(c, rule, verdict, "failed logins for one username from one address");
    },
    async succeeded() {
      if (enabled) await ask(c, rule, () => limiter.forget(rule.name));
    },
  };
}

/**
 * Counts a failed worker-token authentication against the client's address; past 20 a minute
 * the answer is 429 instead of 401. A valid token is never counted or refused, so a guesser
 * behind the same address as a runner cannot lock that runner out.
 *
 * @example
 * if (!worker) await countWorkerTokenFailure(c); // throws 429 when over the limit
 */
export async function countWorkerTokenFailure(c: Context<AppEnv>): Promise<void> {
  const rule = WORKER_TOKEN_FAILURE_RULE;
  const settings = c.get("config").rateLimit;
  if (!settings.enabled || (settings.exemptLoopback && fromGenuineLoopback(c.req.raw.headers, settings.trustedProxies))) return;
  const verdict = await ask(c, rule, () =>
    limiterOf(c.env, rateLimitKey(c.get("clientIp"))).hit(rule.name, rule.calls, rule.periodSeconds * 1000),
  );
  if (verdict && !verdict.allowed) throw refusal(c, rule, verdict, "failed worker-token authentications");
}
