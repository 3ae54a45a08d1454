import type { Env } from "../env";
import { objectNamed } from "../durable-object-names";

/**
 * A lease's slots are recorded this far ahead of the limiter's decision: the latest moment the
 * Worker may spend them (edge/ratelimit/leases.ts stops at half of it, by its own clock).
 */
export const LEASE_RECORD_AHEAD_MS = 200;

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
  /**
   * Slots granted with an admission (RateLimiter.hit's `lease`): `slots` more admissions already
   * recorded at `at`, for the caller to spend on its next requests (edge/ratelimit/leases.ts).
   */
  lease?: { slots: number; at: number };
}

/** What a caller holding leases (edge/ratelimit/leases.ts) asks RateLimiter.hit for besides a verdict. */
export interface LeaseRequest {
  /** Slots wanted with an admission. */
  lease?: number;
  /** Unspent slots of expired leases, given back first. */
  returned?: readonly LeaseReturn[];
  /** The caller still holds slots and spends one if refused: the refusal is not one, and not audited. */
  holding?: boolean;
}

/** Unspent slots of an expired lease, given back: `count` of those recorded at `at`. */
export interface LeaseReturn {
  at: number;
  count: number;
}

/** The rate limiter's RPC methods (edge/ratelimit/limiter.ts). */
export interface RateLimiterApi {
  hit(rule: string, limit: number, windowMs: number, options?: LeaseRequest): Promise<RateVerdict>;
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
