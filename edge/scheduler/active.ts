import type { Database } from "../db/client";
import type { RecentRuns } from "../jobs/estimate";
import type { PendingJob } from "./plan";
import {
  loadActive,
  loadActiveByIds,
  loadActiveStates,
  loadEntries,
  loadRecentRuns,
  needsRecentRuns,
  sameState,
  type ActiveEntry,
  type EntryState,
} from "./store";

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
/** Active entries read per chunk of the periodic re-read: a few tens of milliseconds of the Scheduler's time each. */
export const REREAD_CHUNK = 5_000;

/** One chunk of the periodic re-read: the range (kept entries from the previous chunk's end to `to`) and what was stored. */
interface Chunk {
  kept: Map<number, ActiveEntry>;
  states: EntryState[];
  fresh: ActiveEntry[];
  to: number;
}

/**
 * The pending and running entries as the Scheduler keeps them between passes, and the recent
 * completed runs its estimates need. Only the Scheduler changes what runs, so it updates these
 * itself after each write; what routes change is named to `read`, and the rest is caught by the
 * full re-read.
 */
export class ActiveEntries {
  private active: { entries: Map<number, ActiveEntry>; loadedAt: number } | null = null;
  private recent: { runs: RecentRuns; at: number } | null = null;
  /** The periodic re-read: where its next chunk starts (an id), and the chunk in flight or read. */
  private cycle: { from: number; startedAt: number } | null = null;
  private rereading: Promise<void> | null = null;
  private reread: Chunk | null = null;
  /** Moves whenever entries change other than by the Scheduler's own writes (a re-read found something). */
  generation = 0;

  /** Forgets the entries: the next read is a full one. */
  drop(): void {
    this.active = null;
    this.reread = null;
    this.cycle = null;
    this.generation++;
  }

  /**
   * The active entries, brought up to date: in full when none are kept, else the named ones
   * (`changed`: job ids), and whatever the last periodic re-read found. The map is the one kept:
   * the caller updates it with what it writes.
   *
   * @example
   * const entries = await active.read(db, ["local-1a2b3c4d5e6f"]);
   */
  async read(db: Database, changed: string[]): Promise<Map<number, ActiveEntry>> {
    if (this.active === null) {
      const loadedAt = Date.now();
      this.active = { entries: new Map((await loadActive(db)).map((e) => [e.job.id, e])), loadedAt };
      this.generation++;
      return this.active.entries;
    }
    const entries = this.active.entries;
    if (this.reread) this.applyChunk(entries);
    if (!this.cycle && Date.now() - this.active.loadedAt > FULL_RELOAD_MS) this.cycle = { from: 0, startedAt: Date.now() };
    if (this.cycle && !this.rereading && !this.reread) this.readChunk(db, entries, this.cycle.from);
    if (!changed.length) return entries;
    const { active, inactiveIds } = await loadEntries(db, changed);
    this.ended(inactiveIds);
    for (const id of inactiveIds) entries.delete(id);
    for (const e of active) entries.set(e.job.id, e);
    return entries;
  }

  // A run that ended is a recent run: waiting jobs' run times are read afresh with it.
  private ended(ids: Iterable<number>): void {
    for (const id of ids) if (this.active?.entries.get(id)?.status === "running") this.recent = null;
  }

  /**
   * The periodic re-read, which bounds how long a change nobody named goes unseen: a deep queue's
   * full read takes seconds, so it runs beside the Scheduler's passes instead of inside one, a
   * chunk of REREAD_CHUNK entries (by id) at a time. A chunk reads a few columns of each active
   * entry, then in full only those that differ from what is kept or are not kept at all.
   */
  private readChunk(db: Database, entries: Map<number, ActiveEntry>, from: number): void {
    // What was kept when the read began: an entry the Scheduler replaces meanwhile is newer than the read.
    const before = new Map<number, ActiveEntry>();
    for (const [id, e] of entries) if (id > from) before.set(id, e);
    this.rereading = (async () => {
      const states = await loadActiveStates(db, from, REREAD_CHUNK);
      const to = states.length < REREAD_CHUNK ? Infinity : states.at(-1)!.id;
      const kept = new Map<number, ActiveEntry>();
      for (const [id, e] of before) if (id <= to) kept.set(id, e);
      const differing = states.filter((s) => {
        const e = kept.get(s.id);
        return !e || !sameState(e, s);
      });
      const fresh = await loadActiveByIds(
        db,
        differing.map((s) => s.id),
      );
      this.reread = { kept, states, fresh, to };
    })()
      .catch(() => {
        // A failed chunk is read again at the next read: nothing kept is changed by it.
      })
      .finally(() => {
        this.rereading = null;
      });
  }

  /** Applies what a chunk found to every entry of its range the Scheduler has not replaced since it began. */
  private applyChunk(entries: Map<number, ActiveEntry>): void {
    const { kept, states, fresh, to } = this.reread!;
    this.reread = null;
    if (this.cycle) {
      if (to === Infinity) {
        this.active!.loadedAt = this.cycle.startedAt;
        this.cycle = null;
      } else this.cycle.from = to;
    }
    const untouched = (id: number) => entries.get(id) === kept.get(id);
    const stored = new Set(states.map((s) => s.id));
    const gone = [...kept.keys()].filter((id) => !stored.has(id) && untouched(id));
    const freshIds = new Set(fresh.map((e) => e.job.id));
    // Listed as active by the narrow read, gone by the full one: ended in between.
    for (const s of states) if (!freshIds.has(s.id) && kept.get(s.id) && !sameState(kept.get(s.id)!, s) && untouched(s.id)) gone.push(s.id);
    const changed = fresh.filter((e) => untouched(e.job.id));
    if (!gone.length && !changed.length) return;
    this.ended(gone);
    for (const id of gone) entries.delete(id);
    for (const e of changed) {
      if (kept.get(e.job.id)?.status === "running" && e.status !== "running") this.recent = null;
      entries.set(e.job.id, e);
    }
    this.generation++;
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
