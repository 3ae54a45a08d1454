import type { z } from "zod";

/**
 * One operation of the API as a client calls it: its method and OpenAPI path, and the very zod
 * schemas its route validates with (shared/schemas). `response: "raw"` marks an answer that is
 * not one JSON body (a file, an event stream, a WebSocket); the client hands back the Response.
 * `response: "json"` marks a JSON answer taken as it comes, unparsed: only the dashboard's build
 * has those (edge/local/ui-build.ts gives it this table without the schemas, and the dashboard
 * trusts its own origin's answers); the CLI and the runner parse every answer with its schema.
 *
 * test/api/api-client.test.ts checks each endpoint against the app's route table: same method and
 * path, and the identical schema objects, so a client can never speak a shape the route does not.
 */
export interface Endpoint {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  response: z.ZodType | "raw" | "json";
}

/** An endpoint as the dashboard's build carries it: no schemas, only what a call needs. */
export interface WireEndpoint {
  method: Endpoint["method"];
  path: string;
  response: "raw" | "json";
}

/** Declares an endpoint, keeping its literal types. */
export const endpoint = <const E extends Endpoint>(e: E): E => e;

/** Query values as a URL carries them: what the schema takes, or a number or boolean written out. */
type QueryInput<Q extends z.ZodType> = { [K in keyof z.input<Q>]?: z.input<Q>[K] | string | number | boolean };

/** What a call of `E` needs: path parameters and body when it has them, query when it takes one. */
export type EndpointInput<E extends Endpoint> = (E extends { params: infer P extends z.ZodType } ? { params: z.input<P> } : unknown) &
  (E extends { query: infer Q extends z.ZodType } ? { query?: QueryInput<Q> } : unknown) &
  (E extends { body: infer B extends z.ZodType } ? { body: z.input<B> } : unknown);

/** What a call of `E` answers: the parsed body, the body as it came (`"json"`), or the Response itself for a raw endpoint. */
export type EndpointOutput<E extends Endpoint> = E["response"] extends z.ZodType
  ? z.output<E["response"]>
  : E["response"] extends "json"
    ? unknown
    : Response;
