// The local host process's one call into the Worker (edge/local/stack.ts): the Scheduler's
// start-up pass, which starts what the queue holds and arms the Scheduler's alarm. It came
// through Miniflare's binding proxy, whose first call blocks Node's one thread for about 0.2 s
// while it starts a fetch thread, just as the first clients' requests arrive, and keeps that
// thread's memory for good (issue 31). Locally only: SERVICE_HOST_TOKEN is a random value of
// each start that only the host and workerd hold (the client front drops the header from
// clients); deployed it is unset, and the path is like any other: not found.
import { constantTimeEqual } from "./auth/crypto";
import type { Env } from "./env";
import { schedulerOf } from "./jobs/objects";

/** The path and the header the host calls with. */
export const HOST_STARTUP_PASS_PATH = "/__host/scheduler/startup-pass";
export const HOST_TOKEN_HEADER = "x-service-host";

/**
 * The host's start-up pass, when the request is that call with this start's token; undefined
 * for every other request (the app answers it: not found, or 403 off the front).
 */
export function hostCall(request: Request, env: Pick<Env, "SERVICE_HOST_TOKEN" | "SCHEDULER">): Promise<Response> | undefined {
  const token = env.SERVICE_HOST_TOKEN;
  // Every local POST passes here (submits, runners' event batches): a string test before parsing a URL.
  if (!token || request.method !== "POST" || !request.url.includes(HOST_STARTUP_PASS_PATH)) return undefined;
  if (new URL(request.url).pathname !== HOST_STARTUP_PASS_PATH) return undefined;
  if (!constantTimeEqual(request.headers.get(HOST_TOKEN_HEADER) ?? "", token)) return undefined;
  return schedulerOf(env)
    .startupPass()
    .then((passed) => Response.json(passed));
}
