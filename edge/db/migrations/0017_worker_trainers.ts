import type { Migration } from "./migration";

/**
 * v17: what each runner can run (issue 24). workers.trainers holds the TrainerAvailability list its
 * runner sent when it last registered (SimpleTuner installed or why not, the demo trainer, its
 * config's own); NULL for a runner that did not say, which is then given any job as before.
 */
export const v17: Migration = {
  version: 17,
  name: "worker_trainers",
  statements: [`ALTER TABLE workers ADD COLUMN trainers TEXT`],
};
