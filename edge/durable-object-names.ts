/**
 * A Durable Object binding as this code uses one, without workerd's types: an id from a name, and
 * the object's stub from the id. Untyped on purpose: the Worker's bindings (edge/env.ts) are the
 * bottom of the layering and name no room's code; each object's RPC interface is given where its
 * accessor is written once (edge/jobs/objects.ts, edge/jobs/hub-types.ts, ...).
 */
export interface DurableObjectBinding {
  idFromName(name: string): unknown;
  get(id: never): unknown;
}

/**
 * The instance named `name` (the one per job, per client address, or "main") of a binding, as the
 * object's RPC interface `Api`.
 *
 * @example
 * const hub = objectNamed<EventsHubApi>(env.EVENTS_HUB, jobId);
 */
export function objectNamed<Api>(binding: DurableObjectBinding, name: string): Api {
  return binding.get(binding.idFromName(name) as never) as Api;
}
