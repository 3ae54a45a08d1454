/*
 * The reservations of one scheduler pass over one kind of capacity: the local box's GPUs (a job
 * needs some number of them) or the remote workers (a job needs one). Pure and per pass: built
 * from what runs, then consulted and extended as the pass goes through the waiting jobs in order
 * (edge/scheduler/plan.ts explains the policy).
 *
 * Hand-written: the policy is EASY backfill (Lifka, 1995), but over named units with per-job
 * constraints (allowed devices, worker labels) and with run times that are estimates, which no
 * scheduling library for JavaScript covers.
 */

/** A free unit kept for a job waiting past the starvation threshold. */
export interface Hold {
  /** The job it is kept for. */
  holder: string;
  /**
   * The reservation's expected start (its shadow time): a job expected to end by then may use the
   * unit meanwhile. null: no start can be promised, so nobody else may use it.
   */
  until: number | null;
}

export interface Reservation<K> {
  holder: string;
  /** When enough units are expected free (epoch ms); null: unknown, every unit it could use is held. */
  startAt: number | null;
  /** The units it will take (or, with startAt null, every unit it could use). */
  units: K[];
}

export class Reservations<K> {
  private readonly holds = new Map<K, Hold>();
  private readonly reserved = new Set<K>();
  /** Busy units: the expected end of the job on each (null: unknown, or already past its estimate). */
  private readonly ends = new Map<K, number | null>();

  constructor(private readonly now: number) {}

  /** A unit taken by a running job, or one started in this pass, expected to end at `end`. */
  occupy(unit: K, end: number | null | undefined): void {
    // A job past its expected end may end any moment or never: it counts as unknown, so a
    // reservation never waits on it with a promise (and never moves later because of it).
    this.ends.set(unit, end !== null && end !== undefined && end > this.now ? end : null);
  }

  /**
   * Of the `free` units, those a job expected to run `expectedMs` (null: unknown) may take now, in
   * the order to take them: reserved ones it would give back before their reservation starts
   * first, so the spare ones stay for jobs that may use nothing else; then the spare ones.
   */
  usable(free: K[], expectedMs: number | null | undefined): K[] {
    const window: K[] = [];
    const spare: K[] = [];
    for (const unit of free) {
      const hold = this.holds.get(unit);
      if (!hold) spare.push(unit);
      else if (this.fits(hold, expectedMs)) window.push(unit);
    }
    return [...window, ...spare];
  }

  /** The first hold among `free` that keeps the unit from such a job (for its why-waiting). */
  blocking(free: K[], expectedMs: number | null | undefined): Hold | undefined {
    for (const unit of free) {
      const hold = this.holds.get(unit);
      if (hold && !this.fits(hold, expectedMs)) return hold;
    }
    return undefined;
  }

  /**
   * Reserves `need` of `candidates` (the units the job could ever use) for `holder`, apart from
   * the units earlier reservations of this pass took; null when too few are left (the job then
   * waits behind those reservations, and gets its own once it is first).
   */
  reserve(holder: string, candidates: K[], need: number): Reservation<K> | null {
    const open = candidates.filter((unit) => !this.reserved.has(unit));
    if (open.length < need) return null;
    const free = open.filter((unit) => !this.ends.has(unit));
    const busy = open
      .filter((unit) => this.ends.has(unit))
      .map((unit) => ({ unit, end: this.ends.get(unit)! }))
      .sort((a, b) => (a.end ?? Infinity) - (b.end ?? Infinity));
    const missing = need - free.length;
    // The shadow time: the end that frees the last unit it is missing.
    const shadow = missing > 0 ? (busy[missing - 1]?.end ?? null) : null;
    if (shadow === null) {
      // Nothing to promise (an unknown or overrun end, or it waits for something other than
      // units): hold everything it could use, as with no estimates at all.
      for (const unit of open) this.take(unit, { holder, until: null }, free.includes(unit));
      return { holder, startAt: null, units: open };
    }
    // Busy units freed by the shadow time first, so the free units it does not need stay spare.
    const units = [...busy.filter((b) => b.end !== null && b.end <= shadow).map((b) => b.unit), ...free].slice(0, need);
    for (const unit of units) this.take(unit, { holder, until: shadow }, free.includes(unit));
    return { holder, startAt: shadow, units };
  }

  private take(unit: K, hold: Hold, isFree: boolean): void {
    this.reserved.add(unit);
    if (isFree) this.holds.set(unit, hold);
  }

  private fits(hold: Hold, expectedMs: number | null | undefined): boolean {
    return hold.until !== null && expectedMs !== null && expectedMs !== undefined && this.now + expectedMs <= hold.until;
  }
}
