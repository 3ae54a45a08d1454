import type { ServiceError } from "../api";

/** A field's errors from an API refusal, by the path after `prefix` (`body.config.--seed` -> `--seed`). */
export function fieldErrors(error: ServiceError | null, prefix: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const field of error?.fields ?? [])
    if (field.path.startsWith(prefix)) {
      const key = field.path.slice(prefix.length);
      out[key] = out[key] ? `${out[key]}; ${field.message}` : field.message;
    }
  return out;
}

/** An element id for a name that may hold any character. */
export const idFor = (prefix: string, name: string) => `${prefix}-${name.replace(/[^A-Za-z0-9_-]/g, (c) => `_${c.charCodeAt(0)}`)}`;
