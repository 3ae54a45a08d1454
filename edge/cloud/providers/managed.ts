import { ApiError } from "../../errors";

/*
 * The managed cloud service: listed so users know it is coming, never usable. Whatever would
 * run a job on it answers managedRefusal() instead.
 */

/** How the providers list shows the managed service. */
export const MANAGED_PROVIDER = { name: "managed", display_name: "Managed service", coming_soon: true } as const;

/**
 * The 422 a submission (or any job action) naming the managed service gets.
 *
 * @example
 * if (provider === MANAGED_PROVIDER.name) throw managedRefusal();
 */
export function managedRefusal(): ApiError {
  return new ApiError(
    422,
    "provider_coming_soon",
    "The managed service is coming soon and cannot run jobs yet; use replicate (hosted) or workers (your own GPU workers)",
  );
}
