import { OpenAPIHono } from "@hono/zod-openapi";
import { databaseFault } from "./db/errors";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { Result, Router } from "hono/router";
import { RegExpRouter } from "hono/router/reg-exp-router";
import { SmartRouter } from "hono/router/smart-router";
import { TrieRouter } from "hono/router/trie-router";
import { remembered } from "../shared/remembered";
import type { ZodError } from "zod";
import type { AppEnv, ErrorAnswer } from "./app-env";
import { ApiError } from "./errors";

/** A request that failed its zod schema: 422 with one entry per field, named by its path. */
export function validationError(error: ZodError, target: string): ApiError {
  const where = target === "json" || target === "form" ? "body" : target;
  const fields = error.issues.map((issue) => ({
    path: [where, ...issue.path.map(String)].join("."),
    message: issue.code === "unrecognized_keys" ? `unknown field(s): ${issue.keys.join(", ")}` : issue.message,
  }));
  return new ApiError(
    422,
    "invalid_request",
    `Invalid request ${where}: ${fields.map((f) => `${f.path}: ${f.message}`).join("; ")}`,
    fields,
  );
}

/*
 * Hono's own router choice (its RegExpRouter, else its TrieRouter) with each `METHOD path`'s match
 * remembered. The API's paths put a parameter and a fixed name at one position
 * (`/api/queue/{job_id}/cancel` beside `/api/queue/submit`), which the RegExpRouter refuses, so
 * Hono walks its trie on every request: about 5 % of a request's CPU in workerd (profiled under
 * `npm run bench:scheduler`). Clients repeat their paths, so a match is found once; Hono never
 * changes a match (it only reads the handlers and parameters).
 */
class RememberingRouter<T> implements Router<T> {
  readonly name = "RememberingRouter";
  readonly #router = new SmartRouter<T>({ routers: [new RegExpRouter(), new TrieRouter()] });
  readonly #match = remembered(
    (request): Result<T> => {
      const space = request.indexOf(" ");
      return this.#router.match(request.slice(0, space), request.slice(space + 1));
    },
    { maxKeyLength: 256 },
  );
  add(method: string, path: string, handler: T): void {
    this.#match.forget();
    this.#router.add(method, path, handler);
  }
  match(method: string, path: string): Result<T> {
    return this.#match(`${method} ${path}`);
  }
}

/** A Hono router whose zod validation failures become the API's 422 error. */
export function createRouter(): OpenAPIHono<AppEnv> {
  return new OpenAPIHono<AppEnv>({
    router: new RememberingRouter(),
    defaultHook: (result) => {
      if (!result.success) throw validationError(result.error as ZodError, result.target);
    },
  });
}

/**
 * Turns any error into `{ detail, code }`: ApiError as it says, Hono's 4xx as they are, the rest
 * 500. An area that answers in another format (the storage endpoint: S3's XML) renders it
 * itself, through the request's `renderError`.
 */
export function handleError(error: Error, c: Context<AppEnv>): Response {
  let answer: ErrorAnswer;
  if (error instanceof ApiError) answer = { status: error.status, body: error.body(), headers: error.headers };
  else if (error instanceof HTTPException && error.status < 500)
    answer = {
      status: error.status,
      body: { detail: error.message || "Bad request", code: error.status === 400 ? "bad_request" : "http_error" },
    };
  else if (databaseFault(error)) {
    const fault = databaseFault(error)!;
    c.get("log")?.warning("database fault", { code: fault.code, error: error.message });
    answer = { status: fault.status, body: fault.body(), headers: fault.headers };
  } else {
    c.get("log")?.error("unhandled error", { error: error.message, stack: error.stack });
    answer = { status: 500, body: { detail: `Internal server error (request ${c.get("requestId") ?? "unknown"})`, code: "internal" } };
  }
  return renderError(c, answer);
}

/**
 * The 404 of a request no route matched, rendered like every other error.
 *
 * @example
 * app.notFound(handleNotFound);
 */
export function handleNotFound(c: Context<AppEnv>): Response {
  return renderError(c, {
    status: 404,
    body: new ApiError(404, "not_found", `No route for ${c.req.method} ${new URL(c.req.url).pathname}`).body(),
  });
}

function renderError(c: Context<AppEnv>, answer: ErrorAnswer): Response {
  const render = c.get("renderError");
  return render ? render(answer) : c.json(answer.body, answer.status, answer.headers);
}
