import { join } from "node:path";
import { createClient, type Client } from "@libsql/client/web";
import { getTableConfig, type SQLiteTable } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import { applyMigrations, currentSchemaVersion } from "../../edge/db/migrate";
import { LATEST_SCHEMA_VERSION, MIGRATIONS } from "../../edge/db/migrations/index";
import * as schema from "../../edge/db/schema";
import { createHranaServer } from "../../edge/local/hrana";
import { descendants } from "../helpers/process-tree";
import { startTestStack, tempDataDir } from "../helpers/stack";

/** A libSQL client on the data directory's database file, through the same Hrana server the stack uses. */
async function withDatabase<T>(dataDir: string, use: (client: Client) => Promise<T>): Promise<T> {
  const server = createHranaServer(join(dataDir, "service.db"));
  const client = createClient({ url: "http://libsql.internal", fetch: (request: Request) => server.handle(request) });
  try {
    return await use(client);
  } finally {
    client.close();
    server.close();
  }
}

// Rows as a user of each old version would have written them.
const ROWS_AT: Record<number, { sql: string; args: (string | number)[] }[]> = {
  1: [
    {
      sql: `INSERT INTO queue_entries (job_id, user_id, config_name, priority, status, queued_at, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      args: ["job-v1-a", 7, "sdxl", 20, "pending", "2026-01-01T00:00:00Z", '{"run_name":"a"}'],
    },
    {
      sql: `INSERT INTO queue_entries (job_id, user_id, status, queued_at, started_at, completed_at, estimated_cost) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      args: ["job-v1-b", 8, "completed", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T01:00:00Z", 2.5],
    },
  ],
  2: [
    {
      sql: `INSERT INTO queue_entries (job_id, user_id, team_id, priority_override, requires_approval, status, queued_at, attempt) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      args: ["job-v2", 9, "vision", 25, 1, "blocked", "2026-02-01T00:00:00Z", 2],
    },
  ],
  3: [
    {
      sql: `INSERT INTO queue_entries (job_id, user_id, status, queued_at, allocated_gpus, job_type, num_processes) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      args: ["job-v3", 10, "running", "2026-03-01T00:00:00Z", "[0,1]", "local", 2],
    },
  ],
};

const V2_DEFAULTS = { team_id: null, priority_override: null, requires_approval: 0, approval_id: null, attempt: 1, max_attempts: 3 };
const V3_DEFAULTS = { allocated_gpus: null, job_type: "cloud", num_processes: 1 };
const V6_DEFAULTS = { target: "auto", worker_labels: null, device_ids: null, any_gpu: 0, worker_id: null };

describe("schema migrations", () => {
  it("are a numbered series in which version 3 adds the GPU allocation fields", () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    const v3 = MIGRATIONS.find((m) => m.version === 3)!.statements.join("\n");
    for (const column of ["allocated_gpus", "job_type", "num_processes"]) expect(v3).toContain(`ADD COLUMN ${column}`);
  });

  it.each([1, 2, 3])("upgrade a version %i database at start-up, keeping every row with new columns at their defaults", async (version) => {
    const dataDir = tempDataDir();
    const written: string[] = [];
    await withDatabase(dataDir, async (client) => {
      expect(await applyMigrations(client, { upTo: version })).toEqual(Array.from({ length: version }, (_, i) => i + 1));
      for (let v = 1; v <= version; v++) {
        for (const row of ROWS_AT[v]!) {
          await client.execute(row);
          written.push(String(row.args[0]));
        }
      }
    });

    const t = await startTestStack(dataDir);
    const health = await t.call("GET", "/api/cloud/health");
    expect(health.body.components[0]).toMatchObject({ name: "database", schema_version: LATEST_SCHEMA_VERSION, status: "healthy" });
    expect((await t.call("GET", "/api/cloud/health/ready")).status).toBe(200);
    await t.stop({ keepData: true });

    const rows = await withDatabase(dataDir, async (client) => {
      expect(await currentSchemaVersion(client)).toBe(LATEST_SCHEMA_VERSION);
      return (await client.execute("SELECT * FROM queue_entries ORDER BY id")).rows.map((r) => ({ ...r }));
    });
    expect(rows.map((r) => r.job_id)).toEqual(written);
    const byId = Object.fromEntries(rows.map((r) => [r.job_id, r]));
    // The pending cloud job is kept, and the start-up scheduler pass starts it: capacity is free.
    expect(byId["job-v1-a"]).toMatchObject({
      user_id: 7,
      config_name: "sdxl",
      priority: 20,
      status: "running",
      metadata: '{"run_name":"a"}',
      position: 0,
      provider: "replicate",
      ...V2_DEFAULTS,
      ...V3_DEFAULTS,
      ...V6_DEFAULTS,
    });
    expect(byId["job-v1-a"]!.started_at).toEqual(expect.any(String));
    expect(byId["job-v1-b"]).toMatchObject({
      status: "completed",
      estimated_cost: 2.5,
      completed_at: "2026-01-01T01:00:00Z",
      ...V2_DEFAULTS,
      ...V3_DEFAULTS,
      ...V6_DEFAULTS,
    });
    if (version >= 2)
      expect(byId["job-v2"]).toMatchObject({
        team_id: "vision",
        priority_override: 25,
        requires_approval: 1,
        attempt: 2,
        max_attempts: 3,
        ...V3_DEFAULTS,
      });
    if (version >= 3) expect(byId["job-v3"]).toMatchObject({ allocated_gpus: "[0,1]", job_type: "local", num_processes: 2 });
  });

  it("version 13 snapshots the configuration of jobs still waiting or running, and gives every user the old global active environment", async () => {
    await withDatabase(tempDataDir(), async (client) => {
      await applyMigrations(client, { upTo: 12 });
      const at = "2026-11-01T00:00:00.000Z";
      for (const name of ["ada", "bo"])
        await client.execute({
          sql: "INSERT INTO users (username, email, password_hash, created_at) VALUES (?, ?, 'x', ?)",
          args: [name, `${name}@example.com`, at],
        });
      await client.execute({
        sql: `INSERT INTO environments (name, config, dataloader, created_by, created_at, updated_at) VALUES ('live', '{"--seed":1}', '[{"id":"live-images"}]', 1, ?, ?), ('other', '{}', '[]', 2, ?, ?)`,
        args: [at, at, at, at],
      });
      await client.execute({ sql: "INSERT INTO settings (key, value, updated_at) VALUES ('active_environment', '1', ?)", args: [at] });
      const job = (id: string, status: string, config: string) =>
        client.execute({
          sql: "INSERT INTO queue_entries (job_id, user_id, config_name, status, queued_at) VALUES (?, 1, ?, ?, ?)",
          args: [id, config, status, at],
        });
      await job("waiting", "pending", "live");
      await job("running", "running", "live");
      await job("done", "completed", "live");
      await job("orphan", "pending", "gone");

      expect(await applyMigrations(client)).toEqual([13, ...MIGRATIONS.filter((m) => m.version > 13).map((m) => m.version)]);
      const jobs = Object.fromEntries(
        (await client.execute("SELECT job_id, config_snapshot, dataloader_snapshot FROM queue_entries")).rows.map((r) => [
          r.job_id,
          [r.config_snapshot, r.dataloader_snapshot],
        ]),
      );
      expect(jobs).toEqual({
        waiting: ['{"--seed":1}', '[{"id":"live-images"}]'],
        running: ['{"--seed":1}', '[{"id":"live-images"}]'],
        done: [null, null],
        orphan: [null, null],
      });
      expect(
        (await client.execute("SELECT user_id, environment_id FROM active_environments ORDER BY user_id")).rows.map((r) => [
          r.user_id,
          r.environment_id,
        ]),
      ).toEqual([
        [1, 1],
        [2, 1],
      ]);
      expect((await client.execute("SELECT 1 FROM settings WHERE key = 'active_environment'")).rows).toHaveLength(0);
    });
  });

  it("apply each version atomically: a failing one leaves the database at the previous version", async () => {
    const broken = [
      ...MIGRATIONS,
      { version: LATEST_SCHEMA_VERSION + 1, name: "broken", statements: ["CREATE TABLE half_done (a INTEGER)", "THIS IS NOT SQL"] },
    ];
    await withDatabase(tempDataDir(), async (client) => {
      await expect(applyMigrations(client, { migrations: broken })).rejects.toThrow();
      expect(await currentSchemaVersion(client)).toBe(LATEST_SCHEMA_VERSION);
      expect((await client.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'")).rows).toHaveLength(0);
      expect(await applyMigrations(client)).toEqual([]);
    });
  });

  it("that fail at start stop the start with their error, while workerd starts beside them, and leave no workerd running", async () => {
    // A table that version 1 creates, already there: version 1 fails, as a half-restored backup would make it.
    const dataDir = tempDataDir();
    await withDatabase(dataDir, async (client) => {
      await client.execute("CREATE TABLE queue_entries (left_over INTEGER)");
    });
    const before = new Set(descendants(process.pid));
    await expect(startTestStack(dataDir)).rejects.toThrow(/queue_entries already exists/);
    const left = descendants(process.pid).filter((pid) => !before.has(pid));
    expect(left).toEqual([]);
    await withDatabase(dataDir, async (client) => {
      expect(await currentSchemaVersion(client)).toBe(0);
      expect((await client.execute("SELECT name FROM pragma_table_info('queue_entries')")).rows.map((r) => r.name)).toEqual(["left_over"]);
    });
  });

  it("match the drizzle schema the code queries with", async () => {
    await withDatabase(tempDataDir(), async (client) => {
      await applyMigrations(client);
      for (const table of Object.values(schema) as SQLiteTable[]) {
        const config = getTableConfig(table);
        const columns = (await client.execute(`SELECT name, "notnull" AS nn FROM pragma_table_info('${config.name}')`)).rows;
        expect(columns.map((c) => c.name).sort(), config.name).toEqual(config.columns.map((c) => c.name).sort());
        for (const column of config.columns) {
          expect(Boolean(columns.find((c) => c.name === column.name)!.nn) || column.primary, `${config.name}.${column.name} NOT NULL`).toBe(
            column.notNull,
          );
        }
      }
    });
  });
});
