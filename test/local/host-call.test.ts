// The host's start-up call into the Worker (edge/host-call.ts): the Scheduler's start-up pass,
// sent straight to workerd with a token of each start. What a user relies on: a restart runs
// it (a local queue paused by a cancel is unpaused). What an attacker would try: the same call
// through the front, or straight to workerd's port, with a made-up token: nothing runs.
import { join } from "node:path";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { HOST_STARTUP_PASS_PATH } from "../../edge/host-call";
import { startTestStack, tempDataDir } from "../helpers/stack";

/** Runs `use` on the stack's database file, opened and closed around it. */
function withServiceDb<T>(dataDir: string, use: (db: Database.Database) => T): T {
  const db = new Database(join(dataDir, "service.db"));
  try {
    return use(db);
  } finally {
    db.close();
  }
}

const localQueuePaused = (dataDir: string) =>
  withServiceDb(
    dataDir,
    (db) => (db.prepare("SELECT value FROM settings WHERE key = 'local_queue_paused'").get() as { value: string } | undefined)?.value,
  );

const pauseLocalQueue = (dataDir: string) =>
  withServiceDb(dataDir, (db) =>
    db
      .prepare("INSERT OR REPLACE INTO settings (key, value, updated_at) VALUES ('local_queue_paused', 'true', ?)")
      .run(new Date().toISOString()),
  );

describe("the host's start-up call", () => {
  it("is refused to anyone else, through the front or straight to workerd, and a restart makes it", async () => {
    const dataDir = tempDataDir();
    const first = await startTestStack(dataDir);
    pauseLocalQueue(dataDir);
    const attempts: Record<string, string>[] = [{}, { "X-Service-Host": "guess" }, { "x-service-host": "" }];
    for (const headers of attempts) {
      const viaFront = await fetch(new URL(HOST_STARTUP_PASS_PATH, first.base), { method: "POST", headers });
      expect(viaFront.status, JSON.stringify(headers)).toBe(404);
      // workerd's own port: the front's token is missing, so the app answers 403 before any route.
      const direct = await fetch(new URL(HOST_STARTUP_PASS_PATH, first.stack.workerUrl), { method: "POST", headers });
      expect(direct.status, JSON.stringify(headers)).toBe(403);
    }
    expect(localQueuePaused(dataDir)).toBe("true");
    await first.stop({ keepData: true });

    const second = await startTestStack(dataDir);
    try {
      expect(localQueuePaused(dataDir)).toBe("false");
    } finally {
      await second.stop();
    }
  });
});
