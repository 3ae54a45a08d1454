// An approval link older than its 24 hours, over real HTTP against the real stack: refused (410,
// a page saying it expired) when opened and when posted, deciding nothing. The links are made by
// the service's own createApprovalLink on the stack's database, with the clock it takes as an
// argument set back 25 h (and, as the control, 23 h): no waiting, no hand-made signature.
import { createClient, type Client } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../edge/db/client";
import { APPROVAL_LINK_HOURS, createApprovalLink } from "../../edge/notifications/approval-link";
import { createUserWithKey, setUpAdmin, startTestStack, type TestStack } from "../helpers/stack";

let t: TestStack;
let admin: { key: string; cookie: string };
let adminId: number;
let rita: { key: string };
let client: Client;
let db: Database;

const hoursAgo = (hours: number) => new Date(Date.now() - hours * 3600_000);
const statusOf = async (jobId: string) => (await t.call("GET", `/api/queue/jobs/${jobId}`, { auth: admin })).body.status as string;
const post = (token: string, form: Record<string, string>) =>
  fetch(`${t.base}/api/notifications/approval/${token}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: t.base },
    body: new URLSearchParams(form),
  });
const usedAt = async (token: string) =>
  (await client.execute({ sql: "SELECT used_at FROM approval_links WHERE id = ?", args: [token.split(".")[0]!] })).rows[0]!.used_at;

beforeAll(async () => {
  t = await startTestStack();
  admin = await setUpAdmin(t);
  adminId = (await t.call("GET", "/api/users/me", { auth: admin })).body.id;
  rita = await createUserWithKey(t, { key: admin.key }, "researcher", "rita");
  client = createClient({ url: `file:${join(t.dataDir, "service.db")}` });
  db = drizzle(client) as unknown as Database;
  expect((await t.call("POST", "/api/configs/environments", { json: { name: "one-gpu" }, auth: admin })).status).toBe(201);
  await t.call("PUT", "/api/configs/one-gpu", { json: { config: { "--num_processes": 1 } }, auth: admin });
  expect((await t.call("PUT", "/api/queue/approval-rules", { json: { local_gpu_threshold: 0 }, auth: admin })).status).toBe(200);
}, 60_000);
afterAll(async () => {
  client?.close();
  await t?.stop();
});

async function blockedJob(): Promise<string> {
  const submitted = await t.call("POST", "/api/queue/submit", { json: { config_name: "one-gpu" }, auth: rita });
  expect(submitted.status, submitted.text).toBeLessThan(300);
  expect(await statusOf(submitted.body.job_id)).toBe("blocked");
  return submitted.body.job_id;
}

describe("an approval link past its 24 hours", () => {
  it("is refused when opened and when posted (410, saying it expired), and decides nothing", async () => {
    expect(APPROVAL_LINK_HOURS).toBe(24);
    const jobId = await blockedJob();
    const token = await createApprovalLink(db, jobId, adminId, hoursAgo(25));

    const page = await fetch(`${t.base}/api/notifications/approval/${token}`);
    expect(page.status).toBe(410);
    expect(await page.text()).toContain("This link has expired.");
    const forms: Record<string, string>[] = [{ decision: "approve" }, { decision: "reject", reason: "too late" }];
    for (const form of forms) {
      const reply = await post(token, form);
      expect(reply.status, form.decision).toBe(410);
      expect(await reply.text()).toContain("This link has expired.");
    }
    expect(await statusOf(jobId)).toBe("blocked");
    expect(await usedAt(token)).toBeNull();
    const audit = (await t.call("GET", "/api/audit", { auth: admin })).body.entries as any[];
    expect(audit.filter((e) => e.target === jobId && /job_(approved|rejected)/.test(e.event_type))).toEqual([]);
  });

  it("while one made 23 hours ago still works (the same recipe, within its 24 hours)", async () => {
    const jobId = await blockedJob();
    const token = await createApprovalLink(db, jobId, adminId, hoursAgo(23));
    expect((await fetch(`${t.base}/api/notifications/approval/${token}`)).status).toBe(200);
    const reply = await post(token, { decision: "approve" });
    expect(reply.status).toBe(200);
    expect(await reply.text()).toContain("approved");
    expect(await statusOf(jobId)).not.toBe("blocked");
    expect(await usedAt(token)).not.toBeNull();
  });
});
