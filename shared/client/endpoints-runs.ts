import { RunDetail, RunList, RunParams, RunSeries, RunSeriesQuery, RunsQuery, RunValidations } from "../schemas/runs";
import { endpoint } from "./endpoint";

/** Runs: started jobs with their metric series and validation images. Part of `endpoints` (./endpoints.ts); each with its route's own schemas. */
export const runEndpoints = {
  /** The runs the caller may read, newest first; `environment`, `status`, `limit`. */
  runList: endpoint({ method: "GET", path: "/api/runs", query: RunsQuery, response: RunList }),
  /** One run with its configuration snapshot (secrets masked). */
  runGet: endpoint({ method: "GET", path: "/api/runs/{job_id}", params: RunParams, response: RunDetail }),
  /** Its series: step, seconds, loss, lr, step_time; at most `points` of them. */
  runSeries: endpoint({ method: "GET", path: "/api/runs/{job_id}/series", params: RunParams, query: RunSeriesQuery, response: RunSeries }),
  /** Its validation images, each with the URL of its bytes. */
  runValidations: endpoint({ method: "GET", path: "/api/runs/{job_id}/validations", params: RunParams, response: RunValidations }),
} as const;
