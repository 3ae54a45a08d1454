// The queue listing reads one state of the queue: a job that starts, or is requeued, while a
// listing is being read is listed once, in the one place it was. Against real libSQL over the
// Hrana bridge the Worker uses, with the job's change written between the listing's requests to
// the database (a write from the Scheduler's pass that lands in the middle of a listing: the
// failure seen in a clean-clone CI run, where GPU health's listing missed a job that started).
import { createClient } from "@libsql/client/web";
import { drizzle } from "drizzle-orm/libsql/web";
import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import type { Database } from "../../edge/db/client";
import { listEntries } from "../../edge/queue/entries";
import { openMigratedDb, type MigratedDb } from "../helpers/migrated-db";

let migrated: MigratedDb;
let db: Database;
/** A write to make once the listing's next request to the database is answered. */
let between: string | null = null;
let requests = 0;

beforeAll(async () => {
  migrated = await openMigratedDb();
  const client = createClient({
    url: "http://libsql.internal",
    fetch: async (request: Request) => {
      const answer = await migrated.handle(request);
      requests += 1;
      const write = between;
      between = null;
      if (write) await migrated.client.execute(write);
      return answer;
    },
  });
  db = drizzle(client) as Database;
});
afterAll(() => migrated.close());

beforeEach(async () => {
  await migrated.client.execute("DELETE FROM queue_entries");
  await migrated.client.batch(
    ["running", "pending", "pending"].map((status, i) => ({
      sql: "INSERT INTO queue_entries (job_id, user_id, priority, status, queued_at, job_type) VALUES (?, 1, 10, ?, ?, 'local')",
      args: [`job-${i + 1}`, status, `2026-01-01T00:00:0${i}Z`],
    })),
    "write",
  );
  requests = 0;
});

const list = (options: Partial<Parameters<typeof listEntries>[1]> = {}) =>
  listEntries(db, { limit: 50, includeCompleted: false, order: "scheduling", ...options });

it("lists a job that starts while the listing is read, once", async () => {
  between = "UPDATE queue_entries SET status = 'running' WHERE job_id = 'job-2'";
  const page = await list();
  expect(between).toBeNull(); // the write was made, after the listing's first request
  expect(page.rows.map((r) => [r.jobId, r.status]).sort()).toEqual([
    ["job-1", "running"],
    ["job-2", "pending"],
    ["job-3", "pending"],
  ]);
  expect(page.total).toBe(3);
  // The next listing shows it running.
  expect((await list()).rows.map((r) => [r.jobId, r.status])).toEqual([
    ["job-1", "running"],
    ["job-2", "running"],
    ["job-3", "pending"],
  ]);
});

it("lists a running job that is requeued while the listing is read, once", async () => {
  between = "UPDATE queue_entries SET status = 'pending', queued_at = '2026-01-01T00:00:09Z' WHERE job_id = 'job-1'";
  const page = await list({ includeCompleted: true });
  expect(page.rows.map((r) => r.jobId)).toEqual(["job-1", "job-2", "job-3"]);
  expect(page.total).toBe(3);
});

it("reads a page and its count in one request to the database, in either order", async () => {
  await list();
  expect(requests).toBe(1);
  await list({ order: "submitted", limit: 1 });
  expect(requests).toBe(2);
  // A later page (after job-2) as well: the seek within its group and the groups after it.
  const first = await list({ limit: 2 });
  expect(first.rows.map((r) => r.jobId)).toEqual(["job-1", "job-2"]);
  expect(requests).toBe(3);
  const second = await list({ limit: 2, after: first.next! });
  expect(second.rows.map((r) => r.jobId)).toEqual(["job-3"]);
  expect(second.next).toBeNull();
  expect(requests).toBe(4);
});
