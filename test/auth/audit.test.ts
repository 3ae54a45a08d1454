// The audit trail over real HTTP: which actions leave entries and with what fields, the admin
// listing and its filters, and the hash chain's verification catching edited and removed rows.
import { createClient } from "@libsql/client";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { usernameDigest } from "../../edge/middleware/failure-limits";
import { ADMIN, createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let viewer: { key: string; id: number };

const audit = async (query = "") => (await t.call("GET", `/api/audit${query}`, { auth: { key: admin.key } })).body.entries as any[];

/** Audit entries are written just after the response: waits (bounded) until `match` finds one. */
async function eventually(query: string, match: (e: any) => boolean): Promise<any> {
  for (const deadline = Date.now() + 5_000; ; await new Promise((r) => setTimeout(r, 50))) {
    const found = (await audit(query)).find(match);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no audit entry matching in ${query}: ${JSON.stringify(await audit(query))}`);
  }
}

async function database() {
  return createClient({ url: `file:${join(t.dataDir, "service.db")}` });
}

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  viewer = await createUserWithKey(t, { cookie: admin.cookie }, "viewer", "vera");
});
afterAll(async () => {
  await t?.stop();
});

describe("what is audited", () => {
  it("records a failed login with a hash of the claimed username, address and User-Agent, and never the password or the name", async () => {
    const failed = await t.call("POST", "/api/cloud/auth/login", {
      json: { username: "mallory", password: "guess-number-1" },
      headers: { "user-agent": "brute/1.0" },
    });
    expect(failed.status).toBe(401);
    const username_hash = await usernameDigest("mallory");
    const entry = await eventually("?event_type=login_failed", (e) => e.details.username_hash === username_hash);
    expect(entry).toMatchObject({
      event_type: "login_failed",
      actor_user_id: null,
      actor: null,
      client_ip: "127.0.0.1",
      user_agent: "brute/1.0",
      details: { reason: "wrong username or password", username_hash },
    });
    expect(JSON.stringify(entry)).not.toContain("guess-number-1");
    expect(JSON.stringify(entry)).not.toContain("mallory");
  });

  it("records a successful login with the user", async () => {
    const ok = await t.call("POST", "/api/cloud/auth/login", { json: { username: ADMIN.username, password: ADMIN.password } });
    expect(ok.status).toBe(200);
    const entry = await eventually("?event_type=login_succeeded", (e) => e.actor === ADMIN.username);
    expect(entry.actor_user_id).toBe(ok.body.user.id);
    const cookie = /(st_session=[^;]+)/.exec(ok.headers.get("set-cookie") ?? "")![1]!;
    expect((await t.call("POST", "/api/cloud/auth/logout", { auth: { cookie } })).status).toBe(200);
    await eventually("?event_type=logout", (e) => e.actor_user_id === ok.body.user.id);
  });

  it("records user creation, API key creation and revocation without the key", async () => {
    const created = await eventually("?event_type=user_created", (e) => e.target === `user:${viewer.id}`);
    expect(created).toMatchObject({ actor: ADMIN.username, details: { username: "vera", levels: ["viewer"], via: "admin" } });
    const key = await t.call("POST", "/api/cloud/auth/api-keys", { json: { name: "short-lived" }, auth: { cookie: admin.cookie } });
    expect(key.status).toBe(201);
    const made = await eventually("?event_type=api_key_created", (e) => e.target === `api_key:${key.body.id}`);
    expect(made.details).toMatchObject({ name: "short-lived", prefix: key.body.prefix });
    expect(JSON.stringify(made)).not.toContain(key.body.key);
    expect((await t.call("DELETE", `/api/cloud/auth/api-keys/${key.body.id}`, { auth: { key: admin.key } })).status).toBe(200);
    await eventually("?event_type=api_key_revoked", (e) => e.target === `api_key:${key.body.id}` && e.actor === ADMIN.username);
  });

  it("records approvals, rejections, priority overrides and limit changes with what changed", async () => {
    expect((await t.call("POST", "/api/configs/environments", { json: { name: "gpu2" }, auth: { key: admin.key } })).status).toBe(201);
    expect(
      (await t.call("PUT", "/api/configs/gpu2", { json: { config: { "--num_processes": 2 } }, auth: { key: admin.key } })).status,
    ).toBe(200);
    expect((await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 1 }, auth: { key: admin.key } })).status).toBe(
      200,
    );
    const rules = await eventually("?event_type=approval_rules_changed", () => true);
    expect(rules.details.changed).toEqual({ local_gpu_threshold: { from: null, to: 1 } });

    const first = await t.call("POST", "/api/queue/submit", { json: { config_name: "gpu2", target: "local" }, auth: { key: admin.key } });
    const second = await t.call("POST", "/api/queue/submit", { json: { config_name: "gpu2", target: "local" }, auth: { key: admin.key } });
    expect([first.body.status, second.body.status]).toEqual(["blocked", "blocked"]);
    expect((await t.call("POST", `/api/queue/${first.body.job_id}/approve`, { auth: { key: admin.key } })).status).toBe(200);
    expect(
      (
        await t.call("POST", `/api/queue/${second.body.job_id}/reject?reason=${encodeURIComponent("too big for now")}`, {
          auth: { key: admin.key },
        })
      ).status,
    ).toBe(200);
    expect(
      (await t.call("POST", `/api/queue/${first.body.job_id}/priority`, { json: { priority: 25 }, auth: { key: admin.key } })).status,
    ).toBe(200);
    expect(
      (await t.call("POST", "/api/queue/concurrency", { json: { local_job_max_concurrent: 3 }, auth: { key: admin.key } })).status,
    ).toBe(200);

    await eventually("?event_type=job_approved", (e) => e.target === first.body.job_id && e.actor === ADMIN.username);
    const rejected = await eventually("?event_type=job_rejected", (e) => e.target === second.body.job_id);
    expect(rejected.details).toEqual({ reason: "too big for now" });
    const priority = await eventually("?event_type=priority_overridden", (e) => e.target === first.body.job_id);
    expect(priority.details).toEqual({ priority: 25 });
    const limits = await eventually("?event_type=limits_changed", () => true);
    expect(limits.details.changed).toEqual({ local_job_max_concurrent: { from: 1, to: 3 } });
  });
});

describe("GET /api/audit", () => {
  it("is for admins only", async () => {
    expect((await t.call("GET", "/api/audit")).status).toBe(401);
    expect((await t.call("GET", "/api/audit", { auth: { key: viewer.key } })).status).toBe(403);
    expect((await t.call("GET", "/api/audit/verify", { auth: { key: viewer.key } })).status).toBe(403);
  });

  it("filters by event type, limits, pages back by id and by time", async () => {
    const all = await audit("?limit=1000");
    expect(all.length).toBeGreaterThan(5);
    expect(all.map((e) => e.id)).toEqual([...all.map((e) => e.id)].sort((a, b) => b - a));
    const two = await t.call("GET", "/api/audit?limit=2", { auth: { key: admin.key } });
    expect(two.body.entries.map((e: any) => e.id)).toEqual([all[0].id, all[1].id]);
    expect(two.body.next_before_id).toBe(all[1].id);
    const older = await audit(`?limit=2&before_id=${two.body.next_before_id}`);
    expect(older.map((e) => e.id)).toEqual([all[2].id, all[3].id]);
    expect((await audit("?event_type=login_failed")).every((e) => e.event_type === "login_failed")).toBe(true);
    const middle = all[Math.floor(all.length / 2)];
    const since = await audit(`?limit=1000&since=${encodeURIComponent(middle.occurred_at)}`);
    expect(since.every((e) => e.occurred_at >= middle.occurred_at)).toBe(true);
    expect(since.some((e) => e.id === middle.id)).toBe(true);
    const until = await audit(`?limit=1000&until=${encodeURIComponent(middle.occurred_at)}`);
    expect(until.every((e) => e.occurred_at < middle.occurred_at)).toBe(true);
  });

  it("refuses bad filters with 422 naming them", async () => {
    const bad = await t.call("GET", "/api/audit?limit=0", { auth: { key: admin.key } });
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toContain("limit");
    expect((await t.call("GET", "/api/audit?since=yesterday", { auth: { key: admin.key } })).status).toBe(422);
    const backwards = await t.call("GET", "/api/audit?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z", { auth: { key: admin.key } });
    expect(backwards.status).toBe(422);
    expect(backwards.body.detail).toBe("since must be earlier than until");
  });
});

describe("the hash chain", () => {
  it("keeps one unbroken chain under concurrent writers", async () => {
    const attempts = Array.from({ length: 25 }, (_, i) =>
      t.call("POST", "/api/cloud/auth/login", { json: { username: `racer-${i}`, password: "wrong-password-1" } }),
    );
    expect((await Promise.all(attempts)).every((r) => r.status === 401)).toBe(true);
    for (let i = 0; i < 25; i++) {
      const username_hash = await usernameDigest(`racer-${i}`);
      await eventually("?event_type=login_failed&limit=1000", (e) => e.details.username_hash === username_hash);
    }
    const all = await audit("?limit=1000");
    const ids = all.map((e) => e.id).reverse();
    expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => i + 1));
    for (let i = 1; i < all.length; i++) expect(all[i - 1].prev_hash).toBe(all[i].hash);
    const verified = await t.call("GET", "/api/audit/verify", { auth: { key: admin.key } });
    expect(verified.body).toEqual({ valid: true, entries_checked: all.length, first_invalid: null, last_hash: all[0].hash });
  });

  it("detects an edited entry and then a removed one", async () => {
    const db = await database();
    try {
      const [target] = (await audit("?event_type=login_failed")).slice(-1);
      await db.execute({ sql: "UPDATE audit_log SET actor = 'someone-else' WHERE id = ?", args: [target.id] });
      const edited = await t.call("GET", "/api/audit/verify", { auth: { key: admin.key } });
      expect(edited.body).toMatchObject({
        valid: false,
        first_invalid: { id: target.id, reason: "the entry's contents do not match its hash (edited)" },
      });
      expect(edited.body.entries_checked).toBe(target.id - 1);

      await db.execute({ sql: "UPDATE audit_log SET details = '{not json' WHERE id = ?", args: [target.id] });
      expect((await t.call("GET", "/api/audit/verify", { auth: { key: admin.key } })).body.first_invalid.id).toBe(target.id);
      const original = JSON.stringify(target.details);
      await db.execute({ sql: "UPDATE audit_log SET actor = ?, details = ? WHERE id = ?", args: [target.actor, original, target.id] });
      expect((await t.call("GET", "/api/audit/verify", { auth: { key: admin.key } })).body.valid).toBe(true);

      await db.execute({ sql: "DELETE FROM audit_log WHERE id = ?", args: [target.id + 1] });
      const removed = await t.call("GET", "/api/audit/verify", { auth: { key: admin.key } });
      expect(removed.body).toMatchObject({
        valid: false,
        first_invalid: { id: target.id + 2, reason: `entry ${target.id + 1} is missing` },
      });
    } finally {
      db.close();
    }
  });
});
