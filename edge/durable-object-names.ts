/**
 * A Durable Object namespace as this code uses it, without workerd's types: an id from a name,
 * and the object's stub (its RPC methods, `Api`) from the id.
 */
export interface NamedNamespace<Api> {
  idFromName(name: string): unknown;
  get(id: never): Api;
}

/**
 * The instance of a namespace named `name` (the one per job, per client address, or "main").
 *
 * @example
 * const hub = objectNamed(env.EVENTS_HUB, jobId);
 */
export function objectNamed<Api>(namespace: NamedNamespace<Api>, name: string): Api {
  return namespace.get(namespace.idFromName(name) as never);
}
