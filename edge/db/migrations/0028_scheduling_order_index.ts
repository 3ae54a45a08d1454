import type { Migration } from "./migration";

/**
 * v28: the queue listing's scheduling order as an index (issue 31): within a status, priority
 * (the override, else the level's; highest first), queued_at, id. A page of GET /api/queue reads
 * its own rows from it instead of sorting every active entry (edge/queue/entries.ts).
 */
export const v28: Migration = {
  version: 28,
  name: "scheduling_order_index",
  statements: [
    `CREATE INDEX queue_entries_scheduling ON queue_entries (status, COALESCE(priority_override, priority) DESC, queued_at, id)`,
  ],
};
