import type { Database } from "../db/client";
import type { RecentRuns } from "../jobs/estimate";
import type { PendingJob } from "./plan";
import { loadActive, loadEntries, loadRecentRuns, needsRecentRuns, type ActiveEntry } from "./store";

/**
 * The active entries are kept in memory between passes and re-read in full at least this often.
 * Changes made elsewhere (cancel, approval, priority) are named by the route that made them and
 * re-read at once; the full re-read bounds how long anything unnamed can go unseen. A stale
 * entry can only make the Scheduler under-use capacity, never double-book it: admissions are
 * conditional on the entry still being pending, and only this object allocates.
 */
export const FULL_RELOAD_MS = 30_000;
/**
 * Recent completed runs (a waiting job's run time when it has no max runtime) are kept this long:
 * they change only as jobs complete, and a median over the last five hardly moves with one more.
 */
export const RECENT_RUNS_MS = 60_000;

/**
 * The pending and running entries as the Scheduler keeps them between passes, and the recent
 * completed runs its estimates need. Only the Scheduler changes what runs, so it updates these
 * itself after each write; what routes change is named to `read`, and the rest is caught by the
 * full re-read.
 */
export class ActiveEntries {
  private active: { entries: Map<number, ActiveEntry>; loadedAt: number } | null = null;
  private recent: { runs: RecentRuns; at: number } | null = null;

  /** Forgets the entries: the next read is a full one. */
  drop(): void {
    this.active = null;
  }

  /**
   * The active entries, brought up to date: in full when stale, else only the named ones (`changed`:
   * job ids). The map is the one kept: the caller updates it with what it writes.
   *
   * @example
   * const entries = await active.read(db, ["local-1a2b3c4d5e6f"]);
   */
  async read(db: Database, changed: string[]): Promise<Map<number, ActiveEntry>> {
    // A run that ended is a recent run: waiting jobs' run times are read afresh with it.
    const ended = (ids: Iterable<number>) => {
      for (const id of ids) if (this.active?.entries.get(id)?.status === "running") this.recent = null;
    };
    if (this.active === null || Date.now() - this.active.loadedAt > FULL_RELOAD_MS) {
      const loadedAt = Date.now();
      const entries = new Map((await loadActive(db)).map((e) => [e.job.id, e]));
      if (this.active) ended([...this.active.entries.keys()].filter((id) => !entries.has(id)));
      this.active = { entries, loadedAt };
      return entries;
    }
    const { active, inactiveIds } = await loadEntries(db, changed);
    const entries = this.active.entries;
    ended(inactiveIds);
    for (const id of inactiveIds) entries.delete(id);
    for (const e of active) entries.set(e.job.id, e);
    return entries;
  }

  /**
   * Recent completed runs, for waiting local jobs without a max runtime (and none read when no
   * such job waits among `entries` or the new `candidates`): kept RECENT_RUNS_MS.
   *
   * @example
   * const recent = await active.recentRuns(db, entries, candidates);
   */
  async recentRuns(db: Database, entries: Map<number, ActiveEntry>, candidates: PendingJob[]): Promise<RecentRuns> {
    if (!needsRecentRuns(entries.values(), candidates)) return new Map();
    const at = Date.now();
    if (this.recent === null || at - this.recent.at > RECENT_RUNS_MS) this.recent = { runs: await loadRecentRuns(db, new Date(at)), at };
    return this.recent.runs;
  }
}
