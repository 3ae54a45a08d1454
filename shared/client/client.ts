import type { Endpoint, EndpointInput, EndpointOutput } from "./endpoint";

/**
 * The one error a client call throws: the service's refusal with its `detail` and `code` (and the
 * invalid fields of a 422), or - with status 0 - a service that could not be reached or did not
 * answer in time, or (code `unexpected_answer`) an answer that is not what the schema says.
 */
export class ServiceError extends Error {
  override readonly name = "ServiceError";
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly fields?: { path: string; message: string }[],
  ) {
    super(status ? `${detail} (HTTP ${status}, ${code})` : detail);
  }
}

/** Redirects followed within the service's origin before the client gives up. */
const MAX_REDIRECTS = 5;

export interface ClientOptions {
  /** The service's address, e.g. http://127.0.0.1:8787. */
  baseUrl: string;
  /** A user's API key, sent as X-API-Key. */
  apiKey?: string;
  /** A bearer token (a runner's worker token), sent as Authorization: Bearer. */
  bearer?: string;
  /** A Cookie header (a session, for the calls that need one: creating an API key). */
  cookie?: string;
  /** How long a call may take, unless the call says otherwise; default 30 s. */
  timeoutMs?: number;
  /** Headers sent with every call (User-Agent). */
  headers?: Record<string, string>;
  fetch?: typeof fetch;
}

export interface CallOptions {
  /** This call's time limit; null: none (an event stream, a large download). */
  timeoutMs?: number | null;
  signal?: AbortSignal;
  headers?: Record<string, string>;
  /** Sees the answer's status and headers (a login's Set-Cookie) before its body is read. */
  onResponse?: (response: Response) => void;
}

/**
 * A typed client of the service, for the CLI, the runner and the dashboard: every call names an
 * endpoint of shared/client/endpoints.ts, sends what its schemas take and parses the answer with
 * its response schema. Runs wherever fetch does (Node 20, workerd, browsers), and imports no zod
 * itself: the schemas come with the endpoints, so the dashboard's build, whose endpoints carry none
 * (`response: "json"`), takes its answers as they come.
 *
 * @example
 * const client = new ServiceClient({ baseUrl: "http://127.0.0.1:8787", apiKey: "st_..." });
 * const page = await client.call(endpoints.queueList, { query: { status: "pending", limit: 20 } });
 */
export class ServiceClient {
  private readonly fetch: typeof fetch;

  constructor(readonly options: ClientOptions) {
    this.fetch = options.fetch ?? ((input, init) => fetch(input, init));
  }

  /** The headers that carry this client's credential (for a WebSocket opened by other means). */
  authHeaders(): Record<string, string> {
    const { apiKey, bearer, cookie } = this.options;
    return {
      ...(apiKey ? { "x-api-key": apiKey } : {}),
      ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
      ...(cookie ? { cookie } : {}),
    };
  }

  /**
   * The full URL of a call: path parameters filled in (encoded), the query written out.
   *
   * @example
   * client.url(endpoints.queueCancel, { params: { job_id: "local-1" } }); // .../api/queue/local-1/cancel
   */
  url<E extends Endpoint>(endpoint: E, input: EndpointInput<E>): URL {
    const { params, query } = input as { params?: Record<string, unknown>; query?: Record<string, unknown> };
    const path = endpoint.path.replace(/\{(\w+)\}/g, (_, name: string) => {
      const value = params?.[name];
      if (value === undefined || value === null) throw new TypeError(`${endpoint.path} needs ${name}`);
      return encodeURIComponent(String(value));
    });
    const url = new URL(path.replace(/^\//, ""), this.options.baseUrl.replace(/\/*$/, "/"));
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value === undefined || value === null) continue;
      for (const item of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(item));
    }
    return url;
  }

  /**
   * Calls an endpoint: the parsed answer (unparsed for a `"json"` endpoint), or the Response of a
   * raw endpoint (status checked, body unread). Throws ServiceError for anything but a 2xx.
   */
  async call<E extends Endpoint>(endpoint: E, input: EndpointInput<E>, options: CallOptions = {}): Promise<EndpointOutput<E>> {
    const url = this.url(endpoint, input);
    const body = (input as { body?: unknown }).body;
    const timeoutMs = options.timeoutMs === undefined ? (this.options.timeoutMs ?? 30_000) : options.timeoutMs;
    const signals = [options.signal, timeoutMs === null ? undefined : AbortSignal.timeout(timeoutMs)].filter((s) => s !== undefined);
    const where = `${endpoint.method} ${url.origin}${url.pathname}`;
    let response: Response;
    try {
      response = await this.fetchWithin(url, {
        method: endpoint.method,
        headers: {
          accept: endpoint.response === "raw" ? "*/*" : "application/json",
          ...this.options.headers,
          ...this.authHeaders(),
          ...(body === undefined ? {} : { "content-type": "application/json" }),
          ...options.headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: signals.length ? AbortSignal.any(signals) : undefined,
      });
    } catch (error) {
      if (error instanceof ServiceError) throw error;
      throw unreachable(error, where, timeoutMs, options.signal);
    }
    if (!response.ok) throw await refusal(response);
    options.onResponse?.(response);
    if (endpoint.response === "raw") return response as EndpointOutput<E>;
    let answer: unknown;
    try {
      answer = await response.json();
    } catch (error) {
      throw new ServiceError(response.status, "unexpected_answer", `${where} answered something that is not JSON (${String(error)})`);
    }
    if (endpoint.response === "json") return answer as EndpointOutput<E>;
    const parsed = endpoint.response.safeParse(answer);
    if (parsed.success) return parsed.data as EndpointOutput<E>;
    const issue = parsed.error.issues[0];
    throw new ServiceError(
      response.status,
      "unexpected_answer",
      `the answer of ${endpoint.method} ${endpoint.path} is not what this client expects (${issue ? `${issue.path.join(".") || "(body)"}: ${issue.message}` : "invalid"}); are the client and the service the same version?`,
    );
  }

  /**
   * Sends a request, following redirects itself and only within the request's own origin: the
   * API key, worker token, cookie or password it carries never goes to another host (fetch would
   * follow a redirect anywhere, and keep X-API-Key). A redirect elsewhere is a ServiceError naming
   * where it pointed; 303 (and 301/302 after a POST) go on as a GET without the body, as fetch does.
   */
  private async fetchWithin(url: URL, init: RequestInit): Promise<Response> {
    let target = url;
    let request: RequestInit = { ...init, redirect: "manual" };
    for (let hops = 0; ; hops++) {
      const response = await this.fetch(target, request);
      const where = `${request.method} ${target.origin}${target.pathname}`;
      // A browser hides where a redirect points (the dashboard's own calls are never redirected).
      if ((response.type as string) === "opaqueredirect")
        throw new ServiceError(0, "redirected", `${where} was redirected; not followed, so your credential stays here`);
      const location = response.headers.get("location");
      if (response.status < 300 || response.status > 399 || response.status === 304 || location === null) return response;
      await response.body?.cancel();
      let next: URL;
      try {
        next = new URL(location, target);
      } catch {
        throw new ServiceError(response.status, "redirected", `${where} redirected to ${JSON.stringify(location)}, which is not a URL`);
      }
      if (next.origin !== url.origin)
        throw new ServiceError(
          response.status,
          "redirected",
          `${where} redirected to ${next.origin}, another origin: not followed, so your credential is not sent there (if the service moved, use its new URL)`,
        );
      if (hops >= MAX_REDIRECTS) throw new ServiceError(response.status, "redirected", `${where}: more than ${MAX_REDIRECTS} redirects`);
      if (response.status === 303 || ((response.status === 301 || response.status === 302) && request.method === "POST")) {
        const headers = new Headers(request.headers);
        headers.delete("content-type");
        request = { ...request, method: "GET", body: undefined, headers };
      }
      target = next;
    }
  }
}

/** A refusal as a ServiceError with the answer's detail and code (its text when it is not the API's error body). */
export async function refusal(response: Response): Promise<ServiceError> {
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text) as { detail?: unknown; code?: unknown; errors?: { path: string; message: string }[] };
    if (typeof body.detail === "string")
      return new ServiceError(
        response.status,
        typeof body.code === "string" ? body.code : `http_${response.status}`,
        body.detail,
        body.errors,
      );
  } catch {
    // not JSON: the text itself says what happened (a proxy's page, a plain-text 404)
  }
  const detail = text.trim().slice(0, 500) || response.statusText || "no detail";
  return new ServiceError(response.status, `http_${response.status}`, detail);
}

function unreachable(error: unknown, where: string, timeoutMs: number | null, signal?: AbortSignal): ServiceError {
  const name = (error as { name?: string })?.name;
  if (signal?.aborted) return new ServiceError(0, "aborted", `${where}: cancelled`);
  if (name === "TimeoutError") return new ServiceError(0, "timeout", `${where}: no answer within ${(timeoutMs ?? 0) / 1000} s`);
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  return new ServiceError(0, "unreachable", `cannot reach ${where}: ${cause?.code ?? cause?.message ?? String(error)}`);
}
