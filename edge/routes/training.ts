import { createRoute, z } from "@hono/zod-openapi";
import { EventPage, EventsQuery, StreamQuery } from "../../shared/schemas/events";
import { ApiError } from "../errors";
import { defaultJob, readEvents } from "../jobs/events";
import { hubOf } from "../jobs/hub-types";
import { createRouter } from "../router";
import { error, json } from "./openapi";

export const training = createRouter();

const tags = ["Training"];

training.openapi(
  createRoute({
    method: "get",
    path: "/api/training/events",
    tags,
    summary: "A job's events from since_index on (spec 4.2, 6.1)",
    description:
      "Events in order with dense indexes from 0: what the trainer reported (training.progress, checkpoint.saved, validation.image with the spec 6.3 fields, ...) and its other output lines as `log` events. Poll with since_index = the previous answer's next_index. Without job_id: the running job started last, else the job started last.",
    request: { query: EventsQuery },
    responses: { 200: json(EventPage, "Events"), 401: error("No valid credential"), 404: error("No such job, or none has started"), 422: error("Invalid query") },
  }),
  async (c) => {
    const q = c.req.valid("query");
    const db = c.get("db");
    return c.json(await readEvents(db, q.job_id ?? (await defaultJob(db)), q.since_index, q.limit), 200);
  },
);

training.openapi(
  createRoute({
    method: "get",
    path: "/api/training/events/stream",
    tags,
    summary: "A job's events live: server-sent events, or a WebSocket (spec 4.2, 6.1)",
    description:
      "The same events as /api/training/events, first from since_index (default 0) and then as they arrive. With `Upgrade: websocket`, each event is a JSON text message. Otherwise server-sent events: `id` is the event index and `data` the event as JSON (read them with EventSource's onmessage); a reconnecting client sends `Last-Event-ID` and resumes right after it. When the job ends, an `end` event (WebSocket: a message with type end) carries its status and the stream closes; for an ended job the log is replayed and then it closes. Keep-alive comments every 15 s.",
    request: { query: StreamQuery },
    responses: {
      101: { description: "WebSocket" },
      200: { description: "Event stream", content: { "text/event-stream": { schema: z.string() } } },
      401: error("No valid credential"),
      404: error("No such job, or none has started"),
      422: error("Invalid query or Last-Event-ID"),
    },
  }),
  async (c) => {
    const q = c.req.valid("query");
    const db = c.get("db");
    const jobId = q.job_id ?? (await defaultJob(db));
    await readEvents(db, jobId, 0, 1); // 404 for an unknown job, before any stream opens
    const lastId = c.req.header("last-event-id");
    let since = q.since_index;
    if (lastId !== undefined && lastId !== "") {
      if (!/^\d{1,15}$/.test(lastId)) throw new ApiError(422, "invalid_last_event_id", `Last-Event-ID must be an event index, not ${JSON.stringify(lastId.slice(0, 50))}`);
      since = Number(lastId) + 1;
    }
    const target = new URL("https://hub/stream");
    target.searchParams.set("job_id", jobId);
    target.searchParams.set("since", String(since));
    return (await hubOf(c.env, jobId).fetch(new Request(target, c.req.raw))) as never;
  },
);
