import type { Env } from "../env";
import { objectNamed } from "../durable-object-names";

/** The answer of RateLimiter.hit: the window's verdict on one request. */
export interface RateVerdict {
  allowed: boolean;
  /** Requests still admitted right now. */
  remaining: number;
  /** Epoch ms when the oldest request in the window leaves it (when refused: when to retry). */
  resetAt: number;
  /** The limiter's clock when it decided (epoch ms), so the caller computes waits on one clock. */
  now: number;
  /**
   * For a refusal: how many refusals an audit entry written now stands for (itself and those not
   * audited since the last entry); 0: leave this one to a later entry.
   */
  audit: number;
}

/** The rate limiter's RPC methods (edge/ratelimit/limiter.ts). */
export interface RateLimiterApi {
  hit(rule: string, limit: number, windowMs: number): Promise<RateVerdict>;
  forget(rule: string): Promise<void>;
}

/**
 * The limiter of one client address.
 *
 * @example
 * const verdict = await limiterOf(c.env, "203.0.113.7").hit("login", 5, 60_000);
 */
export function limiterOf(env: Pick<Env, "RATE_LIMITER">, clientIp: string): RateLimiterApi {
  return objectNamed<RateLimiterApi>(env.RATE_LIMITER, clientIp);
}
