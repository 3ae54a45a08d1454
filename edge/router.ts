import { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ZodError } from "zod";
import type { AppEnv } from "./app-env";
import { ApiError } from "./errors";

/** A request that failed its zod schema: 422 with one entry per field, named by its path. */
export function validationError(error: ZodError, target: string): ApiError {
  const where = target === "json" || target === "form" ? "body" : target;
  const fields = error.issues.map((issue) => ({
    path: [where, ...issue.path.map(String)].join("."),
    message: issue.code === "unrecognized_keys" ? `unknown field(s): ${issue.keys.join(", ")}` : issue.message,
  }));
  return new ApiError(422, "invalid_request", `Invalid request ${where}: ${fields.map((f) => `${f.path}: ${f.message}`).join("; ")}`, fields);
}

/** A Hono router whose zod validation failures become the API's 422 error. */
export function createRouter(): OpenAPIHono<AppEnv> {
  return new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) throw validationError(result.error as ZodError, result.target);
    },
  });
}

/** Turns any error into `{ detail, code }`: ApiError as it says, Hono's 4xx as they are, the rest 500. */
export function handleError(error: Error, c: Context<AppEnv>): Response {
  if (error instanceof ApiError) {
    return c.json(error.body(), error.status, error.headers);
  }
  if (error instanceof HTTPException && error.status < 500) {
    const code = error.status === 400 ? "bad_request" : "http_error";
    return c.json({ detail: error.message || "Bad request", code }, error.status);
  }
  c.get("log")?.error("unhandled error", { error: error.message, stack: error.stack });
  return c.json({ detail: `Internal server error (request ${c.get("requestId") ?? "unknown"})`, code: "internal" }, 500);
}
