// The Scheduler's kept entries (edge/scheduler/active.ts) against the real schema (migrated): the
// periodic re-read, in chunks beside the passes, catches what changed behind the Scheduler's back
// and never undoes what the Scheduler itself wrote meanwhile.
import { afterAll, afterEach, beforeAll, expect, it, vi } from "vitest";
import type { Database } from "../../edge/db/client";
import { ActiveEntries, FULL_RELOAD_MS, REREAD_CHUNK } from "../../edge/scheduler/active";
import { openMigratedDb, type MigratedDb } from "../helpers/migrated-db";

let migrated: MigratedDb;
let db: Database;
const COUNT = REREAD_CHUNK * 2 + 17;

beforeAll(async () => {
  migrated = await openMigratedDb();
  db = { $client: migrated.client } as unknown as Database;
  const rows = Array.from({ length: COUNT }, (_, i) => ({
    sql: "INSERT INTO queue_entries (job_id, user_id, priority, status, queued_at, job_type) VALUES (?, 1, 10, 'pending', '2026-01-01T00:00:00Z', 'local')",
    args: [`job-${i + 1}`],
  }));
  for (let i = 0; i < rows.length; i += 2000) await migrated.client.batch(rows.slice(i, i + 2000), "write");
});
afterAll(() => migrated.close());
afterEach(() => {
  vi.useRealTimers();
});

/** Reads until a whole re-read cycle has been applied (each read applies a chunk and starts the next). */
async function rereadAll(active: ActiveEntries): Promise<Map<number, unknown>> {
  const start = active.generation;
  let entries = await active.read(db, []);
  for (let i = 0; i < 50; i++) {
    await new Promise((r) => setTimeout(r, 20));
    entries = await active.read(db, []);
  }
  expect(active.generation).toBeGreaterThanOrEqual(start);
  return entries;
}

it("catches changes nobody named within a re-read, chunk by chunk, and keeps what the Scheduler wrote meanwhile", async () => {
  const active = new ActiveEntries();
  const entries = await active.read(db, []);
  expect(entries.size).toBe(COUNT);
  // Behind its back: one cancelled in each chunk, one given a priority override, one added.
  const cancelled = [3, REREAD_CHUNK + 5, COUNT];
  await migrated.client.execute(`UPDATE queue_entries SET status = 'cancelled' WHERE id IN (${cancelled.join(", ")})`);
  await migrated.client.execute("UPDATE queue_entries SET priority_override = 50 WHERE id = 7");
  await migrated.client.execute(
    "INSERT INTO queue_entries (job_id, user_id, priority, status, queued_at, job_type) VALUES ('job-new', 1, 10, 'pending', '2026-01-01T00:00:00Z', 'local')",
  );
  // Nothing is re-read before FULL_RELOAD_MS.
  expect((await rereadAll(active)).size).toBe(COUNT);
  expect(entries.get(3)).toBeDefined();

  // The Scheduler's own change to an entry (stored, and kept as the object it keeps), made while
  // the re-read runs: the object stays, not one read back.
  const mine = { ...entries.get(9)!, status: "running" as const, allocatedGpus: [0] };
  vi.useFakeTimers({ now: Date.now() + FULL_RELOAD_MS + 1, toFake: ["Date"] });
  await active.read(db, []);
  await migrated.client.execute("UPDATE queue_entries SET status = 'running', allocated_gpus = '[0]' WHERE id = 9");
  entries.set(9, mine);
  await rereadAll(active);
  expect(cancelled.filter((id) => entries.has(id))).toEqual([]);
  expect(entries.get(7)!.job.priorityOverride).toBe(50);
  expect([...entries.values()].filter((e) => e.job.jobId === "job-new")).toHaveLength(1);
  expect(entries.get(9)).toBe(mine);
  expect(entries.size).toBe(COUNT - cancelled.length + 1);
});
