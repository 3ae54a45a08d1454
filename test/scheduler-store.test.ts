// The Scheduler's admission statement against the real schema (migrated), through the same
// libSQL client and Hrana bridge the stack uses.
import { createClient as createFileClient } from "@libsql/client";
import { afterAll, beforeAll, expect, it } from "vitest";
import { admissionStatements } from "../edge/scheduler/store";
import { openMigratedDb, type MigratedDb } from "./helpers/migrated-db";

let migrated: MigratedDb;
let client: MigratedDb["client"];
let dbPath: string;

beforeAll(async () => {
  migrated = await openMigratedDb();
  client = migrated.client;
  dbPath = migrated.path;
  await client.execute("INSERT INTO workers (name, role, status, token_prefix, token_hash, created_at) VALUES ('far', 'remote', 'IDLE', 'stw_x', 'h', '2026-01-01')");
  const rows = Array.from({ length: 2000 }, (_, i) => ({ sql: "INSERT INTO queue_entries (job_id, user_id, priority, status, queued_at, job_type) VALUES (?, 1, 10, 'pending', '2026-01-01T00:00:00Z', 'local')", args: [`job-${i + 1}`] }));
  await client.batch(rows, "write");
});
afterAll(() => migrated.close());

it("starts only the admitted jobs still pending, each with its own GPUs or worker, in one statement", async () => {
  await client.execute("UPDATE queue_entries SET status = 'cancelled' WHERE id = 2");
  const statements = admissionStatements(
    [
      { id: 1, jobId: "job-1", gpus: [0, 1], workerId: null },
      { id: 2, jobId: "job-2", gpus: [2], workerId: null },
      { id: 3, jobId: "job-3", gpus: [], workerId: null },
      { id: 4, jobId: "job-4", gpus: null, workerId: 1 },
    ],
    7,
    "2026-02-02T00:00:00.000Z",
  );
  expect(statements).toHaveLength(2); // the admissions, then the one remote worker taken
  const [admitted] = await client.batch(statements, "write");
  expect(admitted!.rows.map((r) => Number(r.admitted_id)).sort()).toEqual([1, 3, 4]);
  const rows = await client.execute("SELECT id, status, allocated_gpus, worker_id, started_at FROM queue_entries WHERE id <= 5 ORDER BY id");
  expect(rows.rows.map((r) => [r.id, r.status, r.allocated_gpus, r.worker_id, r.started_at])).toEqual([
    [1, "running", "[0,1]", 7, "2026-02-02T00:00:00.000Z"],
    [2, "cancelled", null, null, null],
    [3, "running", "[]", 7, "2026-02-02T00:00:00.000Z"],
    [4, "running", null, 1, "2026-02-02T00:00:00.000Z"],
    [5, "pending", null, null, null],
  ]);
  expect((await client.execute("SELECT status FROM workers WHERE id = 1")).rows[0]!.status).toBe("busy");
  // A second pass over the same admissions changes nothing: none is pending any more.
  const [again] = await client.batch(admissionStatements([{ id: 1, jobId: "job-1", gpus: [3], workerId: null }], 7, "2026-03-03T00:00:00.000Z"), "write");
  expect(again!.rows).toHaveLength(0);
});

it("admits hundreds at once without walking the pending entries for each", async () => {
  const many = Array.from({ length: 500 }, (_, i) => ({ id: 1000 + i, jobId: `job-${1000 + i}`, gpus: [], workerId: null }));
  // The plan is read on a connection of its own: libsql leaves an EXPLAIN of a write with
  // RETURNING "in progress", and the bridge's connection could then not commit.
  const side = createFileClient({ url: `file:${dbPath}` });
  const plan = await side.execute({ sql: `EXPLAIN QUERY PLAN ${String((admissionStatements(many, 7, "now")[0] as { sql: string }).sql)}`, args: ["now", "[]"] });
  side.close();
  expect(plan.rows.map((r) => String(r.detail))).toContain("SEARCH queue_entries USING INTEGER PRIMARY KEY (rowid=?)");
  const [admitted] = await client.batch(admissionStatements(many, 7, "2026-02-02T00:00:00.000Z"), "write");
  expect(admitted!.rows).toHaveLength(500);
});
