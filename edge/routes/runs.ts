import { createRoute } from "@hono/zod-openapi";
import type { Context } from "hono";
import { ownerScope } from "../../shared/levels";
import {
  RunDetail,
  RunImageParams,
  RunList,
  RunParams,
  RunSeries,
  RunSeriesQuery,
  RunsQuery,
  RunValidations,
} from "../../shared/schemas/runs";
import type { AppEnv } from "../app-env";
import { listRuns, runDetail, runImage, runSeries, runValidations } from "../jobs/runs";
import { principalOf } from "../middleware/authorize";
import { createRouter } from "../router";
import { error, json } from "./openapi";

export const runsRoutes = createRouter();

const tags = ["Runs"];
const callerScope = (c: Context<AppEnv>) => ownerScope(principalOf(c).user);
const READ_RULE = "A run is read as its job's events are: by its owner, leads and admins; others get 403 `not_your_job`.";
const runErrors = {
  401: error("No valid credential"),
  403: error("Another user's run"),
  404: error("No such job"),
  409: error("The job has not started (`not_a_run`)"),
  422: error("A bad job id or query"),
};

runsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/runs",
    tags,
    summary: "The runs the caller may read: started jobs, newest first, with final loss and duration",
    description:
      "Every job that started (running, completed, failed or cancelled after it started) that the caller may read: researchers and viewers their own, leads and admins everyone's. Each with its environment, owner, status, when it started and ended, how long it ran (to now while it runs), the last step and loss it reported, and whether its series is `kept` apart from its event log. Filter by `environment` (its name) and `status`.",
    request: { query: RunsQuery },
    responses: { 200: json(RunList, "Runs"), 401: error("No valid credential"), 422: error("A bad filter") },
  }),
  async (c) => c.json({ runs: await listRuns(c.get("db"), callerScope(c), c.req.valid("query")) }, 200),
);

runsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/runs/{job_id}",
    tags,
    summary: "One run with the configuration it ran (secrets masked)",
    description: `The run as \`GET /api/runs\` lists it, with \`config\`: the option map snapshotted when the job was submitted, secret-looking values \`********\`; compare two runs' options with it. ${READ_RULE}`,
    request: { params: RunParams },
    responses: { 200: json(RunDetail, "The run"), ...runErrors },
  }),
  async (c) => c.json(await runDetail(c.get("db"), c.req.valid("param").job_id, callerScope(c)), 200),
);

runsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/runs/{job_id}/series",
    tags,
    summary: "A run's metric series: step, seconds since start, loss, learning rate, step time",
    description: `One point per step the trainer reported (\`training.progress\`; SimpleTuner's per-step \`training.status\`), in step order; a retried attempt's steps replace the failed one's from where it resumed. \`seconds\` counts from the job's first event; \`step_time\` is the trainer's seconds per step, or where it sent none the time between two steps' events. A long run is downsampled to at most \`points\` (default 1000): every \`stride\`-th point from the first, and always the last, each one a point the trainer reported (never an average); \`total_points\` says how many there are. ${READ_RULE}`,
    request: { params: RunParams, query: RunSeriesQuery },
    responses: { 200: json(RunSeries, "The series"), ...runErrors },
  }),
  async (c) => c.json(await runSeries(c.get("db"), c.req.valid("param").job_id, callerScope(c), c.req.valid("query").points), 200),
);

runsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/runs/{job_id}/validations",
    tags,
    summary: "A run's validation images: prompt, step, place, and the URL of each",
    description: `Every image of the run's validation results (\`validation.image\`, \`validation.completed\`), in the order they came; a demo trainer's intermediary previews (inference steps of one validation) are left out. \`index\` numbers the images of one prompt at one step; \`url\` is \`/api/runs/{job_id}/images/{n}\`. ${READ_RULE}`,
    request: { params: RunParams },
    responses: { 200: json(RunValidations, "The images"), ...runErrors },
  }),
  async (c) => c.json(await runValidations(c.get("db"), c.req.valid("param").job_id, callerScope(c)), 200),
);

runsRoutes.openapi(
  createRoute({
    method: "get",
    path: "/api/runs/{job_id}/images/{n}",
    tags,
    summary: "The bytes of a run's validation image",
    description: `The image as the trainer sent it (its base64 decoded): \`image/png\` (or JPEG, GIF, WebP), with \`X-Content-Type-Options: nosniff\`; anything else a trainer put there is not served (404). ${READ_RULE}`,
    request: { params: RunImageParams },
    responses: {
      200: { description: "The image", content: { "image/png": { schema: { type: "string", format: "binary" } } } },
      ...runErrors,
      404: error("No such job, or no such image"),
    },
  }),
  async (c) => {
    const { job_id, n } = c.req.valid("param");
    const image = await runImage(c.get("db"), job_id, callerScope(c), n);
    return c.body(image.bytes, 200, {
      "content-type": image.type,
      "content-length": String(image.bytes.byteLength),
      "x-content-type-options": "nosniff",
      "cache-control": "private, max-age=300",
    }) as never;
  },
);
