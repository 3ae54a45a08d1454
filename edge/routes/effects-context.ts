import type { Context } from "hono";
import type { AppEnv } from "../app-env";
import type { EffectsContext } from "../jobs/lifecycle/effects";
import { publicUrlOf, type NotifyContext } from "../notifications/notify";

/**
 * The effects context of a request: its bindings, database and log, the caller as the audit's
 * actor (with the client address and User-Agent), and the request's waitUntil for the audit
 * writes. `trigger` names the change for the scheduler pass and the logs.
 *
 * @example
 * await applyEffects(effectsOf(c, "cancel"), await cancelJob(c.get("db"), jobId, request));
 */
export function effectsOf(c: Context<AppEnv>, trigger: string): EffectsContext {
  const principal = c.get("principal");
  return {
    env: c.env,
    db: c.get("db"),
    log: c.get("log"),
    actor: principal
      ? {
          user_id: principal.user.id,
          username: principal.user.username,
          client_ip: c.get("clientIp") ?? null,
          user_agent: c.req.header("user-agent") ?? null,
        }
      : null,
    origin: "request",
    trigger,
    waitUntil: (work) => c.executionCtx.waitUntil(work),
  };
}

/**
 * The notification context of a request (edge/notifications/notify.ts): the first attempt is
 * made past the response, through the request's waitUntil.
 *
 * @example
 * await announceBudgets(notifyContextOf(c), new Date(), { userId: 7, teamId: null });
 */
export function notifyContextOf(c: Context<AppEnv>): NotifyContext {
  return {
    db: c.get("db"),
    env: c.env,
    log: c.get("log"),
    publicUrl: publicUrlOf(c.env),
    waitUntil: (work) => c.executionCtx.waitUntil(work),
  };
}
