// The Scheduler's waiting submissions and the read it makes ahead for them (pure).
import { describe, expect, it } from "vitest";
import { WaitingSubmissions } from "../../edge/scheduler/waiting-submissions";

describe("WaitingSubmissions", () => {
  it("gives the read made ahead only to the submissions that had arrived when it started: a later one waits for the group after", () => {
    const waiting = new WaitingSubmissions<string, string>();
    expect([waiting.push("a"), waiting.push("b")]).toEqual([1, 2]);
    const started: string[][] = [];
    waiting.readAhead((group) => (started.push([...group]), "read of a, b"));
    waiting.push("late"); // e.g. sent just after a budget was set, which the read may not have seen
    expect(started).toEqual([["a", "b"]]);
    expect(waiting.take()).toEqual({ group: ["a", "b"], read: "read of a, b" });
    expect(waiting.length).toBe(1);
    expect(waiting.take()).toEqual({ group: ["late"], read: null });
    expect(waiting.take()).toEqual({ group: [], read: null });
  });

  it("starts one read ahead at a time, none for nobody, and none when the reader has nothing to read", () => {
    const waiting = new WaitingSubmissions<number, string>();
    let reads = 0;
    waiting.readAhead(() => `read ${++reads}`);
    expect(reads).toBe(0); // nobody waits
    waiting.push(1);
    waiting.readAhead(() => `read ${++reads}`);
    waiting.push(2);
    waiting.readAhead(() => `read ${++reads}`); // one under way: not another
    expect(reads).toBe(1);
    expect(waiting.take()).toEqual({ group: [1], read: "read 1" });
    waiting.readAhead(() => null); // nothing kept to read against: every one waiting, no read
    waiting.push(3);
    expect(waiting.take()).toEqual({ group: [2, 3], read: null });
  });
});
