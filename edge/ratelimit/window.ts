export interface WindowVerdict {
  allowed: boolean;
  /** How many more requests would be admitted right now (after this one, if it was). */
  remaining: number;
  /**
   * Epoch ms when the oldest request still in the window leaves it, so `remaining` goes up by
   * one; when refused, the moment the next request is admitted.
   */
  resetAt: number;
}

/**
 * An exact sliding window, "at most `limit` requests in any `windowMs`": the times of the last
 * `limit` admitted requests, in a ring. A request is admitted iff
 * fewer than `limit` of them are less than `windowMs` old, i.e. the ring is not full yet or its
 * oldest entry is at least `windowMs` old; it is then recorded over that oldest entry. Refused
 * requests are not recorded. Counters and token buckets approximate this and can admit more at a
 * window's edge; this cannot. O(log limit) per request (the count in the window is a binary
 * search over the ring, which stays in time order), O(limit) memory.
 *
 * @example
 * const login = new SlidingWindow(5, 60_000); // at most 5 in any 60 s
 * if (!login.take(Date.now()).allowed) refuse();
 */
export class SlidingWindow {
  readonly #times: number[];
  /** Where the oldest entry sits once the ring is full (the next one to overwrite). */
  #head = 0;

  /** `history`: admission times, oldest first (the newest `limit` of them are kept). */
  constructor(
    readonly limit: number,
    readonly windowMs: number,
    history: readonly number[] = [],
  ) {
    this.#times = history.slice(-limit);
  }

  /** The newest admission time, if any. */
  get newest(): number | undefined {
    const size = this.#times.length;
    if (size === 0) return undefined;
    return this.#times[(this.#head + size - 1) % size];
  }

  /**
   * Decides on a request at `now` (epoch ms) and records it when admitted.
   *
   * @example
   * const window = new SlidingWindow(5, 60_000);
   * window.take(Date.now()); // { allowed: true, remaining: 4, resetAt: <now + 60 s> }
   */
  take(now: number): WindowVerdict {
    const size = this.#times.length;
    const firstInWindow = this.#firstAfter(now - this.windowMs);
    const inWindow = size - firstInWindow;
    if (inWindow >= this.limit) return { allowed: false, remaining: 0, resetAt: this.#at(firstInWindow) + this.windowMs };
    // A clock that stepped back must not break the ring's time order (the binary search needs it).
    const at = Math.max(now, this.newest ?? now);
    if (size < this.limit) this.#times.push(at);
    else {
      // Full and admitted: the oldest entry is out of the window; overwrite it, and every index
      // from the oldest moves down by one.
      this.#times[this.#head] = at;
      this.#head = (this.#head + 1) % this.limit;
    }
    const oldestInWindow = inWindow === 0 ? at : this.#at(size < this.limit ? firstInWindow : firstInWindow - 1);
    return { allowed: true, remaining: this.limit - inWindow - 1, resetAt: oldestInWindow + this.windowMs };
  }

  /**
   * Records up to `count` more admissions at `at` (or at the newest entry's time, if later), as
   * far as the window has room for them at `now`: a lease's slots, which another process spends
   * later, but no later than `at`. Recorded at the latest time they can be spent, they stay in the
   * window at least as long as a real admission would. Returns how many were recorded and the
   * time they were recorded at.
   *
   * @example
   * const window = new SlidingWindow(100, 60_000);
   * window.take(now);
   * window.record(now, now + 200, 10); // { count: 10, at: now + 200 }
   */
  record(now: number, at: number, count: number): { count: number; at: number } {
    const recordedAt = Math.max(at, this.newest ?? at);
    const inWindow = this.#times.length - this.#firstAfter(now - this.windowMs);
    // Entries left out of the window by `recordedAt` are overwritten first: the ring keeps the newest `limit`.
    const granted = Math.max(0, Math.min(count, this.limit - inWindow));
    for (let i = 0; i < granted; i++) {
      if (this.#times.length < this.limit) this.#times.push(recordedAt);
      else {
        this.#times[this.#head] = recordedAt;
        this.#head = (this.#head + 1) % this.limit;
      }
    }
    return { count: granted, at: recordedAt };
  }

  /**
   * Removes up to `count` entries recorded at exactly `at`: a lease's slots that were never spent
   * and can no longer be. Returns how many were removed. The entries at `at` sit together (the
   * ring is in time order) and near the newest end, so only the few after them move; a ring that
   * has wrapped is rebuilt, O(limit).
   */
  release(at: number, count: number): number {
    const size = this.#times.length;
    const end = this.#firstAfter(at);
    let start = end;
    while (start > 0 && end - start < count && this.#at(start - 1) === at) start--;
    const removed = end - start;
    if (removed === 0) return 0;
    if (this.#head === 0) this.#times.copyWithin(start, end);
    else {
      const times = this.history();
      times.splice(start, removed);
      for (const [index, time] of times.entries()) this.#times[index] = time;
      this.#head = 0;
    }
    this.#times.length = size - removed;
    return removed;
  }

  /** The recorded admission times, oldest first. */
  history(): number[] {
    return Array.from({ length: this.#times.length }, (_, index) => this.#at(index));
  }

  /** The `index`-th entry counting from the oldest. */
  #at(index: number): number {
    return this.#times[(this.#head + index) % this.#times.length]!;
  }

  /** The index (from the oldest) of the first entry later than `time`; the size when none is. */
  #firstAfter(time: number): number {
    let low = 0;
    let high = this.#times.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.#at(middle) > time) high = middle;
      else low = middle + 1;
    }
    return low;
  }
}
