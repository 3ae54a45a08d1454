import type { Migration } from "./migration";

/** v3: local jobs and their GPU allocation. */
export const v3: Migration = {
  version: 3,
  name: "queue_gpu_allocation",
  statements: [
    `ALTER TABLE queue_entries ADD COLUMN allocated_gpus TEXT`,
    `ALTER TABLE queue_entries ADD COLUMN job_type TEXT NOT NULL DEFAULT 'cloud'`,
    `ALTER TABLE queue_entries ADD COLUMN num_processes INTEGER NOT NULL DEFAULT 1`,
    `CREATE INDEX queue_entries_type_status ON queue_entries (job_type, status)`,
  ],
};
