import type { z } from "@hono/zod-openapi";
import { ErrorBody } from "../../shared/schemas/common";

/** A JSON response entry of a route's OpenAPI description. */
export const json = <T extends z.ZodType>(schema: T, description: string) => ({ description, content: { "application/json": { schema } } });

/** An error response entry: the shared `{ detail, code }` body. */
export const error = (description: string) => json(ErrorBody, description);

/** A required JSON request body. */
export const jsonBody = <T extends z.ZodType>(schema: T) => ({ body: { required: true, content: { "application/json": { schema } } } });
