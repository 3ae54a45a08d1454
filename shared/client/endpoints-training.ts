import { JobRef, TrainingCommandAnswer } from "../schemas/training";
import { endpoint } from "./endpoint";

/** Training control and job views: validation and checkpoint on demand, stop, environments. Part of `endpoints` (./endpoints.ts); each with its route's own schemas. */
export const trainingEndpoints = {
  /** The trainer runs a validation after its next step; JSON body `{job_id}`. */
  trainingValidationRun: endpoint({ method: "POST", path: "/api/training/validation/run", body: JobRef, response: TrainingCommandAnswer }),
  /** The trainer saves a checkpoint after its next step. */
  trainingCheckpointRun: endpoint({ method: "POST", path: "/api/training/checkpoint/run", body: JobRef, response: TrainingCommandAnswer }),
  /** The trainer stops after its next step; the job ends completed. */
  trainingStop: endpoint({ method: "POST", path: "/api/training/stop", body: JobRef, response: TrainingCommandAnswer }),
} as const;
