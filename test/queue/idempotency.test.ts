// Idempotent submit (issue 30, Build 7) over real HTTP against the real stack: an Idempotency-Key
// on each submit route replays the first answer for 24 h and queues nothing more, per user; the
// key with another body is refused; duplicates sent at once queue one job; bad keys are refused.
import { createClient } from "@libsql/client";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";
import { until } from "../helpers/wait";

let t: TestStack;
let admin: { key: string };
let ada: { key: string; id: number };
let bob: { key: string; id: number };
let vic: { key: string };

const jobs = async () =>
  ((await t.call("GET", "/api/queue?include_completed=true&limit=1000", { auth: { key: admin.key } })).body.jobs as any[]).map(
    (j) => j.job_id as string,
  );
const post = (path: string, who: { key: string }, key: string | null, json: unknown = { config_name: "gpu" }) =>
  t.call("POST", path, { json, auth: { key: who.key }, headers: key === null ? {} : { "Idempotency-Key": key } });
const submit = (who: { key: string }, key: string | null, json: unknown = { config_name: "gpu" }) =>
  post("/api/queue/submit", who, key, json);

/** Moves the stored time of a key back by `hours`, as if it had been sent then. */
async function age(userId: number, key: string, hours: number) {
  const db = createClient({ url: `file:${join(t.dataDir, "service.db")}` });
  try {
    const moved = await db.execute({
      sql: "UPDATE idempotency_keys SET created_at = ? WHERE user_id = ? AND key = ?",
      args: [new Date(Date.now() - hours * 3_600_000).toISOString(), userId, key],
    });
    expect(moved.rowsAffected).toBe(1);
  } finally {
    db.close();
  }
}
async function storedKeys(userId: number): Promise<string[]> {
  const db = createClient({ url: `file:${join(t.dataDir, "service.db")}` });
  try {
    const rows = await db.execute({ sql: "SELECT key FROM idempotency_keys WHERE user_id = ? ORDER BY key", args: [userId] });
    return rows.rows.map((r) => String(r.key));
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  ada = await createUserWithKey(t, admin, "researcher", "ada");
  bob = await createUserWithKey(t, admin, "researcher", "bob");
  vic = await createUserWithKey(t, admin, "viewer", "vic");
  // No runner here: a job needing a GPU waits in the queue, stored.
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "gpu" }, auth: { key: admin.key } })).status).toBe(201);
  await t.call("PUT", "/api/configs/gpu", {
    json: { config: { "--trainer": "demo", "--num_processes": 1, "--max_train_steps": 5 } },
    auth: { key: admin.key },
  });
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

describe("Idempotency-Key on POST /api/queue/submit", () => {
  it("answers the first answer again, marked as a replay, and queues nothing more", async () => {
    const before = await jobs();
    const first = await submit(ada, "order-1");
    expect(first.status, first.text).toBe(200);
    expect(first.body.status).toBe("queued");
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const again = await submit(ada, "order-1");
    expect(again.status).toBe(200);
    expect(again.text).toBe(first.text);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect((await jobs()).filter((j) => !before.includes(j))).toEqual([first.body.job_id]);
  });

  it("replays a refusal too (same status and body), and without a key every submit queues", async () => {
    const refused = await submit(ada, "order-404", { config_name: "no-such-environment" });
    expect(refused.status).toBe(404);
    const replayed = await submit(ada, "order-404", { config_name: "no-such-environment" });
    expect(replayed.status).toBe(404);
    expect(replayed.text).toBe(refused.text);
    expect(replayed.headers.get("idempotent-replayed")).toBe("true");
    const before = await jobs();
    await submit(ada, null);
    await submit(ada, null);
    expect((await jobs()).length).toBe(before.length + 2);
  });

  it("refuses the same key with another body (422 naming the conflict) and queues nothing", async () => {
    const first = await submit(ada, "order-2");
    const before = await jobs();
    const other = await submit(ada, "order-2", { config_name: "gpu", metadata: { run_name: "different" } });
    expect(other.status).toBe(422);
    expect(other.body.code).toBe("idempotency_key_reused");
    expect(other.body.detail).toContain("another request");
    expect(await jobs()).toEqual(before);
    // The key still answers its own request.
    expect((await submit(ada, "order-2")).body.job_id).toBe(first.body.job_id);
    // And on another submit route it is another request too.
    const elsewhere = await post("/api/training/start", ada, "order-2", { "--max_train_steps": "5" });
    expect(elsewhere.status).toBe(422);
    expect(elsewhere.body.code).toBe("idempotency_key_reused");
    expect(await jobs()).toEqual(before);
  });

  it("keeps each user's keys apart: another user's same key queues their own job and never sees the first answer", async () => {
    const mine = await submit(ada, "shared-key");
    const before = await jobs();
    const theirs = await submit(bob, "shared-key");
    expect(theirs.status).toBe(200);
    expect(theirs.headers.get("idempotent-replayed")).toBeNull();
    expect(theirs.body.job_id).not.toBe(mine.body.job_id);
    expect((await jobs()).filter((j) => !before.includes(j))).toEqual([theirs.body.job_id]);
    const owner = (await t.call("GET", `/api/queue/jobs/${theirs.body.job_id}`, { auth: { key: admin.key } })).body;
    expect(owner.user_id).toBe(bob.id);
  });

  it("stores the answer with the job: a no_wait rejection and an answer carrying the submitter's budget replay byte for byte", async () => {
    // No runner: a GPU job cannot start now, so no_wait rejects it (200, success false), storing no job.
    const before = await jobs();
    const rejected = await submit(bob, "no-wait-1", { config_name: "gpu", no_wait: true });
    expect([rejected.status, rejected.body.status]).toEqual([200, "rejected"]);
    const again = await submit(bob, "no-wait-1", { config_name: "gpu", no_wait: true });
    expect([again.text, again.headers.get("idempotent-replayed")]).toEqual([rejected.text, "true"]);
    expect(await jobs()).toEqual(before);
    // With a budget of bob's, the answer carries where he stands; its replay too, with one job queued.
    const set = await t.call("PUT", "/api/admin/budgets", { json: { users: { [String(bob.id)]: 1000 } }, auth: { key: admin.key } });
    expect(set.status, set.text).toBe(200);
    try {
      const budgeted = await submit(bob, "budgeted-1");
      expect(budgeted.status, budgeted.text).toBe(200);
      expect(budgeted.body.budget).toMatchObject({ scope: "user", name: "bob", limit: 1000, state: "ok" });
      const replayed = await submit(bob, "budgeted-1");
      expect([replayed.text, replayed.headers.get("idempotent-replayed")]).toEqual([budgeted.text, "true"]);
      expect((await jobs()).filter((j) => !before.includes(j))).toEqual([budgeted.body.job_id]);
    } finally {
      await t.call("PUT", "/api/admin/budgets", { json: { users: { [String(bob.id)]: null } }, auth: { key: admin.key } });
    }
  });

  it("queues one job for duplicates sent at once", async () => {
    const before = await jobs();
    const replies = await Promise.all(Array.from({ length: 8 }, () => submit(ada, "burst-1")));
    const added = (await jobs()).filter((j) => !before.includes(j));
    expect(added).toHaveLength(1);
    for (const reply of replies) {
      // The first is answered; the others replay it, or (still being handled) are told to try again.
      if (reply.status === 200) expect(reply.body.job_id).toBe(added[0]);
      else expect([reply.status, reply.body.code]).toEqual([409, "idempotency_key_in_use"]);
    }
    expect(replies.filter((r) => r.status === 200 && r.headers.get("idempotent-replayed") === null)).toHaveLength(1);
    const later = await submit(ada, "burst-1");
    expect([later.status, later.body.job_id, later.headers.get("idempotent-replayed")]).toEqual([200, added[0], "true"]);
  });

  it("forgets a key after 24 h: the same key then queues a new job, and housekeeping deletes old keys", async () => {
    const first = await submit(ada, "daily");
    await age(ada.id, "daily", 23);
    expect((await submit(ada, "daily")).body.job_id).toBe(first.body.job_id);
    await age(ada.id, "daily", 25);
    const next = await submit(ada, "daily");
    expect(next.status).toBe(200);
    expect(next.headers.get("idempotent-replayed")).toBeNull();
    expect(next.body.job_id).not.toBe(first.body.job_id);

    await submit(ada, "sweep-me");
    await age(ada.id, "sweep-me", 25);
    await until("the Scheduler's housekeeping to sweep the old key", async () => !(await storedKeys(ada.id)).includes("sweep-me"), {
      timeoutMs: 30_000,
    });
    expect(await storedKeys(ada.id)).toContain("daily");
  });

  it("refuses a bad key (empty, over 255 characters, not visible ASCII) with 400 and queues nothing", async () => {
    const before = await jobs();
    for (const key of ["", "x".repeat(256), "has space", "tab\there", "caf\u00e9"]) {
      const reply = await submit(ada, key);
      expect([reply.status, reply.body.code], JSON.stringify(key)).toEqual([400, "invalid_idempotency_key"]);
      expect(reply.body.detail).toContain("visible ASCII");
    }
    expect((await submit(ada, "x".repeat(255))).status).toBe(200);
    expect((await jobs()).length).toBe(before.length + 1);
  });

  it("stores nothing for a caller the route refuses: a viewer's key is not taken", async () => {
    const before = await jobs();
    const refused = await submit(vic, "viewer-key");
    expect(refused.status).toBe(403);
    expect(await jobs()).toEqual(before);
    const db = createClient({ url: `file:${join(t.dataDir, "service.db")}` });
    try {
      expect((await db.execute("SELECT count(*) AS n FROM idempotency_keys WHERE key = 'viewer-key'")).rows[0]!.n).toBe(0);
    } finally {
      db.close();
    }
  });
});

/** A demo training's fields for POST /api/training/start, `steps` long. */
const startFields = (steps: string) => ({
  "--model_family": "flux",
  "--model_type": "lora",
  "--pretrained_model_name_or_path": "none",
  "--output_dir": "output",
  "--data_backend_config": "d.json",
  "--num_processes": "1",
  "--trainer": "demo",
  "--max_train_steps": steps,
});

describe("Idempotency-Key on the other submit routes", () => {
  it("replays POST /api/training/start", async () => {
    const before = await jobs();
    const form = startFields("5");
    const first = await post("/api/training/start", ada, "start-1", form);
    expect(first.status, first.text).toBe(200);
    const again = await post("/api/training/start", ada, "start-1", form);
    expect([again.status, again.text, again.headers.get("idempotent-replayed")]).toEqual([200, first.text, "true"]);
    expect((await jobs()).filter((j) => !before.includes(j))).toEqual([first.body.job_id]);
  });

  it("replays POST /api/training/start sent as a multipart form, whose fields the route still reads after the key's hash", async () => {
    const before = await jobs();
    const form = () => {
      const data = new FormData();
      for (const [name, value] of Object.entries(startFields("7"))) data.append(name, value);
      return data;
    };
    // The same bytes each time (a new FormData would draw a new boundary: another request).
    const encoded = new Response(form());
    const type = encoded.headers.get("content-type")!;
    const bytes = new Uint8Array(await encoded.arrayBuffer());
    const send = () =>
      t.call("POST", "/api/training/start", {
        body: bytes,
        auth: { key: ada.key },
        headers: { "content-type": type, "Idempotency-Key": "start-form-1" },
      });
    const first = await send();
    expect(first.status, first.text).toBe(200);
    const saved = await t.call("GET", `/api/configs/${first.body.environment}`, { auth: { key: ada.key } });
    expect(saved.body.config).toMatchObject({ "--max_train_steps": 7, "--trainer": "demo", "--data_backend_config": "d.json" });
    const again = await send();
    expect([again.status, again.headers.get("idempotent-replayed")]).toEqual([200, "true"]);
    expect(again.body.job_id).toBe(first.body.job_id);
    expect((await jobs()).filter((j) => !before.includes(j))).toEqual([first.body.job_id]);
  });

  it("replays POST /api/cloud/jobs/submit (provider workers: queued for remote workers)", async () => {
    const before = await jobs();
    const body = { config_name: "gpu", provider: "workers" };
    const first = await post("/api/cloud/jobs/submit", admin, "cloud-1", body);
    expect(first.status, first.text).toBe(200);
    const again = await post("/api/cloud/jobs/submit", admin, "cloud-1", body);
    expect([again.status, again.text, again.headers.get("idempotent-replayed")]).toEqual([200, first.text, "true"]);
    expect((await jobs()).filter((j) => !before.includes(j))).toEqual([first.body.job_id]);
  });

  it("replays POST /api/queue/{job_id}/retry: one retry queued", async () => {
    const old = (await submit(ada, null)).body.job_id as string;
    expect((await t.call("POST", `/api/queue/${old}/cancel`, { auth: { key: ada.key } })).status).toBe(200);
    const before = await jobs();
    const first = await post(`/api/queue/${old}/retry`, ada, "retry-1", undefined);
    expect(first.status, first.text).toBe(200);
    const again = await post(`/api/queue/${old}/retry`, ada, "retry-1", undefined);
    expect([again.status, again.text, again.headers.get("idempotent-replayed")]).toEqual([200, first.text, "true"]);
    expect((await jobs()).filter((j) => !before.includes(j))).toEqual([first.body.job_id]);
  });
});
