import { createRoute } from "@hono/zod-openapi";
import { EventPage, EventsQuery } from "../../shared/schemas/events";
import { defaultJob, readEvents } from "../jobs/events";
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
