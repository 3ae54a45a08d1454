// The queue's history (GET /api/queue/history): the pure bucketing (depth, starts and mean wait,
// bucket edges) and the route over real HTTP (viewers may read it, bad hours are refused).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bucketSecondsFor, queueHistory } from "../../edge/queue/history";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

const T0 = Date.parse("2026-03-01T12:00:00.000Z") / 1000; // a multiple of 300 and 1800
const at = (s: number) => new Date((T0 + s) * 1000).toISOString();

describe("queueHistory", () => {
  it("picks 5-minute buckets up to 6 hours and 30-minute buckets beyond", () => {
    expect([bucketSecondsFor(1), bucketSecondsFor(6), bucketSecondsFor(7), bucketSecondsFor(168)]).toEqual([300, 300, 1800, 1800]);
    expect(queueHistory([], { hours: 1, now: T0 })).toHaveLength(12);
    expect(queueHistory([], { hours: 24, now: T0 })).toHaveLength(48);
  });

  it("ends buckets on multiples of their length, the last at or after now, oldest first", () => {
    const buckets = queueHistory([], { hours: 1, now: T0 + 10 });
    expect(buckets.at(-1)!.at).toBe(T0 + 300);
    expect(buckets[0]!.at).toBe(T0 + 300 - 11 * 300);
    expect(buckets.every((b) => b.depth === 0 && b.started === 0 && b.mean_wait_seconds === null)).toBe(true);
  });

  it("counts a job as waiting from its submission until it starts or ends, and its start in the bucket holding it", () => {
    const jobs = [
      // waits (-900, -300]: counted at the ends -900 and -600; starts at -300 after 600 s
      { queued_at: at(-900), started_at: at(-300), completed_at: null },
      // waits from -650 until now
      { queued_at: at(-650), started_at: null, completed_at: null },
      // cancelled before it started: waits [-601, -1)
      { queued_at: at(-601), started_at: null, completed_at: at(-1) },
      // starts at -299 (the next bucket, (-300, 0]) after 1 s
      { queued_at: at(-300), started_at: at(-299), completed_at: at(-100) },
      // long finished before the window
      { queued_at: at(-90_000), started_at: at(-89_000), completed_at: at(-88_000) },
    ];
    const buckets = queueHistory(jobs, { hours: 1, now: T0 });
    const byEnd = new Map(buckets.map((b) => [b.at - T0, b]));
    expect(byEnd.get(-1200)).toEqual({ at: T0 - 1200, depth: 0, started: 0, mean_wait_seconds: null });
    expect(byEnd.get(-900)!.depth).toBe(1); // queued exactly at the bucket's end: waiting at that moment
    expect(byEnd.get(-600)!.depth).toBe(3);
    // At -300 the first job starts (no longer waiting) and the fourth is queued.
    expect(byEnd.get(-300)).toEqual({ at: T0 - 300, depth: 3, started: 1, mean_wait_seconds: 600 });
    expect(byEnd.get(0)).toEqual({ at: T0, depth: 1, started: 1, mean_wait_seconds: 1 });
  });

  it("gives the open bucket the depth now and averages the waits of every job started in a bucket", () => {
    const jobs = [
      { queued_at: at(-100), started_at: at(5), completed_at: null },
      { queued_at: at(-100), started_at: at(15), completed_at: null },
      { queued_at: at(30), started_at: null, completed_at: null }, // queued after now: never counted
      { queued_at: at(-5), started_at: null, completed_at: null },
    ];
    const last = queueHistory(jobs, { hours: 2, now: T0 + 20 }).at(-1)!;
    expect(last).toEqual({ at: T0 + 300, depth: 1, started: 2, mean_wait_seconds: 110 });
  });
});

describe("GET /api/queue/history", () => {
  let t: TestStack;
  let admin: { key: string };
  let viewer: { key: string };

  beforeAll(async () => {
    t = await startTestStack();
    admin = await setUpAdmin(t);
    viewer = await createUserWithKey(t, { key: admin.key }, "viewer", "vera");
    expect((await t.call("POST", "/api/configs/environments", { json: { name: "demo", from_example: "demo" }, auth: admin })).status).toBe(
      201,
    );
    // No local box is registered, so the job waits.
    expect((await t.call("POST", "/api/queue/submit", { json: { config_name: "demo", target: "local" }, auth: admin })).status).toBe(200);
  });
  afterAll(() => t?.stop());

  it("answers a viewer the last hours in buckets, the waiting job in the last one", async () => {
    const reply = await t.call("GET", "/api/queue/history?hours=3", { auth: viewer });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.body).toMatchObject({ hours: 3, bucket_seconds: 300, truncated: false });
    expect(reply.body.buckets).toHaveLength(36);
    expect(reply.body.buckets.at(-1).at).toBeGreaterThanOrEqual(Date.now() / 1000 - 1);
    expect(reply.body.buckets.at(-1).depth).toBe(1);
    const day = await t.call("GET", "/api/queue/history", { auth: viewer });
    expect(day.body).toMatchObject({ hours: 24, bucket_seconds: 1800 });
    expect(day.body.buckets).toHaveLength(48);
  });

  it.each(["0", "999", "abc", "1.5"])("refuses hours=%s with 422", async (hours) => {
    const reply = await t.call("GET", `/api/queue/history?hours=${hours}`, { auth: viewer });
    expect(reply.status, reply.text).toBe(422);
  });

  it("refuses an anonymous caller with 401", async () => {
    expect((await t.call("GET", "/api/queue/history")).status).toBe(401);
  });
});
