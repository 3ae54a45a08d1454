/**
 * The rate-limit rules (the API document's "Rate limiting"), as data, and the one function that
 * picks a request's rule.
 *
 * A pattern covers its path and everything under it, segment by segment (`/api/webhooks/` and
 * `/api/webhooks` both cover `/api/webhooks/github`, neither covers `/api/webhooksx`); `<id>`
 * stands for one path segment. The first rule whose pattern and method match wins, so the table
 * is ordered most specific first: job cancellation (`/api/cloud/jobs/<id>/cancel`) comes before
 * job submission, whose pattern `/api/cloud/jobs` would otherwise make the cancel rule unreachable.
 */

import { remembered } from "./remembered";

export interface RateRule {
  /** Names the rule's window (one per client and rule) and its `RateLimit-Policy`. */
  name: string;
  patterns: readonly string[];
  /** Upper-case methods the rule applies to; "all": every method. */
  methods: readonly string[] | "all";
  /** At most `calls` requests in any `periodSeconds` seconds. */
  calls: number;
  periodSeconds: number;
}

/**
 * The per-route rules. The sign-in rules guard the service's real paths (`/api/cloud/auth/...`) as
 * well as the short `/api/auth/...` forms; both share one window, so alternating paths gains nothing.
 */
export const RATE_RULES: readonly RateRule[] = [
  { name: "login", patterns: ["/api/auth/login", "/api/cloud/auth/login"], methods: ["POST"], calls: 5, periodSeconds: 60 },
  { name: "register", patterns: ["/api/auth/register", "/api/cloud/auth/register"], methods: ["POST"], calls: 3, periodSeconds: 60 },
  { name: "api-keys", patterns: ["/api/auth/api-keys", "/api/cloud/auth/api-keys"], methods: ["POST"], calls: 10, periodSeconds: 60 },
  { name: "job-cancel", patterns: ["/api/cloud/jobs/<id>/cancel"], methods: ["POST"], calls: 30, periodSeconds: 60 },
  { name: "job-submit", patterns: ["/api/cloud/jobs"], methods: ["POST"], calls: 20, periodSeconds: 60 },
  { name: "webhooks", patterns: ["/api/webhooks/"], methods: "all", calls: 100, periodSeconds: 60 },
  { name: "storage", patterns: ["/api/cloud/storage/"], methods: "all", calls: 50, periodSeconds: 60 },
  { name: "quotas", patterns: ["/api/quotas/"], methods: "all", calls: 30, periodSeconds: 60 },
];

/**
 * Failed logins per username and client address (counted in the RateLimiter named after a hash
 * of the lower-cased username and the address's rate-limit key; a successful login forgives
 * them). Past it, every login for that name from that address is refused, the right password
 * included: that is what stops guessing. Another address is not affected, so a guesser cannot
 * lock the user out; the per-address rule `login` bounds how fast one address guesses at all.
 */
export const LOGIN_FAILURE_RULE: RateRule = {
  name: "login-failures",
  patterns: ["/api/cloud/auth/login", "/api/auth/login"],
  methods: ["POST"],
  calls: 10,
  periodSeconds: 900,
};

/** Failed worker-token authentications per client address (the runner routes, which no per-route rule counts). */
export const WORKER_TOKEN_FAILURE_RULE: RateRule = {
  name: "worker-token-failures",
  patterns: ["/api/workers/"],
  methods: "all",
  calls: 20,
  periodSeconds: 60,
};

/**
 * The rule of every other request, with the numbers of RATE_LIMIT_CALLS / RATE_LIMIT_PERIOD.
 *
 * @example
 * defaultRateRule(100, 60); // at most 100 requests in any 60 s
 */
export function defaultRateRule(calls: number, periodSeconds: number): RateRule {
  return { name: "default", patterns: ["/"], methods: "all", calls, periodSeconds };
}

/**
 * Never counted, whatever the method: the health probes `/health` and `/api/cloud/health` (a
 * load balancer's probes must never be refused); the live streams `/api/events/stream`,
 * `/api/training/events/stream` and `/api/queue/changes` (long-lived, each bounded by the
 * per-user limit of live streams instead); the static files `/static/`, the documentation's
 * `/docs/assets/` and the dashboard's `/ui/`; `/api/cloud/hints`, `/api/users/me` and
 * `/api/cloud/providers`; and the runner protocol `/api/workers/` (machine-to-machine behind
 * admin-issued worker tokens, paced by the protocol; a runner drops an event batch the edge
 * refuses with a 4xx, so a 429 there would lose training events).
 */
export const RATE_LIMIT_EXCLUSIONS: readonly string[] = [
  "/health",
  "/api/cloud/health",
  "/api/events/stream",
  "/api/training/events/stream",
  "/api/queue/changes",
  "/static/",
  "/docs/assets/",
  "/ui/",
  "/api/cloud/hints",
  "/api/users/me",
  "/api/cloud/providers",
  "/api/workers/",
];

function compile(pattern: string): RegExp {
  const base = pattern.replace(/\/+$/, "");
  const source = base
    .split("/")
    .map((segment) => (segment === "<id>" ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("/");
  return new RegExp(`^${source}(?:/.*)?$`);
}

const EXCLUDED = RATE_LIMIT_EXCLUSIONS.map(compile);
const COMPILED = RATE_RULES.map((rule) => ({ rule, patterns: rule.patterns.map(compile) }));

const normalised = (path: string) => path.replace(/\/{2,}/g, "/");

/**
 * Whether `path` is never counted (RATE_LIMIT_EXCLUSIONS), whatever the method.
 *
 * @example
 * isRateLimitExempt("/api/cloud/health/live"); // true
 */
export function isRateLimitExempt(path: string): boolean {
  const clean = normalised(path);
  return EXCLUDED.some((pattern) => pattern.test(clean));
}

/*
 * The listed rule (null: none, the fallback) of each `METHOD path` seen lately: every request asks,
 * and trying the rules' patterns in turn was about 3 % of a request's CPU in workerd.
 */
const listedRuleOf = remembered(
  (request): RateRule | null => {
    const space = request.indexOf(" ");
    const method = request.slice(0, space);
    const clean = normalised(request.slice(space + 1));
    return (
      COMPILED.find(
        ({ rule, patterns }) =>
          (rule.methods === "all" || rule.methods.includes(method)) && patterns.some((pattern) => pattern.test(clean)),
      )?.rule ?? null
    );
  },
  { maxKeyLength: 256 },
);

/**
 * The rule whose window `method path` would be counted in, exclusions aside (`fallback` when no
 * listed rule covers it): what an uncounted request's rate-limit headers describe.
 *
 * @example
 * rateRuleFor("GET", "/api/cloud/health", defaultRateRule(100, 60)); // the default rule
 */
export function rateRuleFor(method: string, path: string, fallback: RateRule): RateRule {
  return listedRuleOf(`${method.toUpperCase()} ${path}`) ?? fallback;
}

/**
 * The rule that counts `method path` (`fallback` when no listed rule does), or null when the
 * path is excluded.
 *
 * @example
 * matchRateRule("POST", "/api/cloud/auth/login", defaultRateRule(100, 60)); // the "login" rule
 */
export function matchRateRule(method: string, path: string, fallback: RateRule): RateRule | null {
  return isRateLimitExempt(path) ? null : rateRuleFor(method, path, fallback);
}

/**
 * The three X-RateLimit headers for a request no window counted (loopback in development, an
 * excluded path, the limiter unreachable): the rule that would apply, with all of its calls
 * remaining, and a reset one period from now. Remaining is the limit, not the client's count in
 * that window: reading the count would cost a Durable Object round trip on requests that are
 * exempt precisely so they cost nothing, and this request takes nothing from any window.
 *
 * @example
 * uncountedRateLimitHeaders(defaultRateRule(100, 60), Date.now());
 * // { "X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "100", "X-RateLimit-Reset": "<now + 60 s>" }
 */
export function uncountedRateLimitHeaders(rule: RateRule, nowMs: number): Record<string, string> {
  return {
    "X-RateLimit-Limit": String(rule.calls),
    "X-RateLimit-Remaining": String(rule.calls),
    "X-RateLimit-Reset": String(Math.ceil(nowMs / 1000) + rule.periodSeconds),
  };
}
