import type { Migration } from "./migration";

const BUMP = `UPDATE capacity_version SET version = version + 1 WHERE id = 1`;

/**
 * v23: GPU health (issue 30, Build 3). Each runner heartbeat carries its GPUs' health; the edge
 * keeps one row per GPU per minute for 24 hours and takes a GPU with a fatal fault out of
 * allocation until an admin clears it (edge/workers/gpu-health.ts).
 * - gpu_health: a worker's GPU's latest sample in each minute (utilisation, memory, temperature,
 *   uncorrected volatile ECC errors, retired pages pending, the device probe's error, Xid codes
 *   seen, and the fault the rule found, if any). Older than 24 h is swept.
 * - gpu_quarantines: one row per GPU ever quarantined: why and since when; cleared_at and who
 *   cleared it, with the ECC count and retired-pages flag the admin accepted then (a GPU is
 *   quarantined again only for a fault past those). Out of allocation while cleared_at is null.
 *   Any change of that moves the capacity version (migration 0021), so the Scheduler reads it on
 *   its next pass.
 * - workers.xid_readable: whether its runner can read the kernel log (null: it did not say).
 */
export const v23: Migration = {
  version: 23,
  name: "gpu_health",
  statements: [
    `CREATE TABLE gpu_health (
      worker_id INTEGER NOT NULL,
      gpu_index INTEGER NOT NULL,
      minute TEXT NOT NULL,
      sampled_at TEXT NOT NULL,
      utilization REAL,
      memory_used_mb REAL,
      memory_total_mb REAL,
      temperature_c REAL,
      ecc_uncorrected INTEGER,
      retired_pages_pending INTEGER,
      probe_error TEXT,
      xids TEXT,
      fault TEXT,
      PRIMARY KEY (worker_id, gpu_index, minute)
    )`,
    `CREATE INDEX gpu_health_minute ON gpu_health (minute)`,
    `CREATE TABLE gpu_quarantines (
      worker_id INTEGER NOT NULL,
      gpu_index INTEGER NOT NULL,
      reason TEXT NOT NULL,
      since TEXT NOT NULL,
      cleared_at TEXT,
      cleared_by TEXT,
      accepted_ecc INTEGER,
      accepted_retired INTEGER,
      PRIMARY KEY (worker_id, gpu_index)
    )`,
    `ALTER TABLE workers ADD COLUMN xid_readable INTEGER`,
    `CREATE TRIGGER capacity_on_quarantine_insert AFTER INSERT ON gpu_quarantines BEGIN ${BUMP}; END`,
    `CREATE TRIGGER capacity_on_quarantine_update AFTER UPDATE ON gpu_quarantines
      WHEN OLD.cleared_at IS NOT NEW.cleared_at OR OLD.worker_id IS NOT NEW.worker_id OR OLD.gpu_index IS NOT NEW.gpu_index
      BEGIN ${BUMP}; END`,
    `CREATE TRIGGER capacity_on_quarantine_delete AFTER DELETE ON gpu_quarantines BEGIN ${BUMP}; END`,
  ],
};
