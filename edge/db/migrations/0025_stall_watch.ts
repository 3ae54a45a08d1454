import type { Migration } from "./migration";

/**
 * v25: stall detection (issue 30, Build 2).
 * - queue_entries.stall_watch: what the stall rule reads of a running attempt (JSON: the last new
 *   step and when it came, recent times per step, the validation or checkpoint phase it is in),
 *   written by the event intake (edge/jobs/stall-watch.ts); null before its first step.
 * - queue_entries.stalled_since: set while the job is marked stalled: when its last step came.
 * - queue_entries.stall_action: 'requeue' once a stall asked its trainer to stop with a checkpoint,
 *   so the stop's end sends the job back to the queue instead of ending it completed.
 * - users.stall_policy: the user's own policy for their stalled jobs; null: the service's default.
 */
export const v25: Migration = {
  version: 25,
  name: "stall_watch",
  statements: [
    `ALTER TABLE queue_entries ADD COLUMN stall_watch TEXT`,
    `ALTER TABLE queue_entries ADD COLUMN stalled_since TEXT`,
    `ALTER TABLE queue_entries ADD COLUMN stall_action TEXT`,
    `ALTER TABLE users ADD COLUMN stall_policy TEXT`,
  ],
};
