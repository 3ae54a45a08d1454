import type { Migration } from "./migration";

/** v2: teams for fair share, priority overrides, approvals and retries. */
export const v2: Migration = {
  version: 2,
  name: "queue_fair_share_and_approvals",
  statements: [
    `ALTER TABLE queue_entries ADD COLUMN team_id TEXT`,
    `ALTER TABLE queue_entries ADD COLUMN priority_override INTEGER`,
    `ALTER TABLE queue_entries ADD COLUMN requires_approval INTEGER NOT NULL DEFAULT 0`,
    `ALTER TABLE queue_entries ADD COLUMN approval_id INTEGER`,
    `ALTER TABLE queue_entries ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1`,
    `ALTER TABLE queue_entries ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 3`,
    `CREATE INDEX queue_entries_team_status ON queue_entries (team_id, status)`,
  ],
};
