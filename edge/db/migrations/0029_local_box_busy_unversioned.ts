import type { Migration } from "./migration";

const BUMP = `UPDATE capacity_version SET version = version + 1 WHERE id = 1`;
/** A worker's columns a plan reads, but its status: a change of any of them changes what capacity exists. */
const OTHER_COLUMNS_CHANGED = ["role", "labels", "gpus", "trainers", "idle_since"].map((c) => `OLD.${c} IS NOT NEW.${c}`).join(" OR ");
/**
 * The local box between IDLE and busy: the Scheduler's own write whenever the box's first job
 * starts or its last ends (store.ts localBoxStatus). Capacity reads the local box only as online
 * (IDLE or busy) or not, so this changes nothing a plan reads.
 */
const LOCAL_BOX_BUSY_OR_IDLE = `NEW.role = 'local' AND OLD.role = 'local' AND OLD.status IN ('IDLE', 'busy') AND NEW.status IN ('IDLE', 'busy')`;

/**
 * v29: the local box going busy or idle no longer moves the capacity version (issue 31). It
 * did, so the first jobs of a burst to start made the next submission group find the version
 * moved and read the whole capacity again (a second round trip, while the burst's requests held
 * workerd's thread). Every other status change of a worker, the local box going offline
 * included, still moves it (v21's trigger otherwise unchanged).
 */
export const v29: Migration = {
  version: 29,
  name: "local_box_busy_unversioned",
  statements: [
    `DROP TRIGGER capacity_on_worker_update`,
    `CREATE TRIGGER capacity_on_worker_update AFTER UPDATE ON workers
      WHEN ${OTHER_COLUMNS_CHANGED} OR (OLD.status IS NOT NEW.status AND NOT (${LOCAL_BOX_BUSY_OR_IDLE}))
      BEGIN ${BUMP}; END`,
  ],
};
