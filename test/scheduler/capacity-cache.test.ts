// The Scheduler's kept capacity (edge/scheduler/cache.ts) against the real schema, through the
// same libSQL client and Hrana bridge the stack uses: what a group of submissions reads, with and
// without the read made ahead for it while the group before it was written.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../edge/db/client";
import { CapacityCache } from "../../edge/scheduler/cache";
import { loadCapacity } from "../../edge/scheduler/store";
import { openMigratedDb, type MigratedDb } from "../helpers/migrated-db";

let migrated: MigratedDb;
let db: Database;
/** The read batches the cache sent, by their statements' count (the small read: 2, the whole capacity: 6). */
const reads: number[] = [];

beforeAll(async () => {
  migrated = await openMigratedDb();
  const client = migrated.client;
  const batch = (...args: Parameters<typeof client.batch>) => (reads.push(args[0].length), client.batch(...args));
  db = { $client: { batch } } as unknown as Database;
});
afterAll(() => migrated.close());

const setBudgets = (teams: Record<string, number>) =>
  migrated.client.execute({
    sql: `INSERT INTO settings (key, value, updated_at) VALUES ('budgets', ?, '2026-11-28') ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    args: [JSON.stringify({ period: "month", warn_at_percent: 80, on_exceeded: "block", users: {}, teams })],
  });
const setLimit = (n: number) =>
  migrated.client.execute({
    sql: `INSERT INTO settings (key, value, updated_at) VALUES ('concurrency', ?, '2026-11-28') ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    args: [JSON.stringify({ max_concurrent: n })],
  });

describe("CapacityCache", () => {
  it("serves a group from the read made ahead for it: that read's budgets, and no read of its own", async () => {
    const cache = new CapacityCache();
    cache.keep(await loadCapacity(db));
    reads.length = 0;
    const ahead = cache.readAhead(db, []);
    expect(ahead).not.toBeNull();
    await ahead; // done before the budget below was set, as for submissions that arrived before it
    await setBudgets({ vision: 1 });
    const served = await cache.read(db, [], ahead);
    expect(reads).toEqual([2]);
    expect(served.budgets.teams).toEqual({});
    // Without one, the group reads now and sees the budget.
    expect((await cache.read(db, [])).budgets.teams).toEqual({ vision: 1 });
    expect(reads).toEqual([2, 2]);
  });

  it("reads the whole capacity at once when the read made ahead found the version moved, and keeps it", async () => {
    const cache = new CapacityCache();
    const before = await loadCapacity(db);
    cache.keep(before);
    await setLimit(3);
    reads.length = 0;
    const served = await cache.read(db, [], cache.readAhead(db, []));
    expect(reads).toEqual([2, 6]); // the read ahead, then the whole capacity: no second small read
    expect(served.capacity.version).toBe(before.version + 1);
    expect(served.capacity.limits.max_concurrent).toBe(3);
    reads.length = 0;
    expect((await cache.read(db, [])).capacity).toBe(served.capacity);
    expect(reads).toEqual([2]);
  });

  it("makes no read ahead with nothing kept: the group reads everything itself", async () => {
    const cache = new CapacityCache();
    reads.length = 0;
    expect(cache.readAhead(db, ["sdxl"])).toBeNull();
    expect(reads).toEqual([]);
  });
});
