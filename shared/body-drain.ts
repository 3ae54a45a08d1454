/**
 * How much of a request body nobody read the Worker reads and discards before its answer
 * (edge/middleware/body-limit.ts): workerd closes a connection whose body it left unread, with a
 * reset that can take the answer with it. So it is also the largest declared body the local client
 * front sends on a pooled connection to workerd (edge/local/client-front.ts).
 */
export const UNREAD_BODY_DRAIN_BYTES = 8 * 1024 * 1024;
