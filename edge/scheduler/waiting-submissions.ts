/**
 * The submissions waiting for the Scheduler's next group, and the read made ahead for them: the
 * Scheduler starts the next group's read while the group (or pass) before it is written, so under
 * a burst a group waits for one round trip, its write, instead of two. A read made ahead serves
 * only the submissions that had arrived when it was started: it sees every budget and limit set
 * before they were sent, and may not see one set after, so a later arrival waits for the group
 * after. Pure: the Scheduler says when to read and what reading is.
 */
export class WaitingSubmissions<T, R> {
  private waiting: T[] = [];
  private ahead: { count: number; read: R } | null = null;

  /** Adds one; answers how many wait now (1: the first, which schedules a group). */
  push(submission: T): number {
    return this.waiting.push(submission);
  }

  get length(): number {
    return this.waiting.length;
  }

  /**
   * Starts `start`'s read for everything waiting now, unless one is under way or nothing waits
   * (`start` answering null: nothing to read ahead).
   *
   * @example
   * waiting.readAhead((group) => cache.readAhead(db, namesOf(group)));
   */
  readAhead(start: (group: readonly T[]) => R | null): void {
    if (this.ahead || !this.waiting.length) return;
    const read = start(this.waiting);
    if (read !== null) this.ahead = { count: this.waiting.length, read };
  }

  /**
   * The next group, oldest first: the submissions a read was made ahead for, with that read, or
   * every one waiting and no read. What is left waits for the group after.
   *
   * @example
   * const { group, read } = waiting.take();
   */
  take(): { group: T[]; read: R | null } {
    const ahead = this.ahead;
    this.ahead = null;
    return { group: this.waiting.splice(0, ahead?.count ?? this.waiting.length), read: ahead?.read ?? null };
  }
}
