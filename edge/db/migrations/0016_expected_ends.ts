import type { Migration } from "./migration";

/**
 * v16: expected ends (issue 17). Materialised on the entry so the queue listing, the job view
 * and the Scheduler's every pass read two columns instead of a job's event log:
 * - expected_end_at, expected_end_method: when a running job is expected to end and how that
 *   was estimated (progress, max_runtime, cost_cap); NULL when unknown or not running;
 * - progress_rate: the running job's step rate between event batches (JSON, edge/scheduler/estimate.ts).
 * All three are NULL again whenever a job goes back to pending.
 */
export const v16: Migration = {
  version: 16,
  name: "expected_ends",
  statements: [
    `ALTER TABLE queue_entries ADD COLUMN expected_end_at TEXT`,
    `ALTER TABLE queue_entries ADD COLUMN expected_end_method TEXT`,
    `ALTER TABLE queue_entries ADD COLUMN progress_rate TEXT`,
  ],
};
