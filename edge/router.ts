import { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ZodError } from "zod";
import type { AppEnv } from "./app-env";
import type { ErrorBody } from "../shared/schemas/common";
import { ApiError } from "./errors";
import { storagePattern } from "./storage/endpoint";
import { S3Error, s3CodeForStatus } from "./storage/errors";
import { s3ErrorResponse } from "./storage/xml";

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

/**
 * Turns any error into `{ detail, code }`: ApiError as it says, Hono's 4xx as they are, the rest
 * 500. On the storage endpoint the same error is S3's XML, which S3 clients read.
 */
export function handleError(error: Error, c: Context<AppEnv>): Response {
  let answer: { status: ContentfulStatusCode; body: ErrorBody; headers?: Record<string, string> };
  if (error instanceof ApiError) answer = { status: error.status, body: error.body(), headers: error.headers };
  else if (error instanceof HTTPException && error.status < 500) answer = { status: error.status, body: { detail: error.message || "Bad request", code: error.status === 400 ? "bad_request" : "http_error" } };
  else {
    c.get("log")?.error("unhandled error", { error: error.message, stack: error.stack });
    answer = { status: 500, body: { detail: `Internal server error (request ${c.get("requestId") ?? "unknown"})`, code: "internal" } };
  }
  if (storagePattern(c.req.path) !== null) {
    const response = s3ErrorResponse(new S3Error(s3CodeForStatus(answer.status), answer.body.detail), c.req.path, c.get("requestId") ?? "", c.req.method);
    for (const [name, value] of Object.entries(answer.headers ?? {})) response.headers.set(name, value);
    return response;
  }
  return c.json(answer.body, answer.status, answer.headers);
}
