import type { Migration } from "./migration";

/** Bumps the capacity version by one: the body of every trigger below. */
const BUMP = `UPDATE capacity_version SET version = version + 1 WHERE id = 1`;
/** The settings a plan's capacity reads (edge/scheduler/store.ts capacityStatements). */
const CAPACITY_SETTINGS = `('concurrency', 'approval_rules', 'local_queue_paused', 'cloud')`;
/** A worker's columns a plan reads: a change of any of them changes what capacity exists. */
const WORKER_CHANGED = ["role", "status", "labels", "gpus", "trainers", "idle_since"].map((c) => `OLD.${c} IS NOT NEW.${c}`).join(" OR ");

/**
 * v21: the capacity version (issue 28, Build 2): one counter that any change of what the
 * Scheduler keeps between submissions - limits, approval rules, the local queue's pause and the
 * cloud settings, the environments' options, the workers - moves in the same statement, by
 * trigger, so no writer has to remember it and a hand edit of the database counts too. The
 * Scheduler keeps what it read with the version it read it at, and reads only the version while
 * that is unchanged (edge/scheduler/cache.ts).
 * - capacity_version: one row (id 1), its version.
 */
export const v21: Migration = {
  version: 21,
  name: "capacity_version",
  statements: [
    `CREATE TABLE capacity_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)`,
    `INSERT INTO capacity_version (id, version) VALUES (1, 0)`,
    `CREATE TRIGGER capacity_on_setting_insert AFTER INSERT ON settings WHEN NEW.key IN ${CAPACITY_SETTINGS} BEGIN ${BUMP}; END`,
    `CREATE TRIGGER capacity_on_setting_update AFTER UPDATE ON settings
      WHEN (OLD.key IN ${CAPACITY_SETTINGS} OR NEW.key IN ${CAPACITY_SETTINGS}) AND (OLD.key IS NOT NEW.key OR OLD.value IS NOT NEW.value)
      BEGIN ${BUMP}; END`,
    `CREATE TRIGGER capacity_on_setting_delete AFTER DELETE ON settings WHEN OLD.key IN ${CAPACITY_SETTINGS} BEGIN ${BUMP}; END`,
    `CREATE TRIGGER capacity_on_environment_insert AFTER INSERT ON environments BEGIN ${BUMP}; END`,
    `CREATE TRIGGER capacity_on_environment_update AFTER UPDATE ON environments
      WHEN OLD.name IS NOT NEW.name OR OLD.config IS NOT NEW.config OR OLD.dataloader IS NOT NEW.dataloader
      BEGIN ${BUMP}; END`,
    `CREATE TRIGGER capacity_on_environment_delete AFTER DELETE ON environments BEGIN ${BUMP}; END`,
    `CREATE TRIGGER capacity_on_worker_insert AFTER INSERT ON workers BEGIN ${BUMP}; END`,
    `CREATE TRIGGER capacity_on_worker_update AFTER UPDATE ON workers WHEN ${WORKER_CHANGED} BEGIN ${BUMP}; END`,
    `CREATE TRIGGER capacity_on_worker_delete AFTER DELETE ON workers BEGIN ${BUMP}; END`,
  ],
};
