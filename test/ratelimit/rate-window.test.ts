import { describe, expect, it } from "vitest";
import { SlidingWindow } from "../../edge/ratelimit/window";

// The exact sliding window behind every rate limit, on an injected clock (epoch ms).

describe("SlidingWindow", () => {
  it("admits N, refuses N+1, and admits again exactly when the oldest leaves the window, not 1 ms before", () => {
    const window = new SlidingWindow(3, 1000);
    expect(window.take(0)).toEqual({ allowed: true, remaining: 2, resetAt: 1000 });
    expect(window.take(400)).toEqual({ allowed: true, remaining: 1, resetAt: 1000 });
    expect(window.take(800)).toEqual({ allowed: true, remaining: 0, resetAt: 1000 });
    expect(window.take(801)).toEqual({ allowed: false, remaining: 0, resetAt: 1000 });
    expect(window.take(999)).toEqual({ allowed: false, remaining: 0, resetAt: 1000 });
    // t=0 leaves at 1000: one slot, and the next oldest (400) sets the following reset.
    expect(window.take(1000)).toEqual({ allowed: true, remaining: 0, resetAt: 1400 });
    expect(window.take(1399)).toEqual({ allowed: false, remaining: 0, resetAt: 1400 });
    expect(window.take(1400)).toEqual({ allowed: true, remaining: 0, resetAt: 1800 });
  });

  it("slides rather than resetting at fixed boundaries: a burst at the edge blocks the next W", () => {
    const window = new SlidingWindow(5, 1000);
    for (let i = 0; i < 5; i++) expect(window.take(999).allowed).toBe(true);
    // A fixed window starting at 1000 would admit 5 more here: 10 inside 999..1998.
    for (const t of [1000, 1500, 1998]) expect(window.take(t)).toEqual({ allowed: false, remaining: 0, resetAt: 1999 });
    for (let i = 0; i < 5; i++) expect(window.take(1999).allowed).toBe(true);
    expect(window.take(1999).allowed).toBe(false);
  });

  it("does not record refusals: hammering does not push the reset further away", () => {
    const window = new SlidingWindow(2, 1000);
    window.take(0);
    window.take(10);
    for (let t = 11; t < 1000; t += 7) expect(window.take(t).resetAt).toBe(1000);
    expect(window.take(1000).allowed).toBe(true);
  });

  it("counts only the requests still inside the window in remaining and reset", () => {
    const window = new SlidingWindow(3, 1000);
    window.take(0);
    window.take(10);
    // 0 has left; 10 and this one remain.
    expect(window.take(1005)).toEqual({ allowed: true, remaining: 1, resetAt: 1010 });
    // Everything has left: a fresh window.
    expect(window.take(5000)).toEqual({ allowed: true, remaining: 2, resetAt: 6000 });
  });

  it("never admits more than N in any W and never refuses a request it could admit (random arrivals)", () => {
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const limit = 7;
    const windowMs = 500;
    const window = new SlidingWindow(limit, windowMs);
    const admitted: number[] = [];
    for (let t = 0, i = 0; i < 5000; i++, t += Math.floor(random() * 60)) {
      const inWindow = admitted.filter((a) => t - a < windowMs).length;
      const verdict = window.take(t);
      expect(verdict.allowed).toBe(inWindow < limit);
      if (verdict.allowed) admitted.push(t);
    }
    for (let i = limit; i < admitted.length; i++) expect(admitted[i]! - admitted[i - limit]!).toBeGreaterThanOrEqual(windowMs);
    expect(admitted.length).toBeGreaterThan(1000);
  });

  it("restores from history (a restarted limiter) and keeps only the newest N when the limit shrank", () => {
    expect(new SlidingWindow(3, 1000, [0, 10, 20]).take(500)).toEqual({ allowed: false, remaining: 0, resetAt: 1000 });
    const shrunk = new SlidingWindow(2, 1000, [0, 10, 600]);
    expect(shrunk.take(700)).toEqual({ allowed: false, remaining: 0, resetAt: 1010 });
    expect(shrunk.take(1010)).toEqual({ allowed: true, remaining: 0, resetAt: 1600 });
    expect(shrunk.newest).toBe(1010);
  });

  it("stays exact when the clock steps back: the request counts at the newest time seen", () => {
    const window = new SlidingWindow(2, 1000);
    window.take(1000);
    expect(window.take(500)).toEqual({ allowed: true, remaining: 0, resetAt: 2000 });
    expect(window.take(1999).allowed).toBe(false);
    expect(window.take(2000).allowed).toBe(true);
  });
  it("records a lease's slots at the latest time they may be spent, only as far as the window has room at the decision", () => {
    const window = new SlidingWindow(10, 1000);
    window.take(0);
    window.take(100);
    // 8 more fit at t=100; asked for 20, 8 are recorded, at 300.
    expect(window.record(100, 300, 20)).toEqual({ count: 8, at: 300 });
    expect(window.take(150).allowed).toBe(false);
    // The slots stay counted until 300 + 1000, although they may be spent at once: never one too many.
    expect(window.take(1299)).toMatchObject({ allowed: true, remaining: 1 }); // t=0 and t=100 have left
    expect(window.take(1299)).toMatchObject({ allowed: true, remaining: 0 });
    expect(window.take(1299).allowed).toBe(false);
    expect(window.record(1299, 1500, 5).count).toBe(0);
    expect(window.take(1300)).toMatchObject({ allowed: true });
  });

  it("releases unspent slots recorded at a time, and no more than were recorded there", () => {
    const window = new SlidingWindow(4, 1000);
    window.take(0);
    expect(window.record(0, 200, 3)).toEqual({ count: 3, at: 200 });
    expect(window.take(50).allowed).toBe(false);
    expect(window.release(200, 2)).toBe(2);
    expect(window.history()).toEqual([0, 200]);
    expect(window.release(200, 5)).toBe(1);
    expect(window.release(999, 1)).toBe(0);
    expect(window.take(60)).toEqual({ allowed: true, remaining: 2, resetAt: 1000 });
    expect(window.history()).toEqual([0, 60]);
  });

  it("releases from a ring that has wrapped", () => {
    const window = new SlidingWindow(3, 1000);
    for (const t of [0, 1, 2, 1002]) window.take(t); // t=0 overwritten
    expect(window.record(1002, 1200, 1)).toEqual({ count: 1, at: 1200 }); // t=1 overwritten
    expect(window.history()).toEqual([2, 1002, 1200]);
    expect(window.release(1200, 1)).toBe(1);
    expect(window.history()).toEqual([2, 1002]);
    expect(window.take(1003)).toEqual({ allowed: true, remaining: 1, resetAt: 2002 });
    expect(window.take(1004)).toEqual({ allowed: true, remaining: 0, resetAt: 2002 });
    expect(window.take(1005).allowed).toBe(false);
    expect(window.history()).toEqual([1002, 1003, 1004]);
  });

  it("keeps time order after recording ahead: a direct admission after a lease is recorded no earlier than its slots", () => {
    const window = new SlidingWindow(5, 1000);
    window.take(0);
    window.record(0, 200, 1);
    window.take(10);
    expect(window.history()).toEqual([0, 200, 200]);
    // Full ring overwrite keeps order too.
    window.take(20);
    window.take(30);
    expect(window.history()).toEqual([0, 200, 200, 200, 200]);
    expect(window.take(1100)).toMatchObject({ allowed: true, remaining: 0 }); // only t=0 has left
    expect(window.take(1150).allowed).toBe(false);
    expect(window.history()).toEqual([200, 200, 200, 200, 1100]);
  });
});
