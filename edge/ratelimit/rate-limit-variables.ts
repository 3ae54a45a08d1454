import { LOOPBACK_RANGES, parseRange, type AddressRange } from "../../shared/ip";
import { defaultRateRule, type RateRule } from "../../shared/rate-rules";
import { ApiError } from "../errors";

/** Rate limiting as configured (README "Rate limiting"). */
export interface RateLimitSettings {
  /** False when RATE_LIMIT_CALLS is 0: nothing is counted. */
  enabled: boolean;
  /** The rule of paths no listed rule covers (RATE_LIMIT_CALLS per RATE_LIMIT_PERIOD seconds). */
  defaultRule: RateRule;
  /** Loopback clients go uncounted: development, unless RATE_LIMIT_LOOPBACK is on. */
  exemptLoopback: boolean;
  /** Peers whose forwarding headers name the client (TRUSTED_PROXIES). */
  trustedProxies: readonly AddressRange[];
}

/** The variables as the Worker received them (unset: undefined). */
export interface RateLimitVariables {
  RATE_LIMIT_CALLS?: string;
  RATE_LIMIT_PERIOD?: string;
  RATE_LIMIT_LOOPBACK?: string;
  TRUSTED_PROXIES?: string;
}

const misconfigured = (detail: string) => new ApiError(500, "misconfigured", detail);

function wholeNumber(name: string, value: string | undefined, fallback: number, min: number): number {
  if (value === undefined || value.trim() === "") return fallback;
  const number = Number(value);
  if (!Number.isSafeInteger(number) || number < min)
    throw misconfigured(`${name} must be a whole number of at least ${min}, not "${value}"`);
  return number;
}

function flag(name: string, value: string | undefined): boolean {
  const text = (value ?? "0").trim().toLowerCase();
  if (["1", "true", "yes", "on"].includes(text)) return true;
  if (["", "0", "false", "no", "off"].includes(text)) return false;
  throw misconfigured(`${name} must be 1 or 0, not "${value}"`);
}

/**
 * TRUSTED_PROXIES: unset means loopback only; `none` or empty trusts no peer; otherwise a
 * comma-separated list of addresses, CIDR ranges and the word `loopback`.
 */
function trustedProxies(value: string | undefined): readonly AddressRange[] {
  if (value === undefined) return LOOPBACK_RANGES;
  const entries = value
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (entries.length === 0 || (entries.length === 1 && entries[0]!.toLowerCase() === "none")) return [];
  return entries.flatMap((entry) => {
    if (entry.toLowerCase() === "loopback") return LOOPBACK_RANGES;
    try {
      return [parseRange(entry)];
    } catch (error) {
      throw misconfigured(`TRUSTED_PROXIES: ${(error as Error).message}`);
    }
  });
}

/**
 * Reads the rate-limit variables (edge/config.ts calls this once per isolate); a bad value is a
 * 500 naming the variable.
 *
 * @example
 * readRateLimitSettings({ RATE_LIMIT_CALLS: "100", RATE_LIMIT_PERIOD: "60" }, "production");
 */
export function readRateLimitSettings(variables: RateLimitVariables, environment: "development" | "production"): RateLimitSettings {
  const calls = wholeNumber("RATE_LIMIT_CALLS", variables.RATE_LIMIT_CALLS, 100, 0);
  const period = wholeNumber("RATE_LIMIT_PERIOD", variables.RATE_LIMIT_PERIOD, 60, 1);
  const limitLoopback = flag("RATE_LIMIT_LOOPBACK", variables.RATE_LIMIT_LOOPBACK);
  return {
    enabled: calls > 0,
    defaultRule: defaultRateRule(calls, period),
    exemptLoopback: environment === "development" && !limitLoopback,
    trustedProxies: trustedProxies(variables.TRUSTED_PROXIES),
  };
}
