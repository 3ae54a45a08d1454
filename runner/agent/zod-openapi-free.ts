// What the runner's build (runner/agent/build.mjs) puts in place of @hono/zod-openapi: the shared
// schemas' `z`, plain zod, whose `.openapi(...)` hands back the schema itself. That metadata only
// documents the API (the edge's OpenAPI document, built from the real package); the runner only
// validates with the schemas, and the real package's `.openapi()` makes a copy of each schema and
// loads its generator, about 4 MB of an idle runner (issue 31; `npm run bench:runner-modules`).
import { z } from "zod";

(z.ZodType.prototype as unknown as { openapi(): unknown }).openapi = function (this: unknown) {
  return this;
};

export { z };
