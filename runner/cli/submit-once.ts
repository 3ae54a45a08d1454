import { randomUUID } from "node:crypto";
import { ServiceError, type ServiceClient } from "../../shared/client/client";
import type { Endpoint, EndpointInput, EndpointOutput } from "../../shared/client/endpoint";

/** How many times a submit is sent in all when its answer is lost. */
const TRIES = 3;

/** Errors after which the request may or may not have been handled: sent again under the same key. */
const LOST = new Set(["timeout", "unreachable", "idempotency_key_in_use"]);

/**
 * Calls a submit route with a fresh `Idempotency-Key`, and when the answer is lost (a timeout, a
 * dropped connection) or the first request is still being handled, sends it again with the same
 * key: the service answers the first request's answer again and queues nothing more.
 *
 * @example
 * const answer = await submitOnce(client, endpoints.queueSubmit, { body: { config_name: "demo" } });
 */
export async function submitOnce<E extends Endpoint>(
  client: ServiceClient,
  endpoint: E,
  input: EndpointInput<E>,
): Promise<EndpointOutput<E>> {
  const key = randomUUID();
  for (let attempt = 1; ; attempt++) {
    try {
      return await client.call(endpoint, input, { headers: { "Idempotency-Key": key } });
    } catch (error) {
      if (!(error instanceof ServiceError) || !LOST.has(error.code) || attempt >= TRIES) throw error;
      await new Promise((resolve) => setTimeout(resolve, 500 * attempt));
    }
  }
}
