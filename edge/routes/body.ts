import type { Context } from "hono";
import type { AppEnv } from "../app-env";
import { ApiError } from "../errors";

/**
 * A body of named fields, as clients send it: a form (multipart or urlencoded, e.g. curl -F) or
 * a JSON object. No body gives {} unless `required`; another media type is 415.
 */
export async function readFields(c: Context<AppEnv>, required: boolean): Promise<Record<string, unknown>> {
  const type = c.req.header("content-type") ?? "";
  if (type.startsWith("multipart/form-data") || type.startsWith("application/x-www-form-urlencoded")) return c.req.parseBody();
  if (type.startsWith("application/json")) {
    const parsed = (await c.req.json().catch(() => undefined)) as unknown;
    if (parsed === undefined && !required) return {};
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
      throw new ApiError(422, "invalid_request", "The body must be a JSON object of fields");
    return parsed as Record<string, unknown>;
  }
  if (!type && !required) return {};
  throw new ApiError(
    415,
    "unsupported_media_type",
    "Send the fields as a form (multipart/form-data or application/x-www-form-urlencoded), or a JSON object",
  );
}
