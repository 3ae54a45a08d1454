// The bounded reads and sweeps of issue 12 against the real schema (migrated), through the same
// libSQL client and Hrana bridge the stack uses: event pages capped by bytes as well as count,
// provider webhooks forgotten after their retention, and the open uploads of ended jobs found.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../edge/db/client";
import { MAX_PAGE_BYTES, readEvents } from "../../edge/jobs/events";
import { forgetOldWebhooks, recordWebhook } from "../../edge/cloud/webhook-intake";
import { endedJobUploads } from "../../edge/storage/uploads";
import { openMigratedDb, type MigratedDb } from "../helpers/migrated-db";

let migrated: MigratedDb;
let client: MigratedDb["client"];
let db: Database;

beforeAll(async () => {
  migrated = await openMigratedDb();
  client = migrated.client;
  db = { $client: client } as unknown as Database;
  await client.batch(
    ["job-a", "job-done"].map((id, i) => ({
      sql: "INSERT INTO queue_entries (job_id, user_id, priority, status, queued_at, job_type) VALUES (?, 1, 10, ?, '2026-01-01T00:00:00Z', 'local')",
      args: [id, i ? "completed" : "running"],
    })),
    "write",
  );
});
afterAll(() => migrated.close());

describe("event pages", () => {
  it("stop at MAX_PAGE_BYTES before the count, always with at least one event; next_index goes on from there", async () => {
    const big = "x".repeat(400 * 1024);
    const rows = Array.from({ length: 6 }, (_, i) => ({
      sql: "INSERT INTO job_events (job_id, idx, attempt, seq, type, payload, created_at) VALUES ('job-a', ?, 1, ?, 'log', ?, '2026-01-01T00:00:00Z')",
      args: [i, i, JSON.stringify({ type: "log", message: i === 3 ? "x".repeat(MAX_PAGE_BYTES + 10) : big })],
    }));
    await client.batch(rows, "write");
    const first = await readEvents(db, "job-a", 0, 1000);
    expect(first.events.map((e) => e.index)).toEqual([0, 1]);
    expect(first.next_index).toBe(2);
    // A single event larger than the cap still comes, alone.
    const second = await readEvents(db, "job-a", first.next_index, 1000);
    expect(second.events.map((e) => e.index)).toEqual([2]);
    const third = await readEvents(db, "job-a", second.next_index, 1000);
    expect(third.events.map((e) => e.index)).toEqual([3]);
    const rest = await readEvents(db, "job-a", third.next_index, 1000);
    expect(rest.events.map((e) => e.index)).toEqual([4, 5]);
    expect((await readEvents(db, "job-a", rest.next_index, 1000)).events).toEqual([]);
    // The count still applies under the byte cap.
    expect((await readEvents(db, "job-a", 4, 1)).events.map((e) => e.index)).toEqual([4]);
  });
});

describe("sweeps", () => {
  it("forget provider webhooks past their retention, keeping newer ones", async () => {
    const old = await recordWebhook(db, { provider: "replicate", webhookId: "old", clientIp: "198.51.100.1", signed: true, payload: "{}" });
    const fresh = await recordWebhook(db, {
      provider: "replicate",
      webhookId: "fresh",
      clientIp: "198.51.100.1",
      signed: true,
      payload: "{}",
    });
    await client.execute({ sql: "UPDATE provider_webhook_events SET received_at = '2026-01-01T00:00:00Z' WHERE id = ?", args: [old.id] });
    expect(await forgetOldWebhooks(db, 30, new Date("2026-03-01T00:00:00Z"))).toBe(1);
    const left = await client.execute("SELECT id FROM provider_webhook_events");
    expect(left.rows.map((r) => Number(r.id))).toEqual([fresh.id]);
  });

  it("find the open multipart uploads of ended or deleted jobs only", async () => {
    await client.batch(
      [
        ["up-running", "job-a"],
        ["up-ended", "job-done"],
        ["up-gone", "job-deleted"],
      ].map(([upload, job]) => ({
        sql: "INSERT INTO storage_uploads (upload_id, job_id, object_key, initiated_at) VALUES (?, ?, 'k', '2026-01-01T00:00:00Z')",
        args: [upload!, job!],
      })),
      "write",
    );
    expect((await endedJobUploads(db, 100)).map((u) => u.uploadId).sort()).toEqual(["up-ended", "up-gone"]);
    expect((await endedJobUploads(db, 100, "job-done")).map((u) => [u.uploadId, u.key, u.outputRoot])).toEqual([
      ["up-ended", "k", "outputs"],
    ]);
  });
});
