// shared/remembered.ts: BoundedMap (what an isolate keeps between requests) and the bounded memo behind a client address's parse, a request's rate rule
// and a route's match (each asked on every request). Pure.
import { describe, expect, it } from "vitest";
import { BoundedMap, remembered } from "../../shared/remembered";

describe("remembered", () => {
  const counted = (options: { max?: number; maxKeyLength: number }) => {
    const calls: string[] = [];
    const answer = remembered((key) => (calls.push(key), key === "none" ? null : key.length), options);
    return { answer, calls };
  };

  it("works a key out once, a null answer included, and again after forget()", () => {
    const { answer, calls } = counted({ maxKeyLength: 10 });
    expect([answer("abc"), answer("abc"), answer("none"), answer("none")]).toEqual([3, 3, null, null]);
    expect(calls).toEqual(["abc", "none"]);
    answer.forget();
    expect(answer("abc")).toBe(3);
    expect(calls).toEqual(["abc", "none", "abc"]);
  });

  it("never keeps a key longer than maxKeyLength, and holds at most max answers", () => {
    const { answer, calls } = counted({ max: 2, maxKeyLength: 3 });
    expect([answer("long"), answer("long")]).toEqual([4, 4]);
    expect(calls).toEqual(["long", "long"]);
    answer("a");
    answer("b");
    answer("c"); // full: everything forgotten, then "c" kept
    answer("c");
    answer("a");
    expect(calls.slice(2)).toEqual(["a", "b", "c", "a"]);
  });
});

describe("BoundedMap", () => {
  it("holds at most max entries: a new key when full forgets the rest, a known key is replaced in place", () => {
    const map = new BoundedMap<string, number>(2);
    map.set("a", 1).set("b", 2);
    map.set("a", 3); // known: nothing forgotten
    expect([...map]).toEqual([
      ["a", 3],
      ["b", 2],
    ]);
    map.set("c", 4); // new and full
    expect([...map]).toEqual([["c", 4]]);
  });
});
