import type { Database } from "../db/client";
import type { Env } from "../env";
import { ApiError } from "../errors";
import type { Logger } from "../log";
import { DEFAULT_HTTP_TIMEOUT_S, type StoredProviderSettings } from "./provider-settings";
import { BREAKER, breakerAdmit, breakerRecord } from "./breaker";
import { ProviderError, type OutboundFetch } from "./types";

/*
 * The one way provider calls reach the network (issue 14 item 2). Every call passes the
 * provider's circuit breaker, runs under its timeout, and has its outcome recorded. Locally the
 * request goes to the host (the PROVIDER_OUTBOUND binding, edge/local/provider-outbound.ts), the
 * only place where a proxy and a CA bundle can apply; deployed it is the Worker's own fetch,
 * where only the timeout and the breaker apply (Workers verify certificates themselves and have
 * no proxy).
 */

export interface OutboundContext {
  env: Env;
  db: Database;
  log: Logger;
}

/** The headers by which the Worker hands a provider's TLS, proxy and timeout settings to the host, and the host says it got no answer. */
export const OUTBOUND_HEADERS = {
  sslVerify: "x-outbound-ssl-verify",
  caBundle: "x-outbound-ca-bundle",
  proxy: "x-outbound-proxy",
  timeoutMs: "x-outbound-timeout-ms",
  failed: "x-outbound-failed",
  /** "1": an admin allowed private targets for this provider (allow_private_targets). */
  allowPrivate: "x-outbound-allow-private",
} as const;

/** The host's failure reason for a call that got no answer in time (the Worker words it as a timeout). */
export const TIMEOUT_REASON = "timeout";

/** The Worker variables of the outbound layer, checked: SERVICE_HTTP_TIMEOUT and CIRCUIT_BREAKER_RESET_SECONDS. */
export interface OutboundVariables {
  /** Seconds, for providers left at the default http_timeout; null: unset. */
  httpTimeout: number | null;
  resetSeconds: number;
}

function positiveSeconds(name: string, value: string | undefined): number | null {
  if (value === undefined || value.trim() === "") return null;
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 3600)
    throw new ApiError(500, "misconfigured", `${name} must be a number of seconds above 0 and at most 3600, not "${value}"`);
  return seconds;
}

/**
 * Reads SERVICE_HTTP_TIMEOUT and CIRCUIT_BREAKER_RESET_SECONDS; a bad value is a 500 naming it
 * (the local host checks them at start-up with the same function).
 *
 * @example
 * readOutboundVariables({ SERVICE_HTTP_TIMEOUT: "10" }); // { httpTimeout: 10, resetSeconds: 60 }
 */
export function readOutboundVariables(env: Pick<Env, "SERVICE_HTTP_TIMEOUT" | "CIRCUIT_BREAKER_RESET_SECONDS">): OutboundVariables {
  return {
    httpTimeout: positiveSeconds("SERVICE_HTTP_TIMEOUT", env.SERVICE_HTTP_TIMEOUT),
    resetSeconds: positiveSeconds("CIRCUIT_BREAKER_RESET_SECONDS", env.CIRCUIT_BREAKER_RESET_SECONDS) ?? BREAKER.resetSeconds,
  };
}

/**
 * A provider call's timeout in seconds: its http_timeout, unless that is the default (30) and
 * SERVICE_HTTP_TIMEOUT sets another.
 *
 * @example
 * effectiveTimeoutSeconds({ http_timeout: 30 }, { httpTimeout: 5, resetSeconds: 60 }); // 5
 */
export function effectiveTimeoutSeconds(settings: Pick<StoredProviderSettings, "http_timeout">, variables: OutboundVariables): number {
  return settings.http_timeout === DEFAULT_HTTP_TIMEOUT_S && variables.httpTimeout !== null ? variables.httpTimeout : settings.http_timeout;
}

/** The breaker counts 5xx as the provider failing; anything else it answered means it is up (a 4xx is the request's fault). */
export const countsAsFailure = (status: number) => status >= 500;

// Locally the host keeps the same deadline and says why it gave up; the Worker's own guard
// fires only if the host itself hangs.
const HOST_GRACE_MS = 5_000;

/**
 * A deadline that is pushed back while the request body makes progress and cleared once the
 * answer's head arrives: a 100 MiB upload may take longer than the timeout as long as it keeps
 * moving, but a provider that takes no data and gives no answer for that long is given up on.
 */
function progressDeadline(ms: number, outer: AbortSignal | null | undefined) {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let timedOut = false;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new DOMException("timed out", "TimeoutError"));
    }, ms);
  };
  const onOuter = () => controller.abort(outer!.reason);
  if (outer?.aborted) onOuter();
  else outer?.addEventListener("abort", onOuter, { once: true });
  arm();
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    touch: () => !controller.signal.aborted && timer !== undefined && arm(),
    // The caller's signal stays linked: it may still abandon reading the answer's body.
    clear: () => {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}

/** The request body, passed on without buffering; a stream is tapped so each chunk pushes the deadline back. */
function tappedBody(body: RequestInit["body"], touch: () => void): RequestInit["body"] {
  if (!(body instanceof ReadableStream)) return body;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        touch();
        controller.enqueue(chunk);
      },
    }),
  );
}

/**
 * The provider's fetch: checks its circuit breaker (CircuitOpenError while open), applies its
 * timeout and, locally, its TLS and proxy settings, and records the outcome in the breaker (a
 * network failure, a timeout or a 5xx counts as a failure). A response is returned as it came,
 * whatever its status: the client maps errors. A call that got no answer throws
 * ProviderError(message, null, true).
 *
 * @example
 * const fetchReplicate = providerFetch({ env, db, log }, "replicate", await getProviderSettings(db, "replicate"));
 * const response = await fetchReplicate("https://api.replicate.com/v1/account", { headers: { authorization: `Bearer ${token}` } });
 */
export function providerFetch(ctx: OutboundContext, provider: string, settings: StoredProviderSettings): OutboundFetch {
  const variables = readOutboundVariables(ctx.env);
  const timeoutS = effectiveTimeoutSeconds(settings, variables);
  const host = ctx.env.PROVIDER_OUTBOUND;
  return async (input, init = {}) => {
    await breakerAdmit(ctx.db, provider, Date.now(), variables.resetSeconds);
    const method = (init.method ?? "GET").toUpperCase();
    const path = new URL(input).pathname;
    const started = Date.now();
    const deadline = progressDeadline(timeoutS * 1000 + (host ? HOST_GRACE_MS : 0), init.signal);
    const noAnswer = (why: string) => new ProviderError(`${provider} could not be reached (${why})`, null, true);
    const timeout = () => new ProviderError(`${provider} did not answer within ${timeoutS} s`, null, true);
    let response: Response;
    try {
      const body = tappedBody(init.body, deadline.touch);
      // A streamed body goes out as it is read; Node's fetch insists on being told so.
      const streaming = { ...(body instanceof ReadableStream ? { duplex: "half" } : {}) } as RequestInit;
      if (host) {
        const headers = new Headers(init.headers);
        headers.set(OUTBOUND_HEADERS.sslVerify, settings.ssl_verify ? "1" : "0");
        if (settings.ssl_ca_bundle) headers.set(OUTBOUND_HEADERS.caBundle, settings.ssl_ca_bundle);
        else headers.delete(OUTBOUND_HEADERS.caBundle);
        if (settings.proxy_url) headers.set(OUTBOUND_HEADERS.proxy, settings.proxy_url);
        else headers.delete(OUTBOUND_HEADERS.proxy);
        headers.set(OUTBOUND_HEADERS.timeoutMs, String(Math.round(timeoutS * 1000)));
        if (settings.allow_private_targets) headers.set(OUTBOUND_HEADERS.allowPrivate, "1");
        else headers.delete(OUTBOUND_HEADERS.allowPrivate);
        response = await host.fetch(new Request(input, { ...init, ...streaming, method, headers, body, signal: deadline.signal }));
        const failed = response.status === 502 ? response.headers.get(OUTBOUND_HEADERS.failed) : null;
        if (failed !== null) {
          const reason = decodeURIComponent(failed);
          throw reason === TIMEOUT_REASON ? timeout() : noAnswer(reason);
        }
      } else {
        response = await fetch(input, { ...init, ...streaming, method, body, signal: deadline.signal });
      }
    } catch (error) {
      deadline.clear();
      const failure =
        error instanceof ProviderError
          ? error
          : deadline.timedOut()
            ? timeout()
            : init.signal?.aborted
              ? null
              : noAnswer(error instanceof Error ? error.message : String(error));
      // A call its caller abandoned says nothing about the provider.
      if (failure) await breakerRecord(ctx.db, provider, false);
      ctx.log.debug("provider call failed", { provider, method, path, status: null, ms: Date.now() - started });
      throw failure ?? error;
    }
    deadline.clear();
    await breakerRecord(ctx.db, provider, !countsAsFailure(response.status));
    ctx.log.debug("provider call", { provider, method, path, status: response.status, ms: Date.now() - started });
    return response;
  };
}
