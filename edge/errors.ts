import type { ErrorBody } from "../shared/schemas/common";

/**
 * The one error type of the API. Domain code throws it; the app's error handler turns it into
 * `{ detail, code }` with its status. A 5xx means a bug or an unreachable dependency, never a
 * client mistake.
 */
export class ApiError extends Error {
  constructor(
    readonly status: 400 | 401 | 402 | 403 | 404 | 409 | 413 | 415 | 422 | 426 | 429 | 500 | 503 | 507,
    readonly code: string,
    readonly detail: string,
    readonly fields?: ErrorBody["errors"],
    readonly headers?: Record<string, string>,
  ) {
    super(detail);
  }

  body(): ErrorBody {
    return this.fields ? { detail: this.detail, code: this.code, errors: this.fields } : { detail: this.detail, code: this.code };
  }
}

export const notFound = (what: string) => new ApiError(404, "not_found", `${what} not found`);
export const conflict = (detail: string) => new ApiError(409, "conflict", detail);
